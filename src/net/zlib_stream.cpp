// zlib streams: the contract is in zlib_stream.hpp.
#include "net/zlib_stream.hpp"

#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

namespace weft::net::detail {

namespace {

void check_init(int status, const std::string& what) {
  if (status == Z_MEM_ERROR) {
    throw std::bad_alloc();
  }
  if (status != Z_OK) {
    throw std::logic_error("weft: zlib refused " + what);
  }
}

}  // namespace

zlib_deflater::zlib_deflater(int level, int window_bits, int mem_level)
    : level(level), window_bits(window_bits), mem_level(mem_level) {
  std::memset(&z, 0, sizeof z);
  check_init(deflateInit2(&z, level, Z_DEFLATED, window_bits, mem_level, Z_DEFAULT_STRATEGY),
             "deflate level " + std::to_string(level) + ", window " + std::to_string(window_bits) +
                 ", memLevel " + std::to_string(mem_level));
}

zlib_inflater::zlib_inflater(int window_bits) : window_bits(window_bits) {
  std::memset(&z, 0, sizeof z);
  check_init(inflateInit2(&z, window_bits), "inflate window " + std::to_string(window_bits));
}

zlib_deflater& thread_deflater(int level, int window_bits, int mem_level) {
  thread_local std::vector<std::unique_ptr<zlib_deflater>> shared;
  for (const auto& stream : shared) {
    if (stream->level == level && stream->window_bits == window_bits &&
        stream->mem_level == mem_level) {
      return *stream;
    }
  }
  shared.push_back(std::make_unique<zlib_deflater>(level, window_bits, mem_level));
  return *shared.back();
}

zlib_inflater& thread_inflater(int window_bits) {
  thread_local std::vector<std::unique_ptr<zlib_inflater>> shared;
  for (const auto& stream : shared) {
    if (stream->window_bits == window_bits) {
      return *stream;
    }
  }
  shared.push_back(std::make_unique<zlib_inflater>(window_bits));
  return *shared.back();
}

}  // namespace weft::net::detail
