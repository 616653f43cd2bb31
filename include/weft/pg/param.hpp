// Query parameters: how C++ values travel as $1, $2, ... of a weft::pg query.
//
// Every parameter is encoded before the query is sent (the query keeps no reference to the
// caller's values). Supported: bool, every integer type, float, double, std::string,
// std::string_view, const char*, weft::pg::bytea (std::vector<std::byte>) and
// std::span<const std::byte> (bytea, sent in binary), std::optional<T> of any of these
// (std::nullopt is SQL NULL), std::nullptr_t and std::nullopt (NULL). Numbers and bool carry
// their type (int4, int8, float8, bool, ...); strings and NULLs are sent as "unknown", so the
// server infers the type from the statement (a string bound to a date or json column just
// works). An unsupported type is a compile error.
//
// Text and binary: strings travel in PostgreSQL's text format, which cannot hold a NUL byte
// (libpq reads a text value up to its first NUL, so "abc\0def" would arrive as "abc"). A query
// whose text parameter contains a NUL is therefore refused before anything is sent, with a
// pg::error (SQLSTATE 22021, what the server reports for such text) naming the parameter and
// the offset; the connection stays usable. Binary data goes as bytea: every byte, NUL included,
// travels in binary format with its length. Bytes held in a std::string go as
// std::as_bytes(std::span(text)). Read a bytea column back with as<pg::bytea>() (result.hpp),
// which decodes the server's hex text format into the exact bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace weft::pg {

// A PostgreSQL type's object id (pg_type.oid).
using oid = unsigned int;

// Binary data: a bytea parameter, and what as<pg::bytea>() reads from a bytea column.
using bytea = std::vector<std::byte>;

// One encoded parameter: its bytes (none for NULL), the type it is declared with (0: let the
// server infer it) and whether the bytes are binary.
struct param {
  std::optional<std::string> value;  // the bytes; nullopt sends NULL
  oid type = 0;                      // the declared type; 0 lets the server infer it
  bool binary = false;               // value holds binary bytes (bytea), not text
};

namespace type_oid {
// The oids of the built-in types that parameters are declared as.
inline constexpr oid unknown = 0;
inline constexpr oid boolean = 16;    // bool
inline constexpr oid bytea = 17;      // bytea (binary)
inline constexpr oid int8 = 20;       // bigint
inline constexpr oid int2 = 21;       // smallint
inline constexpr oid int4 = 23;       // integer
inline constexpr oid text = 25;       // text
inline constexpr oid float4 = 700;    // real
inline constexpr oid float8 = 701;    // double precision
inline constexpr oid numeric = 1700;  // numeric
}  // namespace type_oid

namespace detail {
param encode_bool(bool value);
param encode_signed(long long value, oid type);
param encode_unsigned(unsigned long long value, oid type);
param encode_floating(double value, oid type);
param encode_text(std::string_view value);
param encode_bytes(std::span<const std::byte> value);

template <class T>
inline constexpr bool always_false = false;
}  // namespace detail

template <class T>
// The parameter a query sends for value (see above for the types; unsupported ones fail to
// compile).
param to_param(const T& value) {
  using type = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<type, bool>) {
    return detail::encode_bool(value);
  } else if constexpr (std::is_integral_v<type> && std::is_signed_v<type>) {
    constexpr oid declared = sizeof(type) <= 2   ? type_oid::int2
                             : sizeof(type) <= 4 ? type_oid::int4
                                                 : type_oid::int8;
    return detail::encode_signed(value, declared);
  } else if constexpr (std::is_integral_v<type>) {
    // Each unsigned type goes to the smallest signed SQL type that holds all its values.
    constexpr oid declared = sizeof(type) == 1   ? type_oid::int2
                             : sizeof(type) == 2 ? type_oid::int4
                             : sizeof(type) == 4 ? type_oid::int8
                                                 : type_oid::numeric;
    return detail::encode_unsigned(value, declared);
  } else if constexpr (std::is_same_v<type, float>) {
    return detail::encode_floating(value, type_oid::float4);
  } else if constexpr (std::is_same_v<type, double>) {
    return detail::encode_floating(value, type_oid::float8);
  } else if constexpr (std::is_same_v<type, std::nullptr_t> ||
                       std::is_same_v<type, std::nullopt_t>) {
    return param{};
  } else if constexpr (std::is_convertible_v<const type&, std::string_view>) {
    return detail::encode_text(std::string_view(value));
  } else if constexpr (std::is_convertible_v<const type&, std::span<const std::byte>>) {
    return detail::encode_bytes(std::span<const std::byte>(value));
  } else if constexpr (requires { typename type::value_type; } &&
                       std::is_same_v<type, std::optional<typename type::value_type>>) {
    if (!value.has_value()) {
      param null = to_param(typename type::value_type{});
      null.value.reset();
      null.binary = false;
      return null;
    }
    return to_param(*value);
  } else if constexpr (std::is_same_v<type, param>) {
    return value;
  } else {
    static_assert(detail::always_false<type>,
                  "weft::pg: no parameter encoding for this type (see weft/pg/param.hpp for the "
                  "supported ones; convert the value to a string or number first)");
  }
}

}  // namespace weft::pg
