// Encoding query parameters in PostgreSQL's text format (bytea: binary).
#include <charconv>
#include <cmath>
#include <string>

#include "weft/pg/param.hpp"

namespace weft::pg::detail {

param encode_bool(bool value) { return param{value ? "true" : "false", type_oid::boolean}; }

param encode_signed(long long value, oid type) { return param{std::to_string(value), type}; }

param encode_unsigned(unsigned long long value, oid type) {
  return param{std::to_string(value), type};
}

param encode_floating(double value, oid type) {
  // The server spells the special values this way; to_chars would write "inf" and "nan".
  if (std::isnan(value)) {
    return param{"NaN", type};
  }
  if (std::isinf(value)) {
    return param{value > 0 ? "Infinity" : "-Infinity", type};
  }
  // Shortest representation that reads back as the same double: no precision is lost.
  char buffer[64];
  auto [end, status] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return param{std::string(buffer, end), type};
}

param encode_text(std::string_view value) { return param{std::string(value), type_oid::unknown}; }

param encode_bytes(std::span<const std::byte> value) {
  return param{std::string(reinterpret_cast<const char*>(value.data()), value.size()),
               type_oid::bytea, true};
}

}  // namespace weft::pg::detail
