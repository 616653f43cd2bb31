// permessage-deflate (RFC 7692): negotiation and zlib streams. The contract is in
// websocket_deflate.hpp and, for users, websocket_deflate_options.
#include "net/protocols/websocket_deflate.hpp"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "net/protocols/header_text.hpp"
#include "net/zlib_stream.hpp"

namespace weft::net::detail {

namespace {

using header_text::iequals;
using header_text::is_ows;
using header_text::is_tchar;

// One element of an extension list (RFC 6455 9.1): a name and its parameters, each a token with
// an optional value (a token or a quoted string, unquoted here).
struct extension_param {
  std::string name;
  bool has_value = false;
  std::string value;
};
struct extension_element {
  std::string name;
  std::vector<extension_param> params;
  bool malformed = false;
};

// Parses a Sec-WebSocket-Extensions value (several lines joined by ','). An element that breaks
// the grammar is kept with malformed set (its name may be empty), and parsing resumes after the
// next comma outside a quoted string.
std::vector<extension_element> parse_extensions(std::string_view text) {
  std::vector<extension_element> elements;
  std::size_t at = 0;
  auto skip_ows = [&] {
    while (at < text.size() && is_ows(text[at])) {
      ++at;
    }
  };
  auto token = [&] {
    const std::size_t start = at;
    while (at < text.size() && is_tchar(text[at])) {
      ++at;
    }
    return std::string(text.substr(start, at - start));
  };
  // After a syntax error: on to the next element.
  auto skip_element = [&] {
    bool quoted = false;
    for (; at < text.size(); ++at) {
      if (quoted && text[at] == '\\') {
        ++at;
      } else if (text[at] == '"') {
        quoted = !quoted;
      } else if (!quoted && text[at] == ',') {
        break;
      }
    }
  };
  while (at < text.size()) {
    skip_ows();
    if (at < text.size() && text[at] == ',') {
      ++at;  // an empty element (RFC 9110 5.6.1 lets lists have them)
      continue;
    }
    if (at >= text.size()) {
      break;
    }
    extension_element element;
    element.name = token();
    bool ok = !element.name.empty();
    while (ok) {
      skip_ows();
      if (at >= text.size() || text[at] == ',') {
        break;
      }
      if (text[at] != ';') {
        ok = false;
        break;
      }
      ++at;
      skip_ows();
      extension_param param;
      param.name = token();
      if (param.name.empty()) {
        ok = false;
        break;
      }
      skip_ows();
      if (at < text.size() && text[at] == '=') {
        ++at;
        skip_ows();
        param.has_value = true;
        if (at < text.size() && text[at] == '"') {
          ++at;
          bool closed = false;
          while (at < text.size()) {
            const char c = text[at++];
            if (c == '"') {
              closed = true;
              break;
            }
            if (c == '\\' && at < text.size()) {
              param.value.push_back(text[at++]);
            } else {
              param.value.push_back(c);
            }
          }
          ok = closed;
        } else {
          param.value = token();
          ok = !param.value.empty();
        }
      }
      element.params.push_back(std::move(param));
    }
    if (!ok) {
      element.malformed = true;
      skip_element();
    }
    elements.push_back(std::move(element));
    if (at < text.size() && text[at] == ',') {
      ++at;
    }
  }
  return elements;
}

// A window size parameter's value: "8" to "15", no leading zero (RFC 7692 7.1.2); 0 otherwise.
int window_bits_of(const std::string& value) {
  if (value.size() == 1 && (value[0] == '8' || value[0] == '9')) {
    return value[0] - '0';
  }
  if (value.size() == 2 && value[0] == '1' && value[1] >= '0' && value[1] <= '5') {
    return 10 + (value[1] - '0');
  }
  return 0;
}

// The permessage-deflate parameters of one element, checked as RFC 7692 5 and 7.1 say: each
// defined at most once, the takeover ones without a value, server_max_window_bits with one,
// client_max_window_bits with or without. why names the first problem.
struct deflate_params {
  bool server_no_context_takeover = false;
  bool client_no_context_takeover = false;
  int server_max_window_bits = 0;  // 0: absent
  int client_max_window_bits = 0;  // 0: absent; -1: present without a value
};
bool read_params(const extension_element& element, deflate_params& out, std::string& why) {
  bool seen[4] = {false, false, false, false};
  for (const extension_param& param : element.params) {
    int index = -1;
    if (iequals(param.name, "server_no_context_takeover")) {
      index = 0;
    } else if (iequals(param.name, "client_no_context_takeover")) {
      index = 1;
    } else if (iequals(param.name, "server_max_window_bits")) {
      index = 2;
    } else if (iequals(param.name, "client_max_window_bits")) {
      index = 3;
    } else {
      why = "the parameter '" + param.name + "', which permessage-deflate does not define";
      return false;
    }
    if (seen[index]) {
      why = "the parameter " + param.name + " twice";
      return false;
    }
    seen[index] = true;
    if (index < 2) {
      if (param.has_value) {
        why = param.name + " with a value";
        return false;
      }
      (index == 0 ? out.server_no_context_takeover : out.client_no_context_takeover) = true;
      continue;
    }
    if (!param.has_value) {
      if (index == 2) {
        why = "server_max_window_bits without a value";
        return false;
      }
      out.client_max_window_bits = -1;
      continue;
    }
    const int bits = window_bits_of(param.value);
    if (bits == 0) {
      why = param.name + "=" + param.value + " (a window is 8 to 15 bits)";
      return false;
    }
    (index == 2 ? out.server_max_window_bits : out.client_max_window_bits) = bits;
  }
  return true;
}

std::string answer_value(const deflate_agreement& agreed, bool server_bits, bool client_bits) {
  std::string value = "permessage-deflate";
  if (agreed.server_no_context_takeover) {
    value += "; server_no_context_takeover";
  }
  if (agreed.client_no_context_takeover) {
    value += "; client_no_context_takeover";
  }
  if (server_bits) {
    value += "; server_max_window_bits=" + std::to_string(agreed.server_max_window_bits);
  }
  if (client_bits) {
    value += "; client_max_window_bits=" + std::to_string(agreed.client_max_window_bits);
  }
  return value;
}

[[noreturn]] void inflate_failed(const std::string& what) {
  throw protocol_error("websocket: a compressed message that does not inflate (" + what + ")",
                       websocket::invalid_payload);
}

// zlib's streams take at most UINT_MAX bytes at a time.
constexpr std::size_t zlib_step = std::size_t{1} << 30;

}  // namespace

// --- negotiation ---------------------------------------------------------------------------

void check_deflate_options(const websocket_deflate_options& options, const char* where) {
  auto bad = [&](const std::string& what) {
    throw std::invalid_argument(std::string(where) + ".deflate." + what);
  };
  if (options.level < 1 || options.level > 9) {
    bad("level must be 1 to 9, not " + std::to_string(options.level));
  }
  if (options.mem_level < 1 || options.mem_level > 9) {
    bad("mem_level must be 1 to 9, not " + std::to_string(options.mem_level));
  }
  // 8 is a window RFC 7692 allows, but zlib cannot compress with it (it makes a 9-bit window
  // of a raw deflate stream's 8).
  if (options.server_max_window_bits < 9 || options.server_max_window_bits > 15) {
    bad("server_max_window_bits must be 9 to 15, not " +
        std::to_string(options.server_max_window_bits));
  }
  if (options.client_max_window_bits < 9 || options.client_max_window_bits > 15) {
    bad("client_max_window_bits must be 9 to 15, not " +
        std::to_string(options.client_max_window_bits));
  }
}

std::optional<deflate_answer> answer_deflate_offers(std::string_view offers,
                                                    const websocket_deflate_options& options) {
  for (const extension_element& element : parse_extensions(offers)) {
    if (element.malformed || !iequals(element.name, "permessage-deflate")) {
      continue;
    }
    deflate_params offered;
    std::string why;
    if (!read_params(element, offered, why)) {
      continue;  // declined (RFC 7692 5): on to the next offer
    }
    deflate_answer answer;
    deflate_agreement& agreed = answer.agreed;
    agreed.server_no_context_takeover =
        offered.server_no_context_takeover || !options.server_context_takeover;
    agreed.client_no_context_takeover =
        offered.client_no_context_takeover || !options.client_context_takeover;
    agreed.server_max_window_bits =
        offered.server_max_window_bits != 0
            ? std::min(offered.server_max_window_bits, options.server_max_window_bits)
            : options.server_max_window_bits;
    // A client's window can only be limited when its offer says it takes the parameter; the
    // limit is then at most what it named.
    bool client_bits = false;
    if (offered.client_max_window_bits != 0) {
      const int allowed = offered.client_max_window_bits > 0 ? offered.client_max_window_bits : 15;
      agreed.client_max_window_bits = std::min(allowed, options.client_max_window_bits);
      client_bits = agreed.client_max_window_bits < 15 || offered.client_max_window_bits > 0;
    }
    answer.header_value = answer_value(agreed, offered.server_max_window_bits != 0, client_bits);
    return answer;
  }
  return std::nullopt;
}

std::string deflate_offer(const websocket_deflate_options& options) {
  std::string offer = "permessage-deflate; client_max_window_bits";
  if (!options.server_context_takeover) {
    offer += "; server_no_context_takeover";
  }
  if (!options.client_context_takeover) {
    offer += "; client_no_context_takeover";
  }
  if (options.server_max_window_bits < 15) {
    offer += "; server_max_window_bits=" + std::to_string(options.server_max_window_bits);
  }
  return offer;
}

std::optional<deflate_agreement> read_deflate_answer(std::string_view answer,
                                                     const websocket_deflate_options& options,
                                                     std::string& why) {
  const std::vector<extension_element> elements = parse_extensions(answer);
  if (elements.size() != 1) {
    why = elements.empty() ? "an empty Sec-WebSocket-Extensions"
                           : "more than one extension, where permessage-deflate was offered";
    return std::nullopt;
  }
  const extension_element& element = elements.front();
  if (element.malformed) {
    why = "a malformed Sec-WebSocket-Extensions";
    return std::nullopt;
  }
  if (!iequals(element.name, "permessage-deflate")) {
    why = "the extension '" + element.name + "', which was not offered";
    return std::nullopt;
  }
  deflate_params answered;
  if (!read_params(element, answered, why)) {
    return std::nullopt;
  }
  if (answered.client_max_window_bits == -1) {
    why = "client_max_window_bits without a value";
    return std::nullopt;
  }
  if (!options.server_context_takeover && !answered.server_no_context_takeover) {
    why = "no server_no_context_takeover, which the offer asked for";
    return std::nullopt;
  }
  if (options.server_max_window_bits < 15 &&
      (answered.server_max_window_bits == 0 ||
       answered.server_max_window_bits > options.server_max_window_bits)) {
    why = "a server window larger than the offer's server_max_window_bits=" +
          std::to_string(options.server_max_window_bits);
    return std::nullopt;
  }
  deflate_agreement agreed;
  agreed.server_no_context_takeover = answered.server_no_context_takeover;
  // Without context takeover of its own, a client resets its compressor anyway.
  agreed.client_no_context_takeover =
      answered.client_no_context_takeover || !options.client_context_takeover;
  if (answered.server_max_window_bits != 0) {
    agreed.server_max_window_bits = answered.server_max_window_bits;
  }
  if (answered.client_max_window_bits != 0) {
    agreed.client_max_window_bits = answered.client_max_window_bits;
  }
  return agreed;
}

// --- zlib streams ----------------------------------------------------------------------------

deflate_session::deflate_session(const websocket_deflate_options& options,
                                 const deflate_agreement& agreed, websocket_role role)
    : level_(options.level), mem_level_(options.mem_level), min_size_(options.min_size) {
  if (role == websocket_role::server) {
    compress_bits_ = agreed.server_max_window_bits;
    compress_takeover_ = !agreed.server_no_context_takeover;
    inflate_bits_ = agreed.client_max_window_bits;
    inflate_takeover_ = !agreed.client_no_context_takeover;
  } else {
    compress_bits_ = std::min(options.client_max_window_bits, agreed.client_max_window_bits);
    compress_takeover_ = !agreed.client_no_context_takeover;
    inflate_bits_ = agreed.server_max_window_bits;
    inflate_takeover_ = !agreed.server_no_context_takeover;
  }
  // A 9-bit window for inflating what was compressed with 8 (the agreement allows 8; a
  // decompressor with a larger window reads any smaller one's output).
  inflate_bits_ = std::max(inflate_bits_, 9);
}

deflate_session::~deflate_session() = default;

zlib_deflater& deflate_session::deflater() {
  if (!compress_takeover_) {
    return thread_deflater(level_, -compress_bits_, mem_level_);  // reset after every message
  }
  if (own_deflater_ == nullptr) {
    own_deflater_ = std::make_unique<zlib_deflater>(level_, -compress_bits_, mem_level_);
  }
  return *own_deflater_;
}

zlib_inflater& deflate_session::inflater() {
  if (!inflate_takeover_) {
    return thread_inflater(-inflate_bits_);
  }
  if (own_inflater_ == nullptr) {
    own_inflater_ = std::make_unique<zlib_inflater>(-inflate_bits_);
  }
  return *own_inflater_;
}

bool deflate_session::compress(std::string_view payload, std::string& out) {
  if (payload.empty()) {
    // RFC 7692 7.2.3.6: one empty stored block's first byte. zlib would write nothing at all
    // here when its stream was flushed last (a flush with no new input is no progress).
    out.assign(1, '\0');
    return compress_takeover_;
  }
  z_stream& z = deflater().z;
  const deflate_reset_on_exit reset(compress_takeover_ ? nullptr : &z);

  out.clear();
  std::size_t written = 0;
  out.resize(payload.size() / 2 + 64);
  const auto* input = reinterpret_cast<const Bytef*>(payload.data());
  std::size_t left = payload.size();
  for (;;) {
    const std::size_t step = std::min(left, zlib_step);
    z.next_in = const_cast<Bytef*>(input);  // zlib's API is not const; it only reads
    z.avail_in = static_cast<uInt>(step);
    const bool last = step == left;
    for (;;) {
      if (out.size() - written < 64) {
        out.resize(out.size() * 2);
      }
      const std::size_t room = std::min(out.size() - written, zlib_step);
      z.next_out = reinterpret_cast<Bytef*>(out.data() + written);
      z.avail_out = static_cast<uInt>(room);
      const int status = deflate(&z, last ? Z_SYNC_FLUSH : Z_NO_FLUSH);
      written += room - z.avail_out;
      if (status != Z_OK && status != Z_BUF_ERROR) {
        throw std::logic_error("websocket: deflate failed with zlib status " +
                               std::to_string(status));
      }
      // Done with this input once it is all taken and, for the flush, once zlib left room in
      // the output (a full output may hide more of the flush).
      if (z.avail_in == 0 && z.avail_out != 0) {
        break;
      }
    }
    input += step;
    left -= step;
    if (left == 0) {
      break;
    }
  }
  out.resize(written);
  // A sync flush ends in an empty stored block, 00 00 FF FF, which RFC 7692 7.2.1 cuts.
  static constexpr char tail[4] = {0, 0, static_cast<char>(0xFF), static_cast<char>(0xFF)};
  if (out.size() < 4 || std::memcmp(out.data() + out.size() - 4, tail, 4) != 0) {
    throw std::logic_error("websocket: deflate's sync flush did not end in 00 00 FF FF");
  }
  out.resize(out.size() - 4);
  return compress_takeover_ || out.size() < payload.size();
}

void deflate_session::decompress(std::string_view payload, std::string& out, std::size_t limit) {
  z_stream& z = inflater().z;
  const inflate_reset_on_exit reset(inflate_takeover_ ? nullptr : &z);
  // On an error the stream's state is lost either way: a kept context is useless after it, and
  // the connection closes.
  static constexpr unsigned char tail[4] = {0, 0, 0xFF, 0xFF};
  const std::size_t cap = limit == SIZE_MAX ? limit : limit + 1;  // one past: "over the limit"
  std::size_t produced = 0;
  out.resize(std::min(cap, std::max<std::size_t>(256, payload.size() * 4)));
  struct piece {
    const unsigned char* data;
    std::size_t size;
  };
  const piece pieces[2] = {{reinterpret_cast<const unsigned char*>(payload.data()), payload.size()},
                           {tail, sizeof tail}};
  for (int index = 0; index < 2; ++index) {
    const unsigned char* input = pieces[index].data;
    std::size_t left = pieces[index].size;
    bool ended = false;
    do {
      const std::size_t step = std::min(left, zlib_step);
      z.next_in = const_cast<Bytef*>(input);
      z.avail_in = static_cast<uInt>(step);
      for (;;) {
        if (produced == out.size()) {
          if (out.size() >= cap) {
            throw message_too_big_error("websocket", produced, limit, websocket::message_too_big);
          }
          out.resize(std::min(cap, out.size() * 2));
        }
        const std::size_t room = std::min(out.size() - produced, zlib_step);
        z.next_out = reinterpret_cast<Bytef*>(out.data() + produced);
        z.avail_out = static_cast<uInt>(room);
        const int status = inflate(&z, Z_SYNC_FLUSH);
        produced += room - z.avail_out;
        if (produced > limit) {
          throw message_too_big_error("websocket", produced, limit, websocket::message_too_big);
        }
        if (status == Z_STREAM_END) {
          ended = true;
          break;
        }
        if (status == Z_DATA_ERROR) {
          inflate_failed(z.msg != nullptr ? z.msg : "bad data");
        }
        if (status == Z_NEED_DICT) {
          inflate_failed("it asks for a preset dictionary");
        }
        if (status == Z_MEM_ERROR) {
          throw std::bad_alloc();
        }
        if (status != Z_OK && status != Z_BUF_ERROR) {
          inflate_failed("zlib status " + std::to_string(status));
        }
        if (z.avail_in == 0 && z.avail_out != 0) {
          break;  // all of this input taken, and nothing held back for want of room
        }
      }
      const std::size_t taken = step - z.avail_in;
      input += taken;
      left -= taken;
      if (ended) {
        break;
      }
    } while (left != 0);
    if (ended) {
      // A final block (BFINAL) ends the sender's DEFLATE stream (RFC 7692 7.2.3.4 lets it): the
      // message ends there, and only the tail this side appended may follow. The next message
      // starts a new stream, with this one's window as its dictionary when the context is kept.
      if (index == 0 && left != 0) {
        inflate_failed("data after its final block");
      }
      if (inflate_takeover_) {
        std::vector<Bytef> window(std::size_t{1} << inflate_bits_);
        uInt size = 0;
        inflateGetDictionary(&z, window.data(), &size);
        inflateReset(&z);
        inflateSetDictionary(&z, window.data(), size);
      } else {
        inflateReset(&z);
      }
      break;
    }
  }
  out.resize(produced);
}

}  // namespace weft::net::detail
