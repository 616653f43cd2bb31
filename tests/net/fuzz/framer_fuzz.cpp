// libFuzzer target over weft::net's framers (include/weft/net/protocol.hpp): the WebSocket framer
// in both roles (include/weft/net/websocket_protocol.hpp), the line-delimited text protocol and the
// length-prefixed frame protocol, driven through measure() and decode() exactly as a connection
// drives them, with bytes that no peer is trusted to get right.
//
// Input layout: byte 0 chooses the framer and its settings, bytes 1-2 seed the split points, the
// rest is what the peer sends.
//   bits 0-1: 0 the WebSocket server framer from its opening handshake; 1 the same after a
//             canned valid handshake (put in front of the wire, so the fuzzer starts among the
//             frames); 2 the WebSocket client framer (unmasked frames from a server); 3 the text
//             protocol, or the frame protocol when bit 4 is set.
//   bit 2:    small limits (a 40-byte message limit; WebSocket: 24-byte frames, a 200-byte
//             handshake), so that every limit is reachable in short inputs.
//   bit 3:    WebSocket server options that the handshake checks (a path, allowed origins,
//             subprotocols).
//   bit 5:    decode() gets its own exact-size copy of the unit (an over-read past the unit is a
//             heap-buffer-overflow under ASan) instead of the bytes measure() saw (the
//             connection's path, which takes the framer's shortcut for a unit it just measured).
//   bit 6:    WebSocket with permessage-deflate enabled (every message of the round trip below
//             compressed): the canned handshake offers it, a client framer has it agreed, and a
//             server framer from its handshake answers whatever offer the input makes. RSV1
//             frames then carry DEFLATE data for the inflater (the dictionary has a few valid
//             compressed payloads).
//   bit 7:    with bit 6, both sides keep their compression context between messages (context
//             takeover), so one message's window feeds the next.
//
// Each input runs twice: whole, and cut into pieces 1-40 bytes apart, the way a connection
// receives them. Invariants (a violation aborts):
//   - measure() returns at most the bytes it was given, and gets an exact-size heap copy of the
//     unconsumed bytes (a read past them is caught by ASan);
//   - both runs hand the user the same messages (kind and bytes), answer the peer with the same
//     bytes (a client framer's answers are masked with random keys: the same sizes there), end
//     the conversation at the same point and fail with the same kind of error and close code: a
//     framer that decides differently depending on where reads end desynchronises;
//   - nothing reaches the user after a protocol error or after the framer finished the
//     conversation; every message is within the message limit; every text message is valid
//     UTF-8 (checked here with a validator of this file's own);
//   - every delivered message survives a round trip: encoded by a fresh framer of the other side
//     (a server's unmasked frame to a client framer, a client's masked frame to an opened server
//     framer; text and frame to a fresh framer of their own) it decodes to the same kind and
//     bytes, as one unit.
//
// Build and run (clang 14; `make test-fuzz` does the short run of `make test`):
//   cmake -S tests/net/fuzz -B build/fuzz-net -G Ninja -DCMAKE_CXX_COMPILER=clang++
//   cmake --build build/fuzz-net
//   mkdir -p build/fuzz-net/corpus
//   build/fuzz-net/net_framer_fuzz -dict=tests/net/fuzz/framer.dict -max_total_time=3600 \
//       -print_final_stats=1 build/fuzz-net/corpus tests/net/fuzz/corpus
// New inputs go to the first directory, never to the committed seeds; a crash is written as
// crash-<sha1>, replayed with `build/fuzz-net/net_framer_fuzz crash-<sha1>`, and becomes a unit
// test in tests/net.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "net/protocols/websocket_framer.hpp"
#include "weft/net/frame.hpp"
#include "weft/net/protocol.hpp"
#include "weft/net/text.hpp"
#include "weft/net/websocket_protocol.hpp"

namespace net = weft::net;

namespace {

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "net_framer_fuzz: invariant violated: %s\n", what);
  std::abort();
}

void check(bool ok, const char* what) {
  if (!ok) violated(what);
}

constexpr std::string_view canned_handshake =
    "GET / HTTP/1.1\r\nHost: fuzz.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
constexpr std::string_view canned_deflate_handshake =
    "GET / HTTP/1.1\r\nHost: fuzz.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
    "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n";

// RFC 3629 UTF-8, byte by byte from its table (independent of net's validator).
bool valid_utf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    const unsigned c = s[i];
    std::size_t more = 0;
    unsigned low = 0x80;
    unsigned high = 0xBF;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      more = 1;
    } else if (c == 0xE0) {
      more = 2;
      low = 0xA0;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      more = 2;
    } else if (c == 0xED) {
      more = 2;
      high = 0x9F;
    } else if (c == 0xF0) {
      more = 3;
      low = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3) {
      more = 3;
    } else if (c == 0xF4) {
      more = 3;
      high = 0x8F;
    } else {
      return false;
    }
    if (i + more >= n) return false;  // the sequence is cut short
    for (std::size_t k = 1; k <= more; ++k) {
      const unsigned b = s[i + k];
      const unsigned lo = k == 1 ? low : 0x80;
      const unsigned hi = k == 1 ? high : 0xBF;
      if (b < lo || b > hi) return false;
    }
    i += more + 1;
  }
  return true;
}

