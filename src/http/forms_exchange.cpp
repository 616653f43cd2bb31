// multipart_reader over a server exchange (forms.hpp): the request's Content-Type, and
// read_body_chunk() as the source. Apart from forms.cpp so that its fuzzer needs no server.
#include <optional>
#include <string_view>

#include "weft/http/forms.hpp"
#include "weft/http/server.hpp"

namespace weft::http {

multipart_reader::multipart_reader(exchange& ex, multipart_limits limits)
    : multipart_reader(
          [&ex]() -> std::string_view {
            const std::optional<std::string_view> type = ex.request().headers.get("Content-Type");
            if (!type) {
              throw form_error(
                  "weft::http::multipart_reader: the request has no Content-Type (a form "
                  "upload is multipart/form-data)",
                  status::unsupported_media_type);
            }
            return *type;
          }(),
          [&ex] { return ex.read_body_chunk(); }, limits) {}

}  // namespace weft::http
