// The parts of static_files (weft/http/static_files.hpp) that are not the resolver's flow:
// opening under the root (static_confine.cpp) and the validators, preconditions and ranges
// (static_validators.cpp). Internal to the library; pure functions or plain system calls, safe
// from any thread.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

namespace weft::http::detail {

// Opens `relative` ("a/b/c": no empty, "." or ".." component, no NUL) under the directory
// `root_fd`, read-only, O_CLOEXEC|O_NOCTTY|O_NONBLOCK, never leaving the root: with openat2
// and RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS when `use_openat2`, else by the O_NOFOLLOW walk.
// Returns the descriptor, or -errno (EXDEV for an escape, ELOOP for too many symlinks or a
// magic link, as openat2 does).
int open_beneath(int root_fd, const std::string& relative, bool use_openat2);

// The strong entity tag of a file as sent in ETag, quotes included:
// "\"<inode>-<size>-<mtime ns>\"", each in lowercase hex.
std::string entity_tag_of(const struct stat& st);

// Whether an If-None-Match / If-Match field value (a list of entity tags, or "*") matches
// `tag` (our own, strong, quoted): weakly (the W/ prefix ignored on both sides) or strongly
// (a weak tag in the list never matches). A list that does not parse matches nothing from
// the malformed element on.
bool entity_tag_list_matches(std::string_view field_value, std::string_view tag, bool weak);

// The byte ranges of a file of `size` bytes that a Range field asks for (RFC 9110 14.2).
struct byte_span {
  std::uint64_t first = 0;
  std::uint64_t length = 0;
};
struct byte_ranges {
  enum class kind : std::uint8_t {
    // No usable Range: not "bytes", an element malformed, more than max_ranges elements, or
    // ranges that add up to more than the file (overlapping: an attack or a confused client,
    // as Go's net/http reads it). Send the whole file.
    ignore,
    // Ranges to send, in `spans` in the order asked: [first, first + length) each.
    satisfiable,
    // Every range starts at or past the end (416).
    unsatisfiable,
  };
  kind result = kind::ignore;
  std::vector<byte_span> spans;  // satisfiable: at least one; those past the end are left out
};
byte_ranges parse_byte_ranges(std::string_view field_value, std::uint64_t size,
                              std::size_t max_ranges);

}  // namespace weft::http::detail
