// weft::http::headers: a packed, ordered, case-insensitive field list (see the header).
#include "weft/http/headers.hpp"

#include <limits>
#include <stdexcept>
#include <string>

#include "http/chars.hpp"

namespace weft::http {

using detail::iequals;
using detail::name_hash;

headers::headers(std::initializer_list<std::pair<std::string_view, std::string_view>> fields) {
  for (const auto& [name, value] : fields) add(name, value);
}

headers::field headers::operator[](std::size_t i) const noexcept {
  const entry& e = index_[i];
  const char* base = storage_.data();
  return {std::string_view(base + e.name_offset, e.name_size),
          std::string_view(base + e.value_offset, e.value_size)};
}

void headers::append(std::string_view name, std::string_view value) {
  if (!detail::is_token(name)) {
    throw std::invalid_argument("http::headers: field name '" + std::string(name) +
                                "' is not a token (RFC 9110 5.6.2: letters, digits and "
                                "!#$%&'*+-.^_`|~ only, not empty)");
  }
  for (unsigned char c : value) {
    if (!detail::is_field_value_char(c)) {
      throw std::invalid_argument("http::headers: the value of field '" + std::string(name) +
                                  "' has the control character " + std::to_string(c) +
                                  " (CR, LF and other controls are not allowed in a value)");
    }
  }
  value = detail::trim_ows(value);
  if (name.size() > std::numeric_limits<std::uint16_t>::max() ||
      storage_.size() + name.size() + value.size() > std::numeric_limits<std::uint32_t>::max()) {
    throw std::invalid_argument("http::headers: field '" + std::string(name.substr(0, 64)) +
                                "' would make the fields larger than 4 GiB or its name longer "
                                "than 65535 bytes");
  }
  entry e{};
  e.hash = name_hash(name);
  e.name_offset = static_cast<std::uint32_t>(storage_.size());
  e.name_size = static_cast<std::uint16_t>(name.size());
  storage_.append(name);
  e.value_offset = static_cast<std::uint32_t>(storage_.size());
  e.value_size = static_cast<std::uint32_t>(value.size());
  storage_.append(value);
  index_.push_back(e);
}

void headers::add(std::string_view name, std::string_view value) { append(name, value); }

void headers::add(const headers& from, std::size_t i) {
  if (i >= from.index_.size()) {
    throw std::out_of_range("http::headers::add: field " + std::to_string(i) + " of a list of " +
                            std::to_string(from.index_.size()));
  }
  entry e = from.index_[i];  // a copy: `from` may be *this, whose index_ may grow below
  if (storage_.size() + e.name_size + e.value_size > std::numeric_limits<std::uint32_t>::max()) {
    throw std::invalid_argument("http::headers: the fields would be larger than 4 GiB");
  }
  const std::uint32_t name_offset = e.name_offset;
  const std::uint32_t value_offset = e.value_offset;
  // std::string::append(const string&, pos, n) is right when the source is storage_ itself.
  e.name_offset = static_cast<std::uint32_t>(storage_.size());
  storage_.append(from.storage_, name_offset, e.name_size);
  e.value_offset = static_cast<std::uint32_t>(storage_.size());
  storage_.append(from.storage_, value_offset, e.value_size);
  index_.push_back(e);
}

void headers::reserve(std::size_t fields, std::size_t bytes) {
  index_.reserve(fields);
  storage_.reserve(bytes);
}

void headers::set(std::string_view name, std::string_view value) {
  std::size_t first = find(name);
  if (first == npos) {
    append(name, value);
    return;
  }
  // Append the new field (validating it), then move it into the first one's place and drop
  // the others; the old bytes stay in storage_ until clear(), which is cheap and rare.
  append(name, value);
  entry fresh = index_.back();
  index_.pop_back();
  index_[first] = fresh;
  std::uint32_t hash = fresh.hash;
  std::size_t out = first + 1;
  for (std::size_t i = first + 1; i < index_.size(); ++i) {
    const entry& e = index_[i];
    bool same = e.hash == hash &&
                iequals(std::string_view(storage_.data() + e.name_offset, e.name_size), name);
    if (!same) index_[out++] = e;
  }
  index_.resize(out);
  compact();
}

void headers::compact() {
  // set() and remove() leave the bytes of replaced fields in storage_; rebuild it when they
  // outweigh the live ones, so that a long-lived message set again and again stays bounded.
  std::size_t live = 0;
  for (const entry& e : index_) live += e.name_size + e.value_size;
  if (storage_.size() <= 2 * live + 1024) return;
  std::string packed;
  packed.reserve(live);
  for (entry& e : index_) {
    std::uint32_t name_offset = static_cast<std::uint32_t>(packed.size());
    packed.append(storage_, e.name_offset, e.name_size);
    std::uint32_t value_offset = static_cast<std::uint32_t>(packed.size());
    packed.append(storage_, e.value_offset, e.value_size);
    e.name_offset = name_offset;
    e.value_offset = value_offset;
  }
  storage_ = std::move(packed);
}

std::size_t headers::remove(std::string_view name) {
  std::uint32_t hash = name_hash(name);
  std::size_t out = 0;
  for (std::size_t i = 0; i < index_.size(); ++i) {
    const entry& e = index_[i];
    bool same = e.hash == hash &&
                iequals(std::string_view(storage_.data() + e.name_offset, e.name_size), name);
    if (!same) index_[out++] = e;
  }
  std::size_t removed = index_.size() - out;
  index_.resize(out);
  if (index_.empty()) storage_.clear();
  compact();
  return removed;
}

void headers::clear() noexcept {
  storage_.clear();
  index_.clear();
}

std::size_t headers::find_from(std::size_t from, std::uint32_t hash,
                               std::string_view name) const noexcept {
  for (std::size_t i = from; i < index_.size(); ++i) {
    const entry& e = index_[i];
    if (e.hash == hash && e.name_size == name.size() &&
        iequals(std::string_view(storage_.data() + e.name_offset, e.name_size), name)) {
      return i;
    }
  }
  return npos;
}

std::size_t headers::find(std::string_view name) const noexcept {
  return find_from(0, name_hash(name), name);
}

std::optional<std::string_view> headers::get(std::string_view name) const noexcept {
  std::size_t i = find(name);
  if (i == npos) return std::nullopt;
  return (*this)[i].value;
}

std::size_t headers::count(std::string_view name) const noexcept {
  std::uint32_t hash = name_hash(name);
  std::size_t n = 0;
  for (std::size_t i = find_from(0, hash, name); i != npos; i = find_from(i + 1, hash, name)) ++n;
  return n;
}

std::vector<std::string_view> headers::get_all(std::string_view name) const {
  std::vector<std::string_view> values;
  std::uint32_t hash = name_hash(name);
  for (std::size_t i = find_from(0, hash, name); i != npos; i = find_from(i + 1, hash, name)) {
    values.push_back((*this)[i].value);
  }
  return values;
}

bool headers::has_token(std::string_view name, std::string_view token) const noexcept {
  std::uint32_t hash = name_hash(name);
  for (std::size_t i = find_from(0, hash, name); i != npos; i = find_from(i + 1, hash, name)) {
    std::string_view list = (*this)[i].value;
    while (!list.empty()) {
      std::size_t comma = list.find(',');
      std::string_view element = list.substr(0, comma);
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      element = element.substr(0, element.find(';'));
      if (iequals(detail::trim_ows(element), token)) return true;
    }
  }
  return false;
}

bool operator==(const headers& a, const headers& b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    headers::field x = a[i];
    headers::field y = b[i];
    if (x.name != y.name || x.value != y.value) return false;
  }
  return true;
}

}  // namespace weft::http
