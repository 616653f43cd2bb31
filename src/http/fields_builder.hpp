// How the parsers fill a weft::http::headers without copying field by field: the whole header
// (or trailer) section is copied into the container's storage once, and each field is indexed
// by its offsets in that copy. Internal to the http layer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "weft/http/headers.hpp"

namespace weft::http::detail {

class fields_builder {
 public:
  // Starts a section: forgets the fields, keeps the capacities.
  static void reset(headers& h) noexcept {
    h.storage_.clear();
    h.index_.clear();
  }
  // Starts a request or a response: what the two parsers reset alike (the version to 1.1, the
  // body, both field sections); each resets its own start-line fields.
  template <class Message>
  static void reset_message(Message& m) noexcept {
    m.version_minor = 1;
    m.body.clear();
    reset(m.headers);
    reset(m.trailers);
  }
  // Indexes a field whose name and value are at these offsets of the section; the section's
  // bytes are copied in by adopt() once it is complete. The parser bounds sections to well
  // under 4 GiB and names to its header limit (checked by the caller against 65535).
  static void index(headers& h, std::uint32_t hash, std::size_t name_offset, std::size_t name_size,
                    std::size_t value_offset, std::size_t value_size) {
    h.index_.push_back(headers::entry{
        hash, static_cast<std::uint32_t>(name_offset), static_cast<std::uint32_t>(value_offset),
        static_cast<std::uint16_t>(name_size), 0, static_cast<std::uint32_t>(value_size)});
  }
  // The complete section, whose offsets index() recorded. clear() and append(), not assign():
  // the same bytes, without the general replace's overlap checks (about 60 instructions a
  // request by callgrind).
  static void adopt(headers& h, std::string_view section) {
    h.storage_.clear();
    h.storage_.append(section);
  }
};

// The other way: each field as a "Name: value" line ending in CRLF, in order (serialize()'s
// field lines; exchange::respond with fields and the static file cache's prepared lines too).
void append_fields(std::string& out, const headers& fields);

}  // namespace weft::http::detail
