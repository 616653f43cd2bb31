// http::protocol(): the request framer. measure() keeps one request_parser and how far into the
// buffered input it has parsed, so a request arriving in pieces is parsed once in all; decode()
// hands the measured bytes on and resets that offset for the next request.
#include "weft/http/protocol.hpp"

#include <string>

#include "http/server_state.hpp"

namespace weft::http {

namespace {

class request_framer final : public net::framer {
 public:
  explicit request_framer(const parser_limits& limits) : parser_(limits) {}

  std::size_t measure(std::string_view input, net::framer_link& link) override {
    for (;;) {
      if (measured_ > input.size()) {
        throw net::protocol_error(
            "http framer: measure() was given fewer bytes than it had "
            "already measured");
      }
      if (measured_ > link.max_message_size()) {
        refuse(link, status::content_too_large,
               "the request is over max_message_size (" + std::to_string(link.max_message_size()) +
                   " bytes)",
               true, measured_, link.max_message_size());
      }
      parse_result r = parser_.parse(input.substr(measured_));
      measured_ += r.consumed;
      switch (r.event) {
        case parse_event::message_complete:
          return measured_;
        case parse_event::error: {
          const status s = parser_.error_status();
          refuse(link, s, parser_.error_reason(), s == status::content_too_large, measured_,
                 parser_.limits().max_body_size);
          break;
        }
        case parse_event::need_more:
          return 0;
        default:
          break;  // headers_complete, body: go on
      }
    }
  }

  bool decode(std::string_view unit, net::message& out, net::framer_link&) override {
    out.data.assign(unit);
    out.kind = net::message_kind::binary;
    measured_ = 0;
    return true;
  }

  void encode(std::string_view payload, net::message_kind, std::string& out) override {
    out.append(payload);
  }

 private:
  [[noreturn]] void refuse(net::framer_link& link, status s, const std::string& reason,
                           bool too_big, std::size_t size, std::size_t limit) {
    std::string body(reason_phrase(s));
    body += ": ";
    body += reason;
    body += '\n';
    std::string answer;
    detail::append_simple_head(answer, s, "", "text/plain; charset=utf-8", body.size(), false, 1);
    answer += body;
    link.send_raw(answer);
    if (too_big) {
      throw net::message_too_big_error("http", size, limit);
    }
    throw net::protocol_error("http: " + std::to_string(code_of(s)) + " " + reason);
  }

  request_parser parser_;
  std::size_t measured_ = 0;
};

class http_protocol final : public net::protocol {
 public:
  explicit http_protocol(const parser_limits& limits) : limits_(limits) {}
  const char* name() const noexcept override { return "http"; }
  std::unique_ptr<net::framer> make_framer() const override {
    return std::make_unique<request_framer>(limits_);
  }

 private:
  parser_limits limits_;
};

}  // namespace

std::shared_ptr<const net::protocol> protocol(const parser_limits& limits) {
  return std::make_shared<const http_protocol>(limits);
}

}  // namespace weft::http
