// The few pieces of HTTP/1.1 header syntax both ends of the WebSocket handshake read and write
// (websocket_handshake.cpp, the server's; websocket_client.cpp, the client's): case-insensitive
// names, optional whitespace, tokens and comma-separated lists (RFC 9110 5.6).
#pragma once

#include <algorithm>
#include <string_view>

namespace weft::net::detail::header_text {

inline char lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
}

inline bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower(x) == lower(y); });
}

inline bool is_ows(char c) noexcept { return c == ' ' || c == '\t'; }

inline std::string_view trim(std::string_view text) noexcept {
  while (!text.empty() && is_ows(text.front())) {
    text.remove_prefix(1);
  }
  while (!text.empty() && is_ows(text.back())) {
    text.remove_suffix(1);
  }
  return text;
}

// RFC 9110 tchar: what a header name, a method or a token in a list may hold.
inline bool is_tchar(char c) noexcept {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
    return true;
  }
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

inline bool is_token(std::string_view text) noexcept {
  return !text.empty() && std::all_of(text.begin(), text.end(), is_tchar);
}

// Calls each(token) for every element of a comma-separated header list, trimmed, skipping
// empty elements (RFC 9110 5.6.1).
template <class Each>
void for_each_token(std::string_view list, Each&& each) {
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view element = trim(list.substr(0, comma));
    if (!element.empty()) {
      each(element);
    }
    if (comma == std::string_view::npos) {
      break;
    }
    list.remove_prefix(comma + 1);
  }
}

inline bool list_has(std::string_view list, std::string_view wanted) {
  bool found = false;
  for_each_token(list, [&](std::string_view token) { found = found || iequals(token, wanted); });
  return found;
}

}  // namespace weft::net::detail::header_text
