// The rows a weft::pg query returned.
//
// A result owns the server's answer (libpq's PGresult) and is move-only; rows and fields are
// light views into it, valid while the result lives (so is a std::string_view read from a
// field). Values arrive in PostgreSQL's text format and are converted on read:
//   row[0].as<int>(), row["name"].as<std::string>(), row["note"].as<std::optional<std::string>>()
// as<T> supports bool, every integer type, float, double, std::string, std::string_view,
// pg::bytea (std::vector<std::byte>) and std::optional<T> of these (NULL reads as std::nullopt).
// A bytea column read as pg::bytea gives back its exact bytes, NUL included (the server's hex
// text format, \x..., is decoded; the escape format of bytea_output = escape is refused).
// A NULL read as a non-optional type, or a value that does not parse as T or does not fit in it,
// is a pg::conversion_error; a column index or name that does not exist is std::out_of_range.
// Plain data, no I/O: any thread may read a result it owns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "weft/pg/param.hpp"

// libpq's result type, declared here so that this header need not include <libpq-fe.h>.
typedef struct pg_result PGresult;

namespace weft::pg {

class result;

namespace detail {
struct result_deleter {
  void operator()(PGresult* raw) const noexcept;
};

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

[[noreturn]] void throw_null_value(const PGresult* raw, int row, int column,
                                   std::string_view wanted);
[[noreturn]] void throw_bad_value(const PGresult* raw, int row, int column, std::string_view wanted,
                                  std::string_view why);
bool parse_bool(const PGresult* raw, int row, int column);
long long parse_signed(const PGresult* raw, int row, int column, long long low, long long high,
                       std::string_view wanted);
unsigned long long parse_unsigned(const PGresult* raw, int row, int column, unsigned long long high,
                                  std::string_view wanted);
double parse_floating(const PGresult* raw, int row, int column, std::string_view wanted);
std::vector<std::byte> parse_bytea(const PGresult* raw, int row, int column);
}  // namespace detail

// One value: a column of a row.
class field {
 public:
  // Made by row; a field is a view into its result.
  field(const PGresult* raw, int row, int column) noexcept
      : raw_(raw), row_(row), column_(column) {}

  // True for SQL NULL.
  bool is_null() const noexcept;
  // The value as the server sent it (text format); empty for NULL.
  std::string_view text() const noexcept;
  std::string_view column_name() const noexcept;  // the column's name
  oid type() const noexcept;  // the column's type oid (23 for int4, 25 for text, ...)
  // The column's position in the row.
  std::size_t column_index() const noexcept { return static_cast<std::size_t>(column_); }

  template <class T>
  // The value converted to T (see above for the types, NULL and the errors).
  T as() const {
    if constexpr (detail::is_optional<T>::value) {
      if (is_null()) {
        return std::nullopt;
      }
      return as<typename T::value_type>();
    } else {
      if (is_null()) {
        detail::throw_null_value(raw_, row_, column_, type_name<T>());
      }
      return convert<T>();
    }
  }

 private:
  template <class T>
  static std::string_view type_name() {
    if constexpr (std::is_same_v<T, bool>) {
      return "bool";
    } else if constexpr (std::is_integral_v<T>) {
      return std::is_signed_v<T> ? "a signed integer" : "an unsigned integer";
    } else if constexpr (std::is_floating_point_v<T>) {
      return "a floating-point number";
    } else if constexpr (std::is_same_v<T, std::vector<std::byte>>) {
      return "bytes";
    } else {
      return "a string";
    }
  }

  template <class T>
  T convert() const {
    if constexpr (std::is_same_v<T, bool>) {
      return detail::parse_bool(raw_, row_, column_);
    } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      return static_cast<T>(detail::parse_signed(raw_, row_, column_, std::numeric_limits<T>::min(),
                                                 std::numeric_limits<T>::max(), type_name<T>()));
    } else if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(detail::parse_unsigned(raw_, row_, column_,
                                                   std::numeric_limits<T>::max(), type_name<T>()));
    } else if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(detail::parse_floating(raw_, row_, column_, type_name<T>()));
    } else if constexpr (std::is_same_v<T, std::string>) {
      return std::string(text());
    } else if constexpr (std::is_same_v<T, std::string_view>) {
      return text();
    } else if constexpr (std::is_same_v<T, std::vector<std::byte>>) {
      return detail::parse_bytea(raw_, row_, column_);
    } else {
      static_assert(detail::always_false<T>,
                    "weft::pg::field::as<T>: unsupported type (see weft/pg/result.hpp)");
    }
  }

  const PGresult* raw_;
  int row_;
  int column_;
};

