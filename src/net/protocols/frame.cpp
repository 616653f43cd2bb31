// The length-prefixed frame protocol (include/weft/net/frame.hpp).
#include "weft/net/frame.hpp"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace weft::net {
namespace {

constexpr std::size_t header = 4;

std::uint32_t read_length(std::string_view input) noexcept {
  const auto* bytes = reinterpret_cast<const unsigned char*>(input.data());
  return (std::uint32_t{bytes[0]} << 24) | (std::uint32_t{bytes[1]} << 16) |
         (std::uint32_t{bytes[2]} << 8) | std::uint32_t{bytes[3]};
}

class frame_framer final : public framer {
 public:
  std::size_t measure(std::string_view input, framer_link& link) override {
    if (input.size() < header) {
      return 0;
    }
    const std::uint32_t length = read_length(input);
    if (length > link.max_message_size()) {
      throw message_too_big_error("frame", length, link.max_message_size());
    }
    if (input.size() - header < length) {
      return 0;
    }
    return header + length;
  }

  bool decode(std::string_view unit, message& out, framer_link&) override {
    out.data.assign(unit.substr(header));
    out.kind = message_kind::binary;
    return true;
  }

  void encode(std::string_view payload, message_kind, std::string& out) override {
    if (payload.size() > 0xffffffffu) {
      throw std::invalid_argument("weft::net::frame: a payload of " +
                                  std::to_string(payload.size()) +
                                  " bytes does not fit the 4-byte length prefix (at most "
                                  "4294967295)");
    }
    const auto length = static_cast<std::uint32_t>(payload.size());
    const char prefix[header] = {static_cast<char>(length >> 24), static_cast<char>(length >> 16),
                                 static_cast<char>(length >> 8), static_cast<char>(length)};
    out.reserve(out.size() + header + payload.size());
    out.append(prefix, header);
    out.append(payload);
  }
};

class frame_protocol final : public protocol {
 public:
  const char* name() const noexcept override { return "frame"; }
  std::unique_ptr<framer> make_framer() const override { return std::make_unique<frame_framer>(); }
};

}  // namespace

std::shared_ptr<const protocol> frame() {
  static const auto shared = std::make_shared<const frame_protocol>();
  return shared;
}

}  // namespace weft::net