enum class kind { websocket_server, websocket_open, websocket_client, text, frame };

struct setup {
  kind which = kind::text;
  bool small = false;
  bool checked_options = false;
  bool exact_unit = false;
  bool deflate = false;
  bool takeover = false;
};

std::string_view handshake_for(const setup& s) {
  return s.deflate ? canned_deflate_handshake : canned_handshake;
}

std::shared_ptr<const net::websocket_options> websocket_options_for(const setup& s) {
  auto options = std::make_shared<net::websocket_options>();
  if (s.small) {
    options->max_frame_size = 24;
    options->max_handshake_size = 200;
  }
  if (s.checked_options) {
    options->path = "/";
    options->allowed_origins = {"https://a.example"};
    options->subprotocols = {"chat", "superchat"};
  }
  options->deflate.enabled = s.deflate;
  options->deflate.min_size = 0;
  options->deflate.server_context_takeover = s.takeover;
  options->deflate.client_context_takeover = s.takeover;
  return options;
}

std::unique_ptr<net::framer> make_framer(const setup& s) {
  switch (s.which) {
    case kind::websocket_server:
    case kind::websocket_open:
      return std::make_unique<net::detail::websocket_framer>(websocket_options_for(s),
                                                             net::detail::websocket_role::server);
    case kind::websocket_client: {
      auto made = std::make_unique<net::detail::websocket_framer>(
          websocket_options_for(s), net::detail::websocket_role::client);
      if (s.deflate) {
        // What a server answering the canned deflate handshake's offer agrees.
        net::detail::deflate_agreement agreed;
        agreed.server_no_context_takeover = !s.takeover;
        agreed.client_no_context_takeover = !s.takeover;
        made->use_deflate(agreed);
      }
      return made;
    }
    case kind::text:
      return net::text()->make_framer();
    case kind::frame:
      return net::frame()->make_framer();
  }
  violated("unknown framer");
}

class fake_link final : public net::framer_link {
 public:
  explicit fake_link(std::size_t limit) : limit_(limit) {}
  void send_raw(std::string_view bytes) override {
    check(!finished, "send_raw after finish");
    // A refusal's Date is the clock's: the whole and the split run may fall in two seconds.
    std::string kept(bytes);
    if (const std::size_t date = kept.find("\r\nDate: "); date != std::string::npos) {
      const std::size_t end = kept.find("\r\n", date + 2);
      check(end != std::string::npos, "a Date field without its line end");
      kept.replace(date + 8, end - (date + 8), "(the time)");
    }
    sent.append(kept);
    sent_sizes.push_back(kept.size());
  }
  void finish() override { finished = true; }
  std::size_t max_message_size() const noexcept override { return limit_; }

  std::string sent;
  std::vector<std::size_t> sent_sizes;
  bool finished = false;

 private:
  std::size_t limit_;
};

struct delivered {
  net::message_kind kind;
  std::string data;
  bool operator==(const delivered&) const = default;
};

struct outcome {
  std::vector<delivered> messages;
  std::string sent;
  std::vector<std::size_t> sent_sizes;
  bool finished = false;
  bool failed = false;
  bool too_big = false;
  std::uint16_t close_code = 0;
  std::size_t consumed = 0;  // bytes of the wire consumed when it stopped (or at its end)
};

std::unique_ptr<char[]> copy_of(std::string_view bytes) {
  // Exact size: ASan reports a read one byte past it (new char[0] is a valid, empty block).
  auto block = std::make_unique<char[]>(bytes.size());
  if (!bytes.empty()) std::memcpy(block.get(), bytes.data(), bytes.size());
  return block;
}

std::size_t message_limit(const setup& s) { return s.small ? 40 : 1u << 20; }

// Feeds the pieces to a fresh framer as a connection does: after each piece, units are measured
// and decoded from the unconsumed bytes until measure() asks for more.
outcome run(const setup& s, const std::vector<std::string_view>& pieces) {
  outcome result;
  std::unique_ptr<net::framer> framer = make_framer(s);
  fake_link link(message_limit(s));
  std::string buffered;
  net::message out;
  bool stopped = false;
  for (std::string_view piece : pieces) {
    if (stopped) break;
    buffered.append(piece);
    while (!stopped && !buffered.empty()) {
      auto seen = copy_of(buffered);
      std::size_t unit = 0;
      try {
        unit = framer->measure(std::string_view(seen.get(), buffered.size()), link);
        check(unit <= buffered.size(), "measure() returned more than it was given");
        if (unit == 0) break;
        std::unique_ptr<char[]> own;
        const char* at = seen.get();
        if (s.exact_unit) {
          own = copy_of(std::string_view(buffered.data(), unit));
          at = own.get();
        }
        const bool for_user = framer->decode(std::string_view(at, unit), out, link);
        if (for_user) {
          check(!link.finished, "a message for the user after finish()");
          check(out.data.size() <= link.max_message_size(), "a message over the limit");
          if (out.kind == net::message_kind::text) {
            check(valid_utf8(out.data), "a text message that is not UTF-8");
          }
          result.messages.push_back({out.kind, out.data});
        }
      } catch (const net::message_too_big_error& failure) {
        result.failed = result.too_big = true;
        result.close_code = failure.close_code();
        stopped = true;
        break;
      } catch (const net::protocol_error& failure) {
        result.failed = true;
        result.close_code = failure.close_code();
        stopped = true;
        break;
      }
      buffered.erase(0, unit);
      result.consumed += unit;
      if (link.finished) stopped = true;
    }
  }
  result.sent = std::move(link.sent);
  result.sent_sizes = std::move(link.sent_sizes);
  result.finished = link.finished;
  return result;
}

