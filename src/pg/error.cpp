// weft::pg::error: the SQLSTATE and the server's message parts beside the full message.
#include "weft/pg/error.hpp"

#include <utility>

namespace weft::pg {

error::error(const std::string& message, std::string sqlstate, std::string primary,
             std::string detail, std::string hint)
    : weft::error(message),
      sqlstate_(std::move(sqlstate)),
      primary_(std::move(primary)),
      detail_(std::move(detail)),
      hint_(std::move(hint)) {}

}  // namespace weft::pg
