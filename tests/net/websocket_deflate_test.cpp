// weft-test: driver-independent
// permessage-deflate (RFC 7692) in the WebSocket framer, driven with a fake link over byte
// buffers: how the server answers offers (each rule of section 5 and 7.1), compressed messages
// in (whole, fragmented, from a context kept across messages, ending in a final block) and out,
// and what a broken or hostile compressed message earns: 1002 for RSV1 where it may not be,
// 1007 for data that does not inflate or text that is not UTF-8 once inflated, 1009 for a
// message that inflates past the limit (a "zip bomb"), caught while it inflates.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "net/websocket_wire.hpp"
#include "weft/error.hpp"
#include "weft/net/websocket.hpp"

namespace {

using weft::net::message_kind;
using weft::net::message_too_big_error;
using weft::net::protocol_error;
using weft::net::websocket;
using weft::net::websocket_deflate_options;
using weft::net::websocket_options;
using weft_ws_test::client_frame;
using weft_ws_test::frame_bits;
using weft_ws_test::framer_driver;
using weft_ws_test::handshake_request;
using weft_ws_test::parse_server_frames;

websocket deflating(websocket_deflate_options deflate = {}) {
  deflate.enabled = true;
  websocket_options options;
  options.deflate = deflate;
  return websocket(options);
}

// The value of the 101's Sec-WebSocket-Extensions ("" when it has none), after a handshake
// with these request lines.
std::string answer_to(const websocket& protocol, const std::string& extra_lines) {
  framer_driver driver(protocol);
  driver.feed(handshake_request(extra_lines));
  const std::string& reply = driver.link.sent;
  EXPECT_EQ(reply.rfind("HTTP/1.1 101 ", 0), 0u) << reply;
  const std::string name = "\r\nSec-WebSocket-Extensions: ";
  const std::size_t at = reply.find(name);
  if (at == std::string::npos) {
    return {};
  }
  const std::size_t start = at + name.size();
  return reply.substr(start, reply.find("\r\n", start) - start);
}

std::string offer(const std::string& value) {
  return "Sec-WebSocket-Extensions: " + value + "\r\n";
}

// DEFLATE as a peer sends it (RFC 7692 7.2.1): a raw stream, sync-flushed, its 00 00 FF FF cut.
// One compressor per conversation keeps its context between calls, as a peer with context
// takeover does.
class peer_compressor {
 public:
  explicit peer_compressor(int window_bits = 15) {
    EXPECT_EQ(deflateInit2(&z_, 6, Z_DEFLATED, -window_bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  }
  ~peer_compressor() { deflateEnd(&z_); }
  std::string compress(const std::string& data, int flush = Z_SYNC_FLUSH) {
    std::string out(data.size() + 1024, '\0');
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z_.avail_in = static_cast<uInt>(data.size());
    z_.next_out = reinterpret_cast<Bytef*>(out.data());
    z_.avail_out = static_cast<uInt>(out.size());
    const int status = deflate(&z_, flush);
    EXPECT_TRUE(status == Z_OK || status == Z_STREAM_END) << status;
    EXPECT_EQ(z_.avail_in, 0u);
    out.resize(out.size() - z_.avail_out);
    if (flush == Z_SYNC_FLUSH) {
      EXPECT_EQ(out.substr(out.size() - 4), std::string("\0\0\xFF\xFF", 4));
      out.resize(out.size() - 4);
    }
    return out;
  }

 private:
  z_stream z_{};
};

// What a peer inflates from the server's compressed payload (its context kept when `keep`).
class peer_decompressor {
 public:
  peer_decompressor() { EXPECT_EQ(inflateInit2(&z_, -15), Z_OK); }
  ~peer_decompressor() { inflateEnd(&z_); }
  std::string inflate_message(std::string payload) {
    payload.append("\0\0\xFF\xFF", 4);
    std::string out(1 << 22, '\0');
    z_.next_in = reinterpret_cast<Bytef*>(payload.data());
    z_.avail_in = static_cast<uInt>(payload.size());
    z_.next_out = reinterpret_cast<Bytef*>(out.data());
    z_.avail_out = static_cast<uInt>(out.size());
    const int status = inflate(&z_, Z_SYNC_FLUSH);
    EXPECT_EQ(status, Z_OK);
    out.resize(out.size() - z_.avail_out);
    return out;
  }

 private:
  z_stream z_{};
};

frame_bits compressed_bits(bool fin = true) {
  frame_bits bits;
  bits.rsv = 4;  // RSV1
  bits.fin = fin;
  return bits;
}

// A server framer that agreed permessage-deflate with the client's offer.
framer_driver opened(const websocket& protocol, std::size_t limit = 1 << 20,
                     const std::string& offered = "permessage-deflate; client_max_window_bits") {
  framer_driver driver(protocol, limit);
  driver.feed(handshake_request(offer(offered)));
  driver.link.sent.clear();
  return driver;
}

std::uint16_t close_code_for(framer_driver& driver, const std::string& bytes) {
  try {
    driver.feed(bytes);
  } catch (const protocol_error& error) {
    return error.close_code();
  }
  ADD_FAILURE() << "the bytes were accepted";
  return 0;
}

// --- negotiation -------------------------------------------------------------------------------

TEST(WebsocketDeflate, AnOfferIsAnsweredWithoutContextTakeoverByDefault) {
  const websocket protocol = deflating();
  EXPECT_EQ(answer_to(protocol, offer("permessage-deflate")),
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover");
  // What browsers offer: client_max_window_bits without a value, which the default 15 does not
  // need to use.
  EXPECT_EQ(answer_to(protocol, offer("permessage-deflate; client_max_window_bits")),
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover");
}

TEST(WebsocketDeflate, OffersAreDeclinedWhenTheServerHasItOff) {
  const websocket plain;
  EXPECT_EQ(answer_to(plain, offer("permessage-deflate; client_max_window_bits")), "");
}

TEST(WebsocketDeflate, ContextTakeoverIsKeptUnlessTheClientAsksOtherwise) {
  websocket_deflate_options deflate;
  deflate.server_context_takeover = true;
  deflate.client_context_takeover = true;
  const websocket protocol = deflating(deflate);
  EXPECT_EQ(answer_to(protocol, offer("permessage-deflate")), "permessage-deflate");
  EXPECT_EQ(answer_to(protocol, offer("permessage-deflate; server_no_context_takeover")),
            "permessage-deflate; server_no_context_takeover");
  EXPECT_EQ(answer_to(protocol, offer("permessage-deflate; client_no_context_takeover")),
            "permessage-deflate; client_no_context_takeover");
}

TEST(WebsocketDeflate, WindowSizesAreNegotiatedWithinWhatTheOfferAllows) {
  websocket_deflate_options deflate;
  deflate.client_max_window_bits = 10;
  deflate.server_max_window_bits = 12;
  const websocket protocol = deflating(deflate);
  const std::string plain =
      "permessage-deflate; server_no_context_takeover; client_no_context_takeover";
  // The client's window is limited only where its offer takes the parameter, and never above
  // what it named.
  EXPECT_EQ(answer_to(protocol, offer("permessage-deflate")), plain);
  EXPECT_EQ(answer_to(protocol, offer("permessage-deflate; client_max_window_bits")),
            plain + "; client_max_window_bits=10");
  EXPECT_EQ(answer_to(protocol, offer("permessage-deflate; client_max_window_bits=9")),
            plain + "; client_max_window_bits=9");
  // A server window asked for is answered with the smaller of it and the server's own.
  EXPECT_EQ(answer_to(protocol, offer("permessage-deflate; server_max_window_bits=14")),
            plain + "; server_max_window_bits=12");
  EXPECT_EQ(answer_to(protocol, offer("permessage-deflate; server_max_window_bits=9")),
            plain + "; server_max_window_bits=9");
  // A quoted value is the same value (RFC 7692 7.1: token or quoted-string).
  EXPECT_EQ(answer_to(protocol, offer("permessage-deflate; client_max_window_bits=\"11\"")),
            plain + "; client_max_window_bits=10");
}

TEST(WebsocketDeflate, AnOfferBreakingSection5IsDeclinedAndTheNextOneTaken) {
  const websocket protocol = deflating();
  const std::string accepted =
      "permessage-deflate; server_no_context_takeover; client_no_context_takeover";
  for (const std::string bad :
       {"permessage-deflate; unknown_parameter", "permessage-deflate; server_max_window_bits",
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; server_max_window_bits=08",
        "permessage-deflate; client_max_window_bits=7",
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; client_no_context_takeover; client_no_context_takeover"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(answer_to(protocol, offer(bad)), "") << "a broken offer was accepted";
    EXPECT_EQ(answer_to(protocol, offer(bad + ", permessage-deflate")), accepted);
  }
  // A quoted string left open runs to the end of the header, taking what follows with it.
  EXPECT_EQ(answer_to(protocol, offer("permessage-deflate; server_max_window_bits=\"10, "
                                      "permessage-deflate")),
            "");
  // Offers may come in several lines, among other extensions.
  EXPECT_EQ(answer_to(protocol, offer("x-webkit-deflate-frame") +
                                    offer("permessage-deflate; server_max_window_bits=10")),
            accepted + "; server_max_window_bits=10");
}

TEST(WebsocketDeflate, SettingsOutOfRangeAreRefusedWhenTheProtocolIsMade) {
  auto refused = [](auto change) {
    websocket_options options;
    options.deflate.enabled = true;
    change(options.deflate);
    EXPECT_THROW(websocket{options}, std::invalid_argument);
  };
  refused([](websocket_deflate_options& d) { d.level = 0; });
  refused([](websocket_deflate_options& d) { d.level = 10; });
  refused([](websocket_deflate_options& d) { d.server_max_window_bits = 8; });
  refused([](websocket_deflate_options& d) { d.client_max_window_bits = 16; });
  refused([](websocket_deflate_options& d) { d.mem_level = 0; });
}

// --- messages in -------------------------------------------------------------------------------

TEST(WebsocketDeflate, Rfc7692sCompressedHelloIsInflated) {
  const websocket protocol = deflating();
  framer_driver driver = opened(protocol);
  // RFC 7692 7.2.3.1: "Hello" compressed, in one frame.
  const auto messages = driver.feed(
      client_frame(0x1, std::string("\xf2\x48\xcd\xc9\xc9\x07\x00", 7), compressed_bits()));
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].data, "Hello");
  EXPECT_EQ(messages[0].kind, message_kind::text);
  // Uncompressed messages (RSV1 clear) still pass as they are.
  const auto plain = driver.feed(client_frame(0x2, "as is"));
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(plain[0].data, "as is");
}

TEST(WebsocketDeflate, AFragmentedCompressedMessageIsInflatedWhole) {
  const websocket protocol = deflating();
  framer_driver driver = opened(protocol);
  std::string text;
  for (int i = 0; i < 500; ++i) {
    text += "fragment \xE2\x82\xAC " + std::to_string(i) + "\n";  // a 3-byte character
  }
  peer_compressor peer;
  const std::string compressed = peer.compress(text);
  // RSV1 on the first frame only; the pieces cut through DEFLATE data at any byte.
  const std::size_t third = compressed.size() / 3;
  frame_bits continuation;
  continuation.fin = false;
  std::string wire = client_frame(0x1, compressed.substr(0, third), compressed_bits(false)) +
                     client_frame(0x9, "ping in between") +
                     client_frame(0x0, compressed.substr(third, third), continuation) +
                     client_frame(0x0, compressed.substr(2 * third));
  std::vector<weft::net::message> messages;
  for (std::size_t at = 0; at < wire.size(); at += 7) {  // and in 7-byte reads
    for (auto& m : driver.feed(wire.substr(at, 7))) {
      messages.push_back(std::move(m));
    }
  }
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].kind, message_kind::text);
  EXPECT_TRUE(messages[0].data == text);
  const auto answers = parse_server_frames(driver.link.sent, true);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_EQ(answers[0].opcode, 0xA);
  EXPECT_FALSE(answers[0].compressed) << "a pong must never be compressed";
}

TEST(WebsocketDeflate, AClientsContextIsKeptAcrossMessagesWhenAgreed) {
  websocket_deflate_options deflate;
  deflate.client_context_takeover = true;
  const websocket protocol = deflating(deflate);
  framer_driver driver = opened(protocol);
  peer_compressor peer;
  const std::string text(3000, 'k');
  const std::string first = peer.compress(text);
  const std::string second = peer.compress(text);  // refers back into the first one's window
  EXPECT_LT(second.size(), first.size());
  auto messages = driver.feed(client_frame(0x2, first, compressed_bits()) +
                              client_frame(0x2, second, compressed_bits()));
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_TRUE(messages[0].data == text);
  EXPECT_TRUE(messages[1].data == text);
}

TEST(WebsocketDeflate, AMessageEndingInAFinalBlockKeepsItsWindowForTheNext) {
  websocket_deflate_options deflate;
  deflate.client_context_takeover = true;
  const websocket protocol = deflating(deflate);
  framer_driver driver = opened(protocol);
  // A peer that ends each message's stream (BFINAL; RFC 7692 7.2.3.4), then starts the next
  // with the last one's window as its dictionary.
  const std::string text = "a final block, then the same words again";
  peer_compressor first_stream;
  const std::string first = first_stream.compress(text, Z_FINISH);
  z_stream next{};
  ASSERT_EQ(deflateInit2(&next, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY), Z_OK);
  ASSERT_EQ(deflateSetDictionary(&next, reinterpret_cast<const Bytef*>(text.data()),
                                 static_cast<uInt>(text.size())),
            Z_OK);
  std::string second(256, '\0');
  next.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  next.avail_in = static_cast<uInt>(text.size());
  next.next_out = reinterpret_cast<Bytef*>(second.data());
  next.avail_out = static_cast<uInt>(second.size());
  ASSERT_EQ(::deflate(&next, Z_SYNC_FLUSH), Z_OK);
  second.resize(second.size() - next.avail_out - 4);
  deflateEnd(&next);
  auto messages = driver.feed(client_frame(0x1, first, compressed_bits()) +
                              client_frame(0x1, second, compressed_bits()));
  ASSERT_EQ(messages.size(), 2u);
  EXPECT_EQ(messages[0].data, text);
  EXPECT_EQ(messages[1].data, text);
}

TEST(WebsocketDeflate, Rsv1WhereItMayNotBeIs1002) {
  const websocket protocol = deflating();
  {
    framer_driver driver = opened(protocol);
    EXPECT_EQ(close_code_for(driver, client_frame(0x9, "ping", compressed_bits())),
              websocket::protocol_violation);
  }
  {
    framer_driver driver = opened(protocol);
    frame_bits first;
    first.fin = false;
    EXPECT_EQ(close_code_for(driver, client_frame(0x1, "plain ", first) +
                                         client_frame(0x0, "then rsv1", compressed_bits())),
              websocket::protocol_violation);
  }
  {
    framer_driver driver = opened(protocol);
    frame_bits rsv2;
    rsv2.rsv = 2;
    EXPECT_EQ(close_code_for(driver, client_frame(0x1, "x", rsv2)), websocket::protocol_violation);
  }
  {
    // Not agreed (the server has it on, the client did not offer it): RSV1 is 1002.
    framer_driver driver(protocol);
    driver.feed(handshake_request());
    EXPECT_EQ(
        close_code_for(driver, client_frame(0x1, std::string("\xf2\x48\xcd\xc9\xc9\x07\x00", 7),
                                            compressed_bits())),
        websocket::protocol_violation);
  }
}

TEST(WebsocketDeflate, DataThatDoesNotInflateOrTextThatIsNotUtf8Is1007) {
  const websocket protocol = deflating();
  {
    framer_driver driver = opened(protocol);
    // Block type 3 is reserved in DEFLATE.
    EXPECT_EQ(close_code_for(driver, client_frame(0x2, "\xff\xff\xff\xff", compressed_bits())),
              websocket::invalid_payload);
  }
  {
    framer_driver driver = opened(protocol);
    peer_compressor peer;
    EXPECT_EQ(close_code_for(driver, client_frame(0x1, peer.compress("bad \xC0\xAF utf-8"),
                                                  compressed_bits())),
              websocket::invalid_payload);
  }
  {
    framer_driver driver = opened(protocol);
    peer_compressor peer;
    EXPECT_EQ(close_code_for(driver, client_frame(0x1, peer.compress("done", Z_FINISH) + "junk",
                                                  compressed_bits())),
              websocket::invalid_payload);
  }
}

TEST(WebsocketDeflate, AMessageInflatingPastTheLimitIs1009WhileItInflates) {
  const websocket protocol = deflating();
  framer_driver driver = opened(protocol, 1 << 20);
  // 64 MiB of zeros: about 64 KiB compressed, within the limit on the wire.
  peer_compressor peer;
  const std::string bomb = peer.compress(std::string(64u << 20, '\0'));
  ASSERT_LT(bomb.size(), 1u << 20);
  try {
    driver.feed(client_frame(0x2, bomb, compressed_bits()));
    ADD_FAILURE() << "the bomb was inflated";
  } catch (const message_too_big_error& error) {
    EXPECT_EQ(error.close_code(), websocket::message_too_big);
    EXPECT_EQ(error.limit(), 1u << 20);
    // Inflating stopped one byte past the limit: the 64 MiB were never held.
    EXPECT_EQ(error.size(), (1u << 20) + 1);
  }
  // Exactly at the limit is a message.
  framer_driver exact = opened(protocol, 1 << 20);
  peer_compressor again;
  const auto messages =
      exact.feed(client_frame(0x2, again.compress(std::string(1u << 20, 'a')), compressed_bits()));
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].data.size(), 1u << 20);
}

