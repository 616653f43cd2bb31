// Validators, preconditions and ranges for static_files (static_support.hpp), and
// parse_http_date (static_files.hpp): the field grammars of RFC 9110 sections 8.8, 13 and 14.
#include <charconv>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "http/chars.hpp"
#include "http/static_support.hpp"
#include "weft/http/static_files.hpp"

namespace weft::http {

namespace detail {

namespace {

void append_hex(std::string& out, std::uint64_t n) {
  char digits[20];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n, 16);
  static_cast<void>(ec);
  out.append(digits, end);
}

// One entity-tag at the front of `list` (RFC 9110 8.8.3: [W/] DQUOTE *etagc DQUOTE), removed
// from it. Nothing when the front is not one.
struct entity_tag {
  bool weak = false;
  std::string_view opaque;  // with its quotes
};

std::optional<entity_tag> take_entity_tag(std::string_view& list) noexcept {
  entity_tag tag;
  if (list.starts_with("W/")) {
    tag.weak = true;
    list.remove_prefix(2);
  }
  if (list.empty() || list.front() != '"') return std::nullopt;
  std::size_t close = list.find('"', 1);
  if (close == std::string_view::npos) return std::nullopt;
  for (unsigned char c : list.substr(1, close - 1)) {
    // etagc: %x21 / %x23-7E / obs-text.
    if (c < 0x21 || c == 0x7F) return std::nullopt;
  }
  tag.opaque = list.substr(0, close + 1);
  list.remove_prefix(close + 1);
  return tag;
}

// Saturating decimal: digits past what 64 bits hold give the maximum, which is what a range
// bound that large means (past any file's end).
std::optional<std::uint64_t> parse_decimal(std::string_view digits) noexcept {
  if (digits.empty()) return std::nullopt;
  std::uint64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    unsigned d = static_cast<unsigned>(c - '0');
    if (n > (std::numeric_limits<std::uint64_t>::max() - d) / 10) {
      n = std::numeric_limits<std::uint64_t>::max();
    } else {
      n = n * 10 + d;
    }
  }
  return n;
}

}  // namespace

std::string entity_tag_of(const struct stat& st) {
  std::string tag;
  tag.reserve(48);
  tag.push_back('"');
  append_hex(tag, static_cast<std::uint64_t>(st.st_ino));
  tag.push_back('-');
  append_hex(tag, static_cast<std::uint64_t>(st.st_size));
  tag.push_back('-');
  append_hex(tag, static_cast<std::uint64_t>(st.st_mtim.tv_sec) * 1'000'000'000u +
                      static_cast<std::uint64_t>(st.st_mtim.tv_nsec));
  tag.push_back('"');
  return tag;
}

bool entity_tag_list_matches(std::string_view field_value, std::string_view tag, bool weak) {
  std::string_view list = trim_ows(field_value);
  if (list == "*") return true;
  while (true) {
    // Empty list elements (", ,") are allowed and skipped (RFC 9110 5.6.1).
    while (!list.empty() && (list.front() == ',' || list.front() == ' ' || list.front() == '\t')) {
      list.remove_prefix(1);
    }
    if (list.empty()) return false;
    std::optional<entity_tag> candidate = take_entity_tag(list);
    if (!candidate) return false;
    if (candidate->opaque == tag && (weak || !candidate->weak)) return true;
    list = trim_ows(list);
    if (!list.empty() && list.front() != ',') return false;
  }
}

namespace {

enum class span_verdict : std::uint8_t { malformed, satisfiable, unsatisfiable };

// One range-spec ("a-b", "a-" or "-n", no spaces) of a file of `size` bytes.
span_verdict parse_span(std::string_view spec, std::uint64_t size, byte_span& out) noexcept {
  const std::size_t dash = spec.find('-');
  if (dash == std::string_view::npos) return span_verdict::malformed;
  const std::string_view first_text = spec.substr(0, dash);
  const std::string_view last_text = spec.substr(dash + 1);
  if (first_text.empty()) {
    // "-n": the last n bytes; n == 0 asks for nothing, which no file can satisfy.
    const std::optional<std::uint64_t> suffix = parse_decimal(last_text);
    if (!suffix) return span_verdict::malformed;
    if (*suffix == 0 || size == 0) return span_verdict::unsatisfiable;
    out.length = *suffix < size ? *suffix : size;
    out.first = size - out.length;
    return span_verdict::satisfiable;
  }
  const std::optional<std::uint64_t> first = parse_decimal(first_text);
  if (!first) return span_verdict::malformed;
  std::uint64_t last = std::numeric_limits<std::uint64_t>::max();
  if (!last_text.empty()) {
    const std::optional<std::uint64_t> parsed = parse_decimal(last_text);
    if (!parsed || *parsed < *first) return span_verdict::malformed;  // "5-3": invalid
    last = *parsed;
  }
  if (*first >= size) return span_verdict::unsatisfiable;
  if (last >= size) last = size - 1;
  out.first = *first;
  out.length = last - *first + 1;
  return span_verdict::satisfiable;
}

}  // namespace

