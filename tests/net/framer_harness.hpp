// A test-only server for a weft::net::protocol, until the connection engine serves them: it
// drives a framer over one weft::tcp::stream exactly as protocol.hpp says a connection does
// (read_some into a buffer; measure/decode while units are complete), writes the framer's raw
// replies straight to the stream, and echoes every decoded message through encode(). It ends
// when the framer finishes the conversation, the peer ends the stream, or the bytes break the
// protocol (then encode_close(close code) is sent, as the server will). Either way it half-closes,
// reads what the peer still sends until it ends (so that closing never resets a connection
// whose peer is still reading our last frame), and closes.
//
// Threads: call from a coroutine; everything stays on that scheduler.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weft/error.hpp"
#include "weft/io/tcp.hpp"
#include "weft/net/protocol.hpp"
#include "weft/sched/timeout.hpp"

namespace weft_net_test {

// What happened on one served connection.
struct served {
  int messages = 0;              // messages decoded (and echoed)
  bool finished = false;         // the framer ended the conversation (link.finish())
  bool peer_ended = false;       // the peer ended the stream first
  std::uint16_t close_code = 0;  // the protocol_error's code, when one was raised
  std::string error;             // its message, or an io_error's
  std::size_t bytes_in = 0;      // bytes read from the peer, all of them
  std::size_t bytes_out = 0;     // bytes written to it: raw replies and encoded messages
};

class stream_link final : public weft::net::framer_link {
 public:
  stream_link(weft::stream& stream, std::size_t limit, std::size_t& written)
      : stream_(stream), limit_(limit), written_(written) {}
  void send_raw(std::string_view bytes) override {
    stream_.write_all(bytes);
    written_ += bytes.size();
  }
  void finish() override { finished_ = true; }
  std::size_t max_message_size() const noexcept override { return limit_; }
  bool finished() const noexcept { return finished_; }

 private:
  weft::stream& stream_;
  std::size_t limit_;
  std::size_t& written_;
  bool finished_ = false;
};

inline served serve_with_framer(weft::tcp::stream stream, const weft::net::protocol& protocol,
                                std::size_t max_message_size = 4 << 20) {
  served report;
  auto framer = protocol.make_framer();
  stream_link link(stream, max_message_size, report.bytes_out);
  std::string buffer;  // received, from `start` on not yet consumed
  std::size_t start = 0;
  std::vector<char> chunk(64 * 1024);
  weft::net::message message;
  std::string reply;
  try {
    while (!link.finished()) {
      while (!link.finished()) {
        const std::string_view pending = std::string_view(buffer).substr(start);
        const std::size_t n = framer->measure(pending, link);
        if (n == 0) {
          break;
        }
        const bool for_user = framer->decode(pending.substr(0, n), message, link);
        start += n;
        if (for_user && !link.finished()) {
          ++report.messages;
          reply.clear();
          framer->encode(message.data, message.kind, reply);
          stream.write_all(reply);
          report.bytes_out += reply.size();
        }
      }
      if (link.finished()) {
        break;
      }
      buffer.erase(0, start);
      start = 0;
      const std::size_t got = stream.read_some(chunk);
      if (got == 0) {
        report.peer_ended = true;
        break;
      }
      buffer.append(chunk.data(), got);
      report.bytes_in += got;
    }
    report.finished = link.finished();
  } catch (const weft::net::protocol_error& error) {
    report.close_code = error.close_code();
    report.error = error.what();
    reply.clear();
    framer->encode_close(error.close_code(), {}, reply);
    try {
      stream.write_all(reply);
    } catch (const weft::io_error&) {
      // The peer went away first; the report already says why we closed.
    }
  } catch (const weft::io_error& error) {
    report.error = error.what();
  }
  try {
    stream.shutdown(weft::timeout(std::chrono::seconds(2)));
    while (stream.read_some(chunk, weft::timeout(std::chrono::seconds(2))) > 0) {
    }
  } catch (const weft::error&) {
    // A reset or a silent peer at the end changes nothing in the report.
  }
  stream.close();
  return report;
}

}  // namespace weft_net_test