TEST(WebsocketDeflate, AnEmptyCompressedMessageIsOneZeroByteBothWays) {
  websocket_deflate_options deflate;
  deflate.min_size = 0;
  deflate.server_context_takeover = true;
  deflate.client_context_takeover = true;
  const websocket protocol = deflating(deflate);
  framer_driver driver = opened(protocol);
  // RFC 7692 7.2.3.6: an empty message compressed is the single byte 0x00.
  const auto messages = driver.feed(client_frame(0x1, std::string(1, '\0'), compressed_bits()));
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].data, "");
  std::string wire;
  driver.framer->encode("some words first", message_kind::text, wire);
  driver.framer->encode("", message_kind::text, wire);
  driver.framer->encode("some words first", message_kind::text, wire);
  const auto frames = parse_server_frames(wire, true);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_TRUE(frames[1].compressed);
  EXPECT_EQ(frames[1].payload, std::string(1, '\0'));
  peer_decompressor peer;  // one context through all three
  EXPECT_EQ(peer.inflate_message(frames[0].payload), "some words first");
  EXPECT_EQ(peer.inflate_message(frames[1].payload), "");
  EXPECT_EQ(peer.inflate_message(frames[2].payload), "some words first");
}

// --- messages out ------------------------------------------------------------------------------

TEST(WebsocketDeflate, OutgoingMessagesAreCompressedFromMinSizeOn) {
  websocket_deflate_options deflate;
  deflate.min_size = 100;
  const websocket protocol = deflating(deflate);
  framer_driver driver = opened(protocol);
  std::string wire;
  const std::string text(5000, 'c');
  driver.framer->encode(text, message_kind::text, wire);
  driver.framer->encode("short", message_kind::text, wire);
  const auto frames = parse_server_frames(wire, true);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_TRUE(frames[0].compressed);
  EXPECT_EQ(frames[0].opcode, 0x1);
  EXPECT_LT(frames[0].payload.size(), 100u);
  peer_decompressor peer;
  EXPECT_EQ(peer.inflate_message(frames[0].payload), text);
  EXPECT_FALSE(frames[1].compressed);
  EXPECT_EQ(frames[1].payload, "short");
}