byte_ranges parse_byte_ranges(std::string_view field_value, std::uint64_t size,
                              std::size_t max_ranges) {
  byte_ranges ranges;
  std::string_view value = trim_ows(field_value);
  const std::size_t equals = value.find('=');
  if (equals == std::string_view::npos || !iequals(trim_ows(value.substr(0, equals)), "bytes")) {
    return ranges;  // another unit, or not a range at all
  }
  value.remove_prefix(equals + 1);
  std::size_t elements = 0;
  std::uint64_t total = 0;
  bool any_unsatisfiable = false;
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    const std::string_view element = trim_ows(value.substr(0, comma));
    if (!element.empty()) {  // empty list elements (", ,") are allowed and skipped
      if (++elements > max_ranges) return byte_ranges{};
      byte_span span;
      switch (parse_span(element, size, span)) {
        case span_verdict::malformed:
          return byte_ranges{};
        case span_verdict::unsatisfiable:
          any_unsatisfiable = true;
          break;
        case span_verdict::satisfiable:
          total += span.length;  // both at most size here: no overflow
          if (total > size) return byte_ranges{};
          ranges.spans.push_back(span);
          break;
      }
    }
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  if (!ranges.spans.empty()) {
    ranges.result = byte_ranges::kind::satisfiable;
  } else if (any_unsatisfiable) {
    ranges.result = byte_ranges::kind::unsatisfiable;
  }
  return ranges;
}

}  // namespace detail

namespace {

// A cursor over a date being parsed; every take_ fails (returns false) without consuming on a
// mismatch.
struct date_reader {
  std::string_view rest;

  bool take(std::string_view literal) noexcept {
    if (!rest.starts_with(literal)) return false;
    rest.remove_prefix(literal.size());
    return true;
  }
  // Exactly `count` digits.
  bool take_number(int count, int& out) noexcept {
    if (rest.size() < static_cast<std::size_t>(count)) return false;
    int n = 0;
    for (int i = 0; i < count; ++i) {
      char c = rest[static_cast<std::size_t>(i)];
      if (c < '0' || c > '9') return false;
      n = n * 10 + (c - '0');
    }
    rest.remove_prefix(static_cast<std::size_t>(count));
    out = n;
    return true;
  }
  // One of `names` (exact case, as the grammar's case-sensitive literals); its index.
  template <std::size_t N>
  bool take_name(const std::string_view (&names)[N], int& out) noexcept {
    for (std::size_t i = 0; i < N; ++i) {
      if (take(names[i])) {
        out = static_cast<int>(i);
        return true;
      }
    }
    return false;
  }
  // "HH:MM:SS".
  bool take_time(int& hour, int& minute, int& second) noexcept {
    return take_number(2, hour) && take(":") && take_number(2, minute) && take(":") &&
           take_number(2, second);
  }
};

constexpr std::string_view short_days[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
constexpr std::string_view long_days[] = {"Monday", "Tuesday",  "Wednesday", "Thursday",
                                          "Friday", "Saturday", "Sunday"};
constexpr std::string_view months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

std::optional<std::time_t> to_time(int year, int month, int day, int hour, int minute,
                                   int second) noexcept {
  using namespace std::chrono;
  year_month_day date{std::chrono::year{year}, std::chrono::month{static_cast<unsigned>(month)},
                      std::chrono::day{static_cast<unsigned>(day)}};
  // 60 seconds: a leap second, which the grammar allows.
  if (!date.ok() || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  auto since_epoch = sys_days{date}.time_since_epoch();
  return static_cast<std::time_t>(duration_cast<seconds>(since_epoch).count()) + hour * 3600 +
         minute * 60 + second;
}

// RFC 850's two-digit year, taken as the most recent year with those digits that is not more
// than 50 years in the future (RFC 9110 5.6.7).
int full_year(int two_digits) noexcept {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  int this_year = utc.tm_year + 1900;
  int year = this_year - this_year % 100 + two_digits;
  if (year > this_year + 50) year -= 100;
  return year;
}

}  // namespace

std::optional<std::time_t> parse_http_date(std::string_view text) noexcept {
  date_reader in{detail::trim_ows(text)};
  int weekday = 0, day = 0, month = 0, year = 0, hour = 0, minute = 0, second = 0;
  if (in.take_name(long_days, weekday)) {
    // rfc850-date: "Sunday, 06-Nov-94 08:49:37 GMT"
    if (!(in.take(", ") && in.take_number(2, day) && in.take("-") && in.take_name(months, month) &&
          in.take("-") && in.take_number(2, year) && in.take(" ") &&
          in.take_time(hour, minute, second) && in.take(" GMT") && in.rest.empty())) {
      return std::nullopt;
    }
    return to_time(full_year(year), month + 1, day, hour, minute, second);
  }
  if (!in.take_name(short_days, weekday)) return std::nullopt;
  if (in.take(", ")) {
    // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
    if (!(in.take_number(2, day) && in.take(" ") && in.take_name(months, month) && in.take(" ") &&
          in.take_number(4, year) && in.take(" ") && in.take_time(hour, minute, second) &&
          in.take(" GMT") && in.rest.empty())) {
      return std::nullopt;
    }
    return to_time(year, month + 1, day, hour, minute, second);
  }
  // asctime-date: "Sun Nov  6 08:49:37 1994" (the day padded with a space)
  if (!(in.take(" ") && in.take_name(months, month) && in.take(" "))) return std::nullopt;
  if (in.take(" ")) {
    if (!in.take_number(1, day)) return std::nullopt;
  } else if (!in.take_number(2, day)) {
    return std::nullopt;
  }
  if (!(in.take(" ") && in.take_time(hour, minute, second) && in.take(" ") &&
        in.take_number(4, year) && in.rest.empty())) {
    return std::nullopt;
  }
  return to_time(year, month + 1, day, hour, minute, second);
}

}  // namespace weft::http
