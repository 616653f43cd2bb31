// combined_log_line: an access_record in nginx's combined format (server.hpp has the contract).
#include <time.h>

#include <cstdio>
#include <string>
#include <string_view>

#include "net/address.hpp"
#include "weft/http/server.hpp"

namespace weft::http {

namespace {

// Appends text with '"', '\\', control bytes and bytes past 0x7E as \xHH (nginx's escaping of
// variables in its default log format), "-" for empty text.
void append_escaped(std::string& out, std::string_view text) {
  if (text.empty()) {
    out += '-';
    return;
  }
  static constexpr char digits[] = "0123456789ABCDEF";
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte > 0x7E || c == '"' || c == '\\') {
      out += "\\x";
      out += digits[byte >> 4];
      out += digits[byte & 15];
    } else {
      out += c;
    }
  }
}

}  // namespace

std::string combined_log_line(const access_record& record) {
  std::string line;
  line.reserve(160 + record.target.size() + record.user_agent.size());
  append_escaped(line, net::detail::address_part(record.peer));
  line += " - - [";
  const std::time_t seconds = std::chrono::system_clock::to_time_t(record.time);
  std::tm local{};
  ::localtime_r(&seconds, &local);
  char stamp[40];
  const std::size_t written = std::strftime(stamp, sizeof stamp, "%d/%b/%Y:%H:%M:%S %z", &local);
  line.append(stamp, written);
  line += "] \"";
  std::string request_line(method_name(record.method));
  request_line += ' ';
  request_line += record.target;
  request_line += " HTTP/1.";
  request_line += static_cast<char>('0' + record.version_minor % 10);
  append_escaped(line, request_line);
  line += "\" ";
  line += std::to_string(code_of(record.status));
  line += ' ';
  line += std::to_string(record.body_bytes);
  line += " \"";
  append_escaped(line, record.referer);
  line += "\" \"";
  append_escaped(line, record.user_agent);
  line += "\" ";
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(record.duration).count();
  char elapsed[32];
  const int length =
      std::snprintf(elapsed, sizeof elapsed, "%lld.%03lld", static_cast<long long>(millis / 1000),
                    static_cast<long long>(millis % 1000));
  line.append(elapsed, static_cast<std::size_t>(length));
  if (record.aborted) {
    line += " aborted";
  }
  return line;
}

}  // namespace weft::http
