// weft::http forms (forms.hpp): application/x-www-form-urlencoded pairs, and multipart/form-data
// read part by part as the body arrives. Nothing here needs the server: its reader over an
// exchange is forms_exchange.cpp's (so that the fuzzer links this file alone).
#include "weft/http/forms.hpp"

#include <cctype>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/boundary.hpp"
#include "http/chars.hpp"
#include "weft/http/message.hpp"

namespace weft::http {

namespace {

// A field value of the form `value *( OWS ";" OWS name "=" ( token / quoted-string ) )`
// (Content-Type, Content-Disposition; RFC 9110 5.6.6): the value, and the parameters with
// their names in lower case. Nothing when it does not parse.
struct parameterised {
  std::string_view value;
  std::vector<std::pair<std::string, std::string>> parameters;

  const std::string* get(std::string_view name) const noexcept {
    for (const auto& [n, v] : parameters) {
      if (n == name) return &v;
    }
    return nullptr;
  }
};

std::optional<parameterised> parse_parameterised(std::string_view text) {
  parameterised out;
  const std::size_t semicolon = text.find(';');
  out.value = detail::trim_ows(text.substr(0, semicolon));
  if (semicolon == std::string_view::npos) return out;
  std::string_view rest = text.substr(semicolon + 1);
  while (true) {
    rest = detail::trim_ows(rest);
    if (rest.empty()) return out;
    if (rest.front() == ';') {  // an empty parameter ("a;;b"): skipped
      rest.remove_prefix(1);
      continue;
    }
    const std::size_t equals = rest.find('=');
    if (equals == std::string_view::npos) return std::nullopt;
    const std::string_view name = detail::trim_ows(rest.substr(0, equals));
    if (!detail::is_token(name)) return std::nullopt;
    rest = detail::trim_ows(rest.substr(equals + 1));
    std::string value;
    if (!rest.empty() && rest.front() == '"') {
      std::size_t i = 1;
      for (; i < rest.size() && rest[i] != '"'; ++i) {
        if (rest[i] == '\\' && i + 1 < rest.size()) ++i;  // quoted-pair
        value.push_back(rest[i]);
      }
      if (i >= rest.size()) return std::nullopt;  // no closing quote
      rest.remove_prefix(i + 1);
    } else {
      std::size_t i = 0;
      while (i < rest.size() && detail::is_token_char(static_cast<unsigned char>(rest[i]))) ++i;
      if (i == 0) return std::nullopt;
      value.assign(rest.substr(0, i));
      rest.remove_prefix(i);
    }
    out.parameters.emplace_back(detail::ascii_lowered(name), std::move(value));
    rest = detail::trim_ows(rest);
    if (rest.empty()) return out;
    if (rest.front() != ';') return std::nullopt;
    rest.remove_prefix(1);
  }
}

// bchars (RFC 2046 5.1.1): what a boundary may hold; 1 to 70 of them, not ending in a space.
bool is_boundary(std::string_view b) noexcept {
  if (b.empty() || b.size() > 70 || b.back() == ' ') return false;
  for (unsigned char c : b) {
    if (!(std::isalnum(c) ||
          std::string_view("'()+_,-./:=? ").find(static_cast<char>(c)) != std::string_view::npos)) {
      return false;
    }
  }
  return true;
}

std::string boundary_of(std::string_view content_type) {
  if (!detail::iequals(detail::trim_ows(content_type.substr(0, content_type.find(';'))),
                       "multipart/form-data")) {
    throw form_error("weft::http::multipart_reader: the request's Content-Type is '" +
                         std::string(content_type) + "', not multipart/form-data",
                     status::unsupported_media_type);
  }
  const std::optional<parameterised> type = parse_parameterised(content_type);
  const std::string* boundary = type ? type->get("boundary") : nullptr;
  if (boundary == nullptr || !is_boundary(*boundary)) {
    throw form_error("weft::http::multipart_reader: the Content-Type '" +
                         std::string(content_type) +
                         "' has no valid boundary (1 to 70 of RFC 2046's bchars)",
                     status::bad_request);
  }
  return *boundary;
}

// The base name of a file name as sent: after the last '/' or '\'.
std::string base_name(std::string_view name) {
  const std::size_t slash = name.find_last_of("/\\");
  return std::string(slash == std::string_view::npos ? name : name.substr(slash + 1));
}

}  // namespace

multipart_reader::multipart_reader(std::string_view content_type, source next,
                                   multipart_limits limits)
    : next_(std::move(next)), limits_(limits) {
  delimiter_ = "\r\n--" + boundary_of(content_type);
  // The first delimiter may open the body with no CRLF before it: the buffer starts with one, so
  // that one search finds every delimiter.
  buffer_ = "\r\n";
}

void multipart_reader::fail(const std::string& what, http::status s) {
  state_ = state::done;
  throw form_error("weft::http::multipart_reader: " + what, s);
}

// Appends the source's next piece. It never moves what is buffered, so offsets into buffer_
// stay valid across it; compact() does, and is called only where start_ is the one offset held.
bool multipart_reader::fill() {
  const std::optional<std::string_view> piece = next_();
  if (!piece) return false;
  buffer_.append(*piece);
  return true;
}

void multipart_reader::compact() {
  // What was handed out goes once it is most of the buffer: each byte moves at most once more.
  if (start_ > 0 && start_ * 2 >= buffer_.size()) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
}

// Positioned at a delimiter (start_), reads the rest of its line: "--" closes the body (true),
// else optional spaces or tabs and CRLF open a part (false).
bool multipart_reader::at_delimiter() {
  const std::size_t after = start_ + delimiter_.size();
  while (buffer_.size() < after + 2) {
    if (!fill()) fail("the body ended on a delimiter line", status::bad_request);
  }
  if (buffer_.compare(after, 2, "--") == 0) {
    state_ = state::done;
    start_ = buffer_.size();  // the epilogue is ignored
    return true;
  }
  std::size_t at = after;
  while (true) {
    while (at < buffer_.size() && (buffer_[at] == ' ' || buffer_[at] == '\t')) ++at;
    if (at + 2 <= buffer_.size()) break;
    if (at - after > 1024) fail("a delimiter line goes on with padding", status::bad_request);
    if (!fill()) fail("the body ended on a delimiter line", status::bad_request);
  }
  if (buffer_.compare(at, 2, "\r\n") != 0) {
    fail("a delimiter line (part " + std::to_string(parts_ + 1) + ") does not end in CRLF",
         status::bad_request);
  }
  start_ = at + 2;
  return false;
}

form_part multipart_reader::read_head() {
  const std::string part_label = "part " + std::to_string(parts_ + 1);
  std::size_t end = std::string::npos;
  std::size_t searched = start_;
  while (true) {
    // An empty head is its CRLF alone; else it ends in CRLF CRLF.
    if (buffer_.size() >= start_ + 2 && buffer_.compare(start_, 2, "\r\n") == 0) {
      end = start_;
      break;
    }
    end = buffer_.find("\r\n\r\n", searched);
    if (end != std::string::npos) {
      end += 2;  // the head's last line ends at end; then the empty line
      break;
    }
    // A head of at most max_head_size bytes (to the CRLF of its last line) has its terminator
    // complete once max_head_size + 2 bytes are here: more without one is a head too large.
    if (buffer_.size() - start_ >= limits_.max_head_size + 2) {
      fail("the head of " + part_label + " is larger than max_head_size (" +
               std::to_string(limits_.max_head_size) + " bytes)",
           status::content_too_large);
    }
    searched = buffer_.size() >= start_ + 3 ? buffer_.size() - 3 : start_;
    if (!fill()) fail("the body ended inside the head of " + part_label, status::bad_request);
  }
  if (end - start_ > limits_.max_head_size) {
    fail("the head of " + part_label + " is larger than max_head_size (" +
             std::to_string(limits_.max_head_size) + " bytes)",
         status::content_too_large);
  }
  if (++parts_ > limits_.max_parts) {
    fail("the body has more than max_parts (" + std::to_string(limits_.max_parts) + ") parts",
         status::content_too_large);
  }
  form_part part;
  std::string_view lines(buffer_.data() + start_, end - start_);
  while (!lines.empty()) {
    const std::size_t eol = lines.find("\r\n");
    const std::string_view line = lines.substr(0, eol);
    lines.remove_prefix(eol + 2);
    const std::size_t colon = line.find(':');
    if (line.empty() || line.front() == ' ' || line.front() == '\t' ||
        colon == std::string_view::npos || !detail::is_token(line.substr(0, colon))) {
      fail("a line of the head of " + part_label + " is not a field: '" +
               std::string(line.substr(0, 80)) + "'",
           status::bad_request);
    }
    try {
      part.fields.add(line.substr(0, colon), detail::trim_ows(line.substr(colon + 1)));
    } catch (const std::invalid_argument&) {
      fail("a field of the head of " + part_label + " holds a control byte", status::bad_request);
    }
  }
  start_ = end + 2;

  const std::optional<std::string_view> disposition = part.fields.get("Content-Disposition");
  if (!disposition) {
    fail(part_label + " has no Content-Disposition (RFC 7578 4.2)", status::bad_request);
  }
  const std::optional<parameterised> d = parse_parameterised(*disposition);
  if (!d || !detail::iequals(d->value, "form-data") || d->get("name") == nullptr) {
    fail(part_label + "'s Content-Disposition '" + std::string(*disposition) +
             "' is not form-data with a name",
         status::bad_request);
  }
  part.name = *d->get("name");
  if (const std::string* filename = d->get("filename")) part.filename = base_name(*filename);
  const std::optional<std::string_view> type = part.fields.get("Content-Type");
  part.content_type = type ? std::string(*type) : std::string("text/plain");
  part_name_ = part.name;
  return part;
}

std::optional<form_part> multipart_reader::next_part() {
  while (state_ == state::in_part) {
    static_cast<void>(read());  // what the caller left of the part
  }
  if (state_ == state::done) return std::nullopt;
  if (state_ == state::preamble) {
    while (true) {
      const std::size_t found = buffer_.find(delimiter_, start_);
      if (found != std::string::npos) {
        start_ = found;
        break;
      }
      // Keep what could be the start of a delimiter.
      if (buffer_.size() - start_ >= delimiter_.size()) {
        start_ = buffer_.size() - (delimiter_.size() - 1);
      }
      compact();
      if (!fill()) fail("the body has no delimiter of its boundary", status::bad_request);
    }
  }
  if (at_delimiter()) return std::nullopt;
  form_part part = read_head();
  state_ = state::in_part;
  return part;
}

std::optional<std::string_view> multipart_reader::read() {
  if (state_ != state::in_part) return std::nullopt;
  while (true) {
    const std::size_t found = buffer_.find(delimiter_, start_);
    if (found != std::string::npos) {
      if (found == start_) {
        state_ = state::between;
        return std::nullopt;
      }
      const std::string_view piece(buffer_.data() + start_, found - start_);
      start_ = found;
      return piece;
    }
    // Everything but a possible start of a delimiter can go.
    const std::size_t held = delimiter_.size() - 1;
    if (buffer_.size() - start_ > held) {
      const std::size_t size = buffer_.size() - start_ - held;
      const std::string_view piece(buffer_.data() + start_, size);
      start_ += size;
      return piece;
    }
    compact();
    if (!fill()) {
      fail("the body ended inside part " + std::to_string(parts_) + " ('" + part_name_ + "')",
           status::bad_request);
    }
  }
}

std::string multipart_reader::read_all(std::size_t max_size) {
  std::string all;
  while (const std::optional<std::string_view> piece = read()) {
    if (piece->size() > max_size - all.size()) {
      fail("part " + std::to_string(parts_) + " ('" + part_name_ + "') is larger than " +
               std::to_string(max_size) + " bytes",
           status::content_too_large);
    }
    all.append(*piece);
  }
  return all;
}

namespace {

// A name or file name as browsers write it in a part's Content-Disposition (WHATWG HTML's
// multipart/form-data encoding): '"', CR and LF percent-encoded, the rest as it is.
std::string quoted_form_value(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') {
      out += "%22";
    } else if (c == '\r') {
      out += "%0D";
    } else if (c == '\n') {
      out += "%0A";
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

}  // namespace

multipart_form::multipart_form(std::string boundary)
    : boundary_(std::move(boundary)), given_(true) {
  if (!is_boundary(boundary_)) {
    throw std::invalid_argument("weft::http::multipart_form: the boundary '" + boundary_ +
                                "' is not 1 to 70 of RFC 2046's bchars");
  }
}

multipart_form& multipart_form::field(std::string_view name, std::string_view value) {
  parts_.push_back({"Content-Disposition: form-data; name=" + quoted_form_value(name) + "\r\n",
                    std::string(value)});
  return *this;
}

multipart_form& multipart_form::file(std::string_view name, std::string_view filename,
                                     std::string_view data, std::string_view content_type) {
  for (unsigned char c : content_type) {
    if (c < 0x20 || c == 0x7F) {
      throw std::invalid_argument("weft::http::multipart_form: the content type of file '" +
                                  std::string(filename) + "' holds a control byte");
    }
  }
  parts_.push_back({"Content-Disposition: form-data; name=" + quoted_form_value(name) +
                        "; filename=" + quoted_form_value(filename) +
                        "\r\nContent-Type: " + std::string(content_type) + "\r\n",
                    std::string(data)});
  return *this;
}

const std::string& multipart_form::boundary() {
  // A part may hold "--" + boundary only where it cannot be read as a delimiter; checking for
  // the bare "--" + boundary anywhere is simpler and stricter.
  const auto clashes = [this](const std::string& candidate) -> const part* {
    const std::string dashed = "--" + candidate;
    for (const part& p : parts_) {
      if (p.data.find(dashed) != std::string::npos || p.head.find(dashed) != std::string::npos) {
        return &p;
      }
    }
    return nullptr;
  };
  if (given_) {
    if (const part* p = clashes(boundary_)) {
      throw std::invalid_argument("weft::http::multipart_form: the part '" +
                                  p->head.substr(0, p->head.find("\r\n")) +
                                  "' holds the boundary '" + boundary_ + "'");
    }
    return boundary_;
  }
  while (boundary_.empty() || clashes(boundary_) != nullptr) {
    boundary_ = detail::random_boundary();
  }
  return boundary_;
}

std::string multipart_form::body() {
  const std::string& b = boundary();
  std::size_t size = b.size() + 6;
  for (const part& p : parts_) size += b.size() + p.head.size() + p.data.size() + 8;
  std::string out;
  out.reserve(size);
  for (const part& p : parts_) {
    out += "--";
    out += b;
    out += "\r\n";
    out += p.head;
    out += "\r\n";
    out += p.data;
    out += "\r\n";
  }
  out += "--";
  out += b;
  out += "--\r\n";
  return out;
}

std::string multipart_form::content_type() { return "multipart/form-data; boundary=" + boundary(); }

}  // namespace weft::http
