// The Date field's text: an IMF-fixdate (RFC 9110 5.6.7) for a time, and the current one
// cached per second per thread. A file of its own, so that what needs only the date (the net
// layer's WebSocket refusals, the framer fuzzer that compiles them) need not link serialising.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>

#include "http/date.hpp"
#include "weft/http/message.hpp"

namespace weft::http {

std::string format_http_date(std::time_t t) {
  static constexpr const char* days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[40];
  int n = std::snprintf(buffer, sizeof buffer, "%s, %02d %s %04d %02d:%02d:%02d GMT",
                        days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900,
                        tm.tm_hour, tm.tm_min, tm.tm_sec);
  if (n < 0) n = 0;
  return std::string(buffer, std::min(static_cast<std::size_t>(n), sizeof buffer - 1));
}

namespace detail {

[[gnu::hot]] std::string_view http_date(std::time_t& second) {
  // Per thread: each scheduler thread formats its own once a second and never shares it, so
  // no synchronisation is needed. CLOCK_REALTIME_COARSE is read from the vDSO without a
  // syscall and is good to a few milliseconds, plenty for a one-second resolution.
  struct cache {
    std::time_t second = -1;
    char text[40] = {};
    std::size_t size = 0;
  };
  thread_local cache cached;
  timespec now{};
  clock_gettime(CLOCK_REALTIME_COARSE, &now);
  if (now.tv_sec != cached.second) {
    std::string formatted = format_http_date(now.tv_sec);
    std::memcpy(cached.text, formatted.data(), formatted.size());
    cached.size = formatted.size();
    cached.second = now.tv_sec;
  }
  second = cached.second;
  return std::string_view(cached.text, cached.size);
}

}  // namespace detail

std::string_view http_date() {
  std::time_t second = 0;
  return detail::http_date(second);
}

}  // namespace weft::http
