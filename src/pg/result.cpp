// Reading a PGresult: row and column access and the text-format conversions behind as<T>.
#include "weft/pg/result.hpp"

#include <libpq-fe.h>

#include <charconv>
#include <stdexcept>
#include <string>

#include "weft/pg/error.hpp"

namespace weft::pg {
namespace detail {
namespace {

std::string describe_position(const PGresult* raw, int row, int column) {
  return "column \"" + std::string(PQfname(raw, column)) + "\" of row " + std::to_string(row);
}

std::string_view raw_text(const PGresult* raw, int row, int column) {
  return std::string_view(PQgetvalue(raw, row, column),
                          static_cast<std::size_t>(PQgetlength(raw, row, column)));
}

// Hex digit value, or -1.
int hex_value(char digit) {
  if (digit >= '0' && digit <= '9') {
    return digit - '0';
  }
  if (digit >= 'a' && digit <= 'f') {
    return digit - 'a' + 10;
  }
  if (digit >= 'A' && digit <= 'F') {
    return digit - 'A' + 10;
  }
  return -1;
}

}  // namespace

void result_deleter::operator()(PGresult* raw) const noexcept { PQclear(raw); }

void throw_null_value(const PGresult* raw, int row, int column, std::string_view wanted) {
  throw conversion_error("weft::pg: " + describe_position(raw, row, column) +
                         " is NULL; read it as " + "std::optional<T> to accept NULL (wanted " +
                         std::string(wanted) + ")");
}

void throw_bad_value(const PGresult* raw, int row, int column, std::string_view wanted,
                     std::string_view why) {
  throw conversion_error("weft::pg: " + describe_position(raw, row, column) + " holds \"" +
                         std::string(raw_text(raw, row, column)) + "\", which is not " +
                         std::string(wanted) + " (" + std::string(why) + ")");
}

bool parse_bool(const PGresult* raw, int row, int column) {
  std::string_view text = raw_text(raw, row, column);
  if (text == "t" || text == "true") {
    return true;
  }
  if (text == "f" || text == "false") {
    return false;
  }
  throw_bad_value(raw, row, column, "bool", "expected t or f");
}

long long parse_signed(const PGresult* raw, int row, int column, long long low, long long high,
                       std::string_view wanted) {
  std::string_view text = raw_text(raw, row, column);
  long long value = 0;
  auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (status == std::errc::result_out_of_range) {
    throw_bad_value(raw, row, column, wanted, "out of range");
  }
  if (status != std::errc() || end != text.data() + text.size()) {
    throw_bad_value(raw, row, column, wanted, "not an integer");
  }
  if (value < low || value > high) {
    throw_bad_value(raw, row, column, wanted,
                    "out of range " + std::to_string(low) + ".." + std::to_string(high));
  }
  return value;
}

unsigned long long parse_unsigned(const PGresult* raw, int row, int column, unsigned long long high,
                                  std::string_view wanted) {
  std::string_view text = raw_text(raw, row, column);
  if (!text.empty() && text.front() == '-') {
    throw_bad_value(raw, row, column, wanted, "negative");
  }
  unsigned long long value = 0;
  auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (status == std::errc::result_out_of_range) {
    throw_bad_value(raw, row, column, wanted, "out of range");
  }
  if (status != std::errc() || end != text.data() + text.size()) {
    throw_bad_value(raw, row, column, wanted, "not an integer");
  }
  if (value > high) {
    throw_bad_value(raw, row, column, wanted, "out of range 0.." + std::to_string(high));
  }
  return value;
}

double parse_floating(const PGresult* raw, int row, int column, std::string_view wanted) {
  std::string_view text = raw_text(raw, row, column);
  // from_chars reads "NaN", "Infinity" and "-Infinity" (the server's spellings) as well.
  double value = 0;
  auto [end, status] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (status != std::errc() || end != text.data() + text.size()) {
    throw_bad_value(raw, row, column, wanted, "not a number");
  }
  return value;
}

std::vector<std::byte> parse_bytea(const PGresult* raw, int row, int column) {
  std::string_view text = raw_text(raw, row, column);
  // bytea's text output is hex ("\x0a1b") since PostgreSQL 9.0 (bytea_output = hex).
  if (text.size() < 2 || text[0] != '\\' || text[1] != 'x' || text.size() % 2 != 0) {
    throw_bad_value(raw, row, column, "bytes",
                    "expected bytea in hex format (\\x...); set bytea_output = hex");
  }
  std::vector<std::byte> bytes;
  bytes.reserve((text.size() - 2) / 2);
  for (std::size_t index = 2; index < text.size(); index += 2) {
    int high = hex_value(text[index]);
    int low = hex_value(text[index + 1]);
    if (high < 0 || low < 0) {
      throw_bad_value(raw, row, column, "bytes", "bad hex digit");
    }
    bytes.push_back(static_cast<std::byte>(high * 16 + low));
  }
  return bytes;
}

}  // namespace detail

bool field::is_null() const noexcept { return PQgetisnull(raw_, row_, column_) != 0; }

std::string_view field::text() const noexcept {
  return std::string_view(PQgetvalue(raw_, row_, column_),
                          static_cast<std::size_t>(PQgetlength(raw_, row_, column_)));
}

std::string_view field::column_name() const noexcept { return PQfname(raw_, column_); }

oid field::type() const noexcept { return PQftype(raw_, column_); }

std::size_t row::size() const noexcept {
  return raw_ == nullptr ? 0 : static_cast<std::size_t>(PQnfields(raw_));
}

field row::operator[](std::size_t column) const {
  if (column >= size()) {
    throw std::out_of_range("weft::pg::row: column " + std::to_string(column) +
                            " does not exist; the row has " + std::to_string(size()) + " columns");
  }
  return field(raw_, index_, static_cast<int>(column));
}

field row::operator[](std::string_view column_name) const {
  for (int column = 0; column < static_cast<int>(size()); ++column) {
    if (column_name == PQfname(raw_, column)) {
      return field(raw_, index_, column);
    }
  }
  std::string known;
  for (int column = 0; column < static_cast<int>(size()); ++column) {
    known += (column == 0 ? "" : ", ") + std::string(PQfname(raw_, column));
  }
  throw std::out_of_range("weft::pg::row: no column named \"" + std::string(column_name) +
                          "\"; the columns are: " + (known.empty() ? "(none)" : known));
}

std::size_t result::size() const noexcept {
  return raw_ == nullptr ? 0 : static_cast<std::size_t>(PQntuples(raw_.get()));
}

pg::row result::operator[](std::size_t index) const& {
  if (index >= size()) {
    throw std::out_of_range("weft::pg::result: row " + std::to_string(index) +
                            " does not exist; the result has " + std::to_string(size()) + " rows");
  }
  return pg::row(raw_.get(), static_cast<int>(index));
}

std::size_t result::columns() const noexcept {
  return raw_ == nullptr ? 0 : static_cast<std::size_t>(PQnfields(raw_.get()));
}

std::string_view result::column_name(std::size_t column) const {
  if (column >= columns()) {
    throw std::out_of_range("weft::pg::result: column " + std::to_string(column) +
                            " does not exist; the result has " + std::to_string(columns()) +
                            " columns");
  }
  return PQfname(raw_.get(), static_cast<int>(column));
}

oid result::column_type(std::size_t column) const {
  column_name(column);  // range check
  return PQftype(raw_.get(), static_cast<int>(column));
}

std::size_t result::column_index(std::string_view column_name) const {
  return pg::row(raw_.get(), 0)[column_name].column_index();
}

std::uint64_t result::affected_rows() const noexcept {
  if (raw_ == nullptr) {
    return 0;
  }
  std::string_view count = PQcmdTuples(raw_.get());
  std::uint64_t value = 0;
  std::from_chars(count.data(), count.data() + count.size(), value);
  return value;
}

std::string_view result::command_tag() const noexcept {
  return raw_ == nullptr ? std::string_view() : std::string_view(PQcmdStatus(raw_.get()));
}

}  // namespace weft::pg
