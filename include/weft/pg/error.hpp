// Errors of weft::pg, the PostgreSQL client.
//
// weft::pg::error is every failure the server or the connection reports: a statement the
// server rejected (sqlstate() "42P01" for a missing table, "23505" for a unique violation, ...,
// with the server's detail and hint when it sent them), a connection that could not be opened
// (sqlstate "08001") or that was lost ("08006", or the server's own code such as "57P01" when
// the backend was terminated), a call on a closed connection ("08003"). Time limits and
// cancellation stay weft's own timeout_error and cancelled_error. A value that does not convert
// to the C++ type asked for is a conversion_error. Misuse (two queries at once on one
// connection, a column that does not exist) is a std::logic_error.
#pragma once

#include <string>

#include "weft/error.hpp"

namespace weft::pg {

// A failure of the PostgreSQL client (see above): sqlstate(), the server's message, detail and
// hint.
class error : public weft::error {
 public:
  // message is the full what(); primary is the server's (or libpq's) message alone.
  error(const std::string& message, std::string sqlstate, std::string primary,
        std::string detail = {}, std::string hint = {});

  // The five-character SQLSTATE code ("42P01"); see the PostgreSQL manual, appendix A.
  const std::string& sqlstate() const noexcept { return sqlstate_; }
  // The server's (or libpq's) message alone.
  const std::string& primary_message() const noexcept { return primary_; }
  const std::string& detail() const noexcept { return detail_; }  // empty when none was sent
  const std::string& hint() const noexcept { return hint_; }      // empty when none was sent

 private:
  std::string sqlstate_;
  std::string primary_;
  std::string detail_;
  std::string hint_;
};

// A column value that cannot be read as the requested type: NULL read as a non-optional type,
// "abc" read as int, 300 read as std::int8_t. The message names the column, row and value.
class conversion_error : public weft::error {
 public:
  using weft::error::error;
};

}  // namespace weft::pg