TEST(WebsocketDeflate, WithoutTakeoverIncompressibleMessagesGoAsTheyAreAndEachStandsAlone) {
  const websocket protocol = deflating();
  framer_driver driver = opened(protocol);
  std::string noise(4096, '\0');
  std::mt19937 random(7);
  for (char& c : noise) {
    c = static_cast<char>(random());
  }
  const std::string text(2000, 'r');
  std::string wire;
  driver.framer->encode(noise, message_kind::binary, wire);
  driver.framer->encode(text, message_kind::text, wire);
  driver.framer->encode(text, message_kind::text, wire);
  const auto frames = parse_server_frames(wire, true);
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_FALSE(frames[0].compressed) << "random bytes grew when compressed and went as they are";
  EXPECT_EQ(frames[0].payload, noise);
  // The same message twice compresses the same: no context carried from one to the next.
  EXPECT_TRUE(frames[1].compressed);
  EXPECT_EQ(frames[1].payload, frames[2].payload);
  peer_decompressor fresh;
  EXPECT_EQ(fresh.inflate_message(frames[2].payload), text);
}

TEST(WebsocketDeflate, WithTakeoverTheServerRefersBackToEarlierMessages) {
  websocket_deflate_options deflate;
  deflate.server_context_takeover = true;
  const websocket protocol = deflating(deflate);
  framer_driver driver = opened(protocol);
  std::string text;
  for (int i = 0; i < 300; ++i) {
    text += std::to_string(i * 7919 % 1000) + ",";
  }
  std::string wire;
  driver.framer->encode(text, message_kind::text, wire);
  driver.framer->encode(text, message_kind::text, wire);
  const auto frames = parse_server_frames(wire, true);
  ASSERT_EQ(frames.size(), 2u);
  ASSERT_TRUE(frames[0].compressed && frames[1].compressed);
  EXPECT_LT(frames[1].payload.size() * 4, frames[0].payload.size())
      << "the second message did not refer back to the first";
  peer_decompressor peer;  // keeps its context, as the client must here
  EXPECT_EQ(peer.inflate_message(frames[0].payload), text);
  EXPECT_EQ(peer.inflate_message(frames[1].payload), text);
}

TEST(WebsocketDeflate, AnOfferedServerWindowOf8IsAgreedAndMessagesGoUncompressed) {
  const websocket protocol = deflating();
  framer_driver driver(protocol);
  driver.feed(handshake_request(offer("permessage-deflate; server_max_window_bits=8")));
  EXPECT_NE(driver.link.sent.find("server_max_window_bits=8"), std::string::npos)
      << driver.link.sent;
  std::string wire;
  driver.framer->encode(std::string(1000, 'e'), message_kind::text, wire);
  const auto frames = parse_server_frames(wire, true);
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_FALSE(frames[0].compressed) << "zlib cannot compress within an 8-bit window";
}

}  // namespace