// Encodes each message with a fresh framer of the sending side and decodes it with a fresh
// framer of the receiving side: one unit, the same kind and bytes.
void round_trip(const setup& s, const delivered& m) {
  setup sender = s;
  setup receiver = s;
  sender.small = receiver.small = false;
  sender.checked_options = receiver.checked_options = false;
  fake_link link(1u << 20);
  std::unique_ptr<net::framer> encoder;
  std::unique_ptr<net::framer> decoder;
  switch (s.which) {
    case kind::websocket_server:
    case kind::websocket_open:
      // What the server framer received, sent back by a client framer (masked).
      sender.which = kind::websocket_client;
      receiver.which = kind::websocket_open;
      break;
    case kind::websocket_client:
      sender.which = kind::websocket_open;
      receiver.which = kind::websocket_client;
      break;
    case kind::text:
    case kind::frame:
      break;
  }
  encoder = make_framer(sender);
  decoder = make_framer(receiver);
  // A server framer on either side is opened by the canned handshake (with it, it agrees
  // permessage-deflate when the setup has it).
  for (auto* opened : {sender.which == kind::websocket_open ? encoder.get() : nullptr,
                       receiver.which == kind::websocket_open ? decoder.get() : nullptr}) {
    if (opened == nullptr) continue;
    net::message ignored;
    const std::string_view handshake = handshake_for(s);
    auto head = copy_of(handshake);
    std::string_view bytes(head.get(), handshake.size());
    check(opened->measure(bytes, link) == bytes.size(), "the canned handshake is not one unit");
    check(!opened->decode(bytes, ignored, link), "the canned handshake made a message");
  }
  std::string wire;
  encoder->encode(m.data, m.kind, wire);
  auto copy = copy_of(wire);
  std::string_view bytes(copy.get(), wire.size());
  const std::size_t unit = decoder->measure(bytes, link);
  check(unit == wire.size(), "an encoded message is not one unit for the other side");
  net::message out;
  check(decoder->decode(bytes, out, link), "an encoded message did not decode to a message");
  check(out.kind == m.kind && out.data == m.data, "a message changed on its round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  setup s;
  const std::uint8_t mode = data[0];
  switch (mode & 3) {
    case 0:
      s.which = kind::websocket_server;
      break;
    case 1:
      s.which = kind::websocket_open;
      break;
    case 2:
      s.which = kind::websocket_client;
      break;
    default:
      s.which = (mode & 16) != 0 ? kind::frame : kind::text;
      break;
  }
  s.small = (mode & 4) != 0;
  s.checked_options = (mode & 8) != 0;
  s.exact_unit = (mode & 32) != 0;
  s.deflate = (mode & 64) != 0;
  s.takeover = s.deflate && (mode & 128) != 0;
  std::uint32_t seed = (std::uint32_t{data[1]} << 8 | data[2]) * 2654435761u + 1;

  std::string wire;
  if (s.which == kind::websocket_open) wire.append(handshake_for(s));
  wire.append(reinterpret_cast<const char*>(data + 3), size - 3);

  const outcome whole = run(s, {std::string_view(wire)});
  std::vector<std::string_view> pieces;
  for (std::size_t at = 0; at < wire.size();) {
    seed = seed * 1103515245u + 12345u;
    const std::size_t step = 1 + (seed >> 16) % 40;
    const std::size_t n = step < wire.size() - at ? step : wire.size() - at;
    pieces.emplace_back(wire.data() + at, n);
    at += n;
  }
  const outcome split = run(s, pieces);

  check(whole.messages == split.messages, "whole and split runs delivered different messages");
  check(whole.failed == split.failed, "only one of the whole and split runs failed");
  check(whole.too_big == split.too_big, "whole and split runs failed differently (too big)");
  check(whole.close_code == split.close_code, "whole and split runs chose different close codes");
  check(whole.finished == split.finished, "only one of the whole and split runs finished");
  if (!whole.failed) {
    check(whole.consumed == split.consumed, "whole and split runs consumed different bytes");
  }
  if (s.which == kind::websocket_client) {
    check(whole.sent_sizes == split.sent_sizes, "whole and split runs answered differently");
  } else {
    check(whole.sent == split.sent, "whole and split runs answered differently");
  }
  for (const delivered& m : whole.messages) round_trip(s, m);
  return 0;
}
