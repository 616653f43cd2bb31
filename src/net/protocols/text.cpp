// The line-delimited text protocol (include/weft/net/text.hpp).
#include "weft/net/text.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

namespace weft::net {
namespace {

class text_framer final : public framer {
 public:
  std::size_t measure(std::string_view input, framer_link& link) override {
    // Bytes already scanned without finding '\n' are not scanned again when more arrive (a
    // slow sender would otherwise cost quadratic time). measure may see the same bytes again,
    // with more after them, until decode consumes them.
    if (scanned_ > input.size()) {
      scanned_ = 0;
    }
    const void* found = std::memchr(input.data() + scanned_, '\n', input.size() - scanned_);
    const std::size_t limit = link.max_message_size();
    if (found == nullptr) {
      scanned_ = input.size();
      // The line so far, less a '\r' that may turn out to be the delimiter's.
      std::size_t line = input.size();
      if (line > 0 && input.back() == '\r') {
        --line;
      }
      if (line > limit) {
        throw message_too_big_error("text", line, limit);
      }
      return 0;
    }
    const auto end = static_cast<std::size_t>(static_cast<const char*>(found) - input.data());
    std::size_t line = end;
    if (line > 0 && input[line - 1] == '\r') {
      --line;
    }
    if (line > limit) {
      throw message_too_big_error("text", line, limit);
    }
    return end + 1;
  }

  // The last line of a stream that ended without its newline is a line all the same (its size
  // was checked by measure()).
  std::size_t measure_at_end(std::string_view rest, framer_link&) override { return rest.size(); }

  bool decode(std::string_view unit, message& out, framer_link&) override {
    scanned_ = 0;
    if (!unit.empty() && unit.back() == '\n') {
      unit.remove_suffix(1);  // (a last line at the end of the stream may have none)
    }
    if (!unit.empty() && unit.back() == '\r') {
      unit.remove_suffix(1);
    }
    out.data.assign(unit);
    out.kind = message_kind::binary;
    return true;
  }

  void encode(std::string_view payload, message_kind, std::string& out) override {
    if (const void* newline = std::memchr(payload.data(), '\n', payload.size())) {
      throw std::invalid_argument(
          "weft::net::text: a payload with a newline (at byte " +
          std::to_string(static_cast<const char*>(newline) - payload.data()) +
          ") cannot be sent as one line; send it as several lines, or use the frame protocol");
    }
    // The receiver drops one '\r' before the '\n'. A payload ending in '\r' would lose it, so
    // it goes out with "\r\n": the receiver drops the added '\r' and keeps the payload's.
    const bool ends_in_cr = !payload.empty() && payload.back() == '\r';
    out.reserve(out.size() + payload.size() + 2);
    out.append(payload);
    if (ends_in_cr) {
      out.push_back('\r');
    }
    out.push_back('\n');
  }

 private:
  std::size_t scanned_ = 0;
};

class text_protocol final : public protocol {
 public:
  const char* name() const noexcept override { return "text"; }
  std::unique_ptr<framer> make_framer() const override { return std::make_unique<text_framer>(); }
};

}  // namespace

std::shared_ptr<const protocol> text() {
  static const auto shared = std::make_shared<const text_protocol>();
  return shared;
}

}  // namespace weft::net