// One row of a result.
class row {
 public:
  // Made by result; a row is a view into it.
  row(const PGresult* raw, int index) noexcept : raw_(raw), index_(index) {}

  std::size_t size() const noexcept;  // number of columns
  // The row's position in the result.
  std::size_t index() const noexcept { return static_cast<std::size_t>(index_); }
  // std::out_of_range for a column that does not exist.
  field operator[](std::size_t column) const;
  field operator[](std::string_view column_name) const;
  field at(std::size_t column) const { return (*this)[column]; }                 // as operator[]
  field at(std::string_view column_name) const { return (*this)[column_name]; }  // as operator[]

  // Shorthands for row[column].as<T>().
  template <class T>
  T get(std::size_t column) const {
    return (*this)[column].template as<T>();
  }
  template <class T>
  T get(std::string_view column_name) const {
    return (*this)[column_name].template as<T>();
  }

 private:
  const PGresult* raw_;
  int index_;
};

// The rows a query returned (see above).
class result {
 public:
  // Walks the rows in order: for (pg::row each : result).
  class iterator {
   public:
    // The standard iterator protocol (an input iterator yielding rows by value).
    using iterator_category = std::input_iterator_tag;
    using value_type = pg::row;              // pg::row
    using difference_type = std::ptrdiff_t;  // std::ptrdiff_t
    using pointer = void;                    // rows are made on the fly: no pointer
    using reference = pg::row;               // rows are returned by value

    iterator() noexcept = default;
    // Made by begin() and end().
    iterator(const PGresult* raw, int index) noexcept : raw_(raw), index_(index) {}
    // The standard iterator protocol: the row, the next one, equality.
    pg::row operator*() const noexcept { return pg::row(raw_, index_); }
    // The next row.
    iterator& operator++() noexcept {
      ++index_;
      return *this;
    }
    // The next row, returning the current one.
    iterator operator++(int) noexcept {
      iterator before = *this;
      ++index_;
      return before;
    }
    // Same position.
    bool operator==(const iterator& other) const noexcept { return index_ == other.index_; }

   private:
    const PGresult* raw_ = nullptr;
    int index_ = 0;
  };

  result() noexcept = default;  // empty: no rows, no columns
  // Takes ownership of a libpq result (weft's own use).
  explicit result(PGresult* raw) noexcept : raw_(raw) {}

  std::size_t size() const noexcept;  // number of rows
  // True when the result has no rows.
  bool empty() const noexcept { return size() == 0; }
  // std::out_of_range past the last row. Not on a temporary result (`conn.query(...)[0]`): the
  // row would outlive the data it views; keep the result in a variable first.
  pg::row operator[](std::size_t index) const&;
  pg::row at(std::size_t index) const& { return (*this)[index]; }  // as operator[]
  pg::row operator[](std::size_t index) const&& = delete;
  pg::row at(std::size_t index) const&& = delete;
  iterator begin() const noexcept { return iterator(raw_.get(), 0); }  // the first row
  // Past the last row.
  iterator end() const noexcept { return iterator(raw_.get(), static_cast<int>(size())); }

  // The number of columns, a column's name and its type's oid (std::out_of_range for a column
  // that does not exist).
  std::size_t columns() const noexcept;
  std::string_view column_name(std::size_t column) const;  // std::out_of_range if none
  // The column's type oid (23 for int4, 25 for text, ...).
  oid column_type(std::size_t column) const;
  // The index of a column by name; std::out_of_range naming the columns there are.
  std::size_t column_index(std::string_view column_name) const;

  // Rows an INSERT, UPDATE, DELETE, MERGE, SELECT, MOVE, FETCH or COPY touched; 0 otherwise.
  std::uint64_t affected_rows() const noexcept;
  // The command tag the server sent ("INSERT 0 1", "SELECT 3", "BEGIN").
  std::string_view command_tag() const noexcept;

  // Shorthand for a one-value result: (*this)[0][0].as<T>(); std::out_of_range when empty.
  template <class T>
  T value() const {
    return (*this)[0][0].template as<T>();
  }

 private:
  std::unique_ptr<PGresult, detail::result_deleter> raw_;
};

}  // namespace weft::pg
