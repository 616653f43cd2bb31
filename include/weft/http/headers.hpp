// weft::http::headers: the header (or trailer) fields of one HTTP message.
//
// Contract:
//   - Fields keep their arrival (or insertion) order, duplicates included: RFC 9110 5.3 lets a
//     list-valued field (Accept, Via, Set-Cookie...) appear several times, and what a message
//     carried is what a proxy or a logger must see again. Which singleton fields may not repeat
//     in a request (Host, Content-Length) is the parser's business, not this container's.
//   - Names compare case-insensitively (ASCII); values are bytes as received, without the
//     surrounding whitespace.
//   - Lookup is a linear scan over a packed index whose entries carry a case-folded hash of the
//     name, so a miss costs one integer compare per field and a hit one case-insensitive compare:
//     faster than a hash map for the 5-30 fields real messages carry, and allocation-free.
//   - Storage: names and values live in one string owned by the container, the index in one
//     vector; clear() keeps both capacities, so a parser that reuses a message for every request
//     of a connection allocates nothing once warmed up. string_views returned by the accessors
//     stay valid until the next mutation (add, set, remove, clear, assignment).
//   - add() and set() throw std::invalid_argument for a name that is not a token or a value with
//     a control character (CR and LF included: no header injection through a value).
//   - A plain value type: not synchronised; one thread at a time. Nothing blocks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft::http {

namespace detail {
class fields_builder;
}

class headers {
 public:
  // One header field: views into the headers object, valid while it is unchanged.
  struct field {
    std::string_view name;   // as received or set (compare case-insensitively)
    std::string_view value;  // without surrounding whitespace
  };

  // Walks the fields in order.
  class const_iterator {
   public:
    // The standard iterator protocol (fields are returned by value).
    using iterator_category = std::random_access_iterator_tag;
    using value_type = field;                // field
    using difference_type = std::ptrdiff_t;  // std::ptrdiff_t
    using pointer = void;                    // fields are made on the fly: no pointer
    using reference = field;                 // fields are returned by value

    const_iterator() = default;
    // The standard iterator protocol: operator* gives the field, operator++ moves to the next.
    field operator*() const noexcept { return (*owner_)[index_]; }
    const_iterator& operator++() noexcept {
      ++index_;
      return *this;
    }
    const_iterator operator++(int) noexcept {
      const_iterator old = *this;
      ++index_;
      return old;
    }
    friend bool operator==(const const_iterator& a, const const_iterator& b) noexcept {
      return a.index_ == b.index_;
    }

   private:
    friend class headers;
    const_iterator(const headers* owner, std::size_t index) : owner_(owner), index_(index) {}
    const headers* owner_ = nullptr;
    std::size_t index_ = 0;
  };

  headers() = default;
  // The fields in the order given.
  headers(std::initializer_list<std::pair<std::string_view, std::string_view>> fields);

  // size() and empty(): how many fields (every occurrence counts).
  std::size_t size() const noexcept { return index_.size(); }
  bool empty() const noexcept { return index_.empty(); }
  // The i-th field in order; i < size().
  field operator[](std::size_t i) const noexcept;
  // begin() and end(): for (auto field : headers), in order.
  const_iterator begin() const noexcept { return {this, 0}; }
  const_iterator end() const noexcept { return {this, index_.size()}; }

  // Appends a field (after any of the same name).
  void add(std::string_view name, std::string_view value);
  // Appends the i-th field of `from` (i < from.size(), else std::out_of_range; `from` may be
  // this list). It was checked when it went into `from`, so the copy is not checked again: for
  // passing fields on from one message to another (a proxy).
  void add(const headers& from, std::size_t i);
  // Room for `fields` fields whose names and values come to `bytes` bytes in all, so that
  // adding up to that allocates nothing (std::vector::reserve's meaning: totals, not more).
  void reserve(std::size_t fields, std::size_t bytes);
  // Replaces every field of that name by one (at the position of the first, else at the end).
  void set(std::string_view name, std::string_view value);
  // Removes every field of that name; returns how many there were.
  std::size_t remove(std::string_view name);
  void clear() noexcept;  // removes every field

  // The value of the first field of that name.
  std::optional<std::string_view> get(std::string_view name) const noexcept;
  // contains() and count(): whether a field of that name is there, and how many times.
  bool contains(std::string_view name) const noexcept { return find(name) != npos; }
  std::size_t count(std::string_view name) const noexcept;
  // Every value of that name, in order.
  std::vector<std::string_view> get_all(std::string_view name) const;
  // Whether a list-valued field ("Connection", "Transfer-Encoding", ...) of that name, over all
  // its occurrences, has the element `token` (case-insensitive), ignoring parameters after ';'.
  bool has_token(std::string_view name, std::string_view token) const noexcept;

  friend bool operator==(const headers& a, const headers& b) noexcept;

 private:
  friend class detail::fields_builder;
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  // Offsets into storage_: 32 bits are plenty (the parser bounds a header section far below
  // 4 GiB, and add() checks), and keep an entry at 20 bytes.
  struct entry {
    std::uint32_t hash;
    std::uint32_t name_offset;
    std::uint32_t value_offset;
    std::uint16_t name_size;
    std::uint16_t padding_ = 0;
    std::uint32_t value_size;
  };

  std::size_t find(std::string_view name) const noexcept;
  std::size_t find_from(std::size_t from, std::uint32_t hash, std::string_view name) const noexcept;
  void append(std::string_view name, std::string_view value);
  void compact();

  std::string storage_;
  std::vector<entry> index_;
};

}  // namespace weft::http
