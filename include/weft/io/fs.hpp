// weft::fs: file-system calls for coroutines, and watching a path for changes.
//
// Every call suspends only the calling coroutine: the work runs as a uv_fs_* request on libuv's
// thread pool while the scheduler keeps running the others. Each takes an optional
// weft::timeout and is a cancellation point: a cancel (or the timeout passing) wakes the caller
// with cancelled_error (timeout_error) at once. The request itself cannot be interrupted once a
// worker runs it: it completes in the background, its result is discarded, and run() waits for
// it before closing the loop (a mkdir that was abandoned may still have created the directory).
// Failures are weft::io_error carrying the libuv code, the call and the path
// ("open /nope/x: no such file or directory").
//
// Thread: call from a coroutine on the scheduler's thread (std::logic_error elsewhere).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weft/error.hpp"
#include "weft/sched/timeout.hpp"

namespace weft {
namespace detail {
struct watch_state;
}

namespace fs {

// What a directory entry or a stat() says a path is.
enum class entry_type {
  unknown,
  file,
  directory,
  symlink,
  fifo,
  socket,
  character_device,
  block_device,
};

// What stat() reports. mode holds the permission and type bits (st_mode).
struct file_status {
  std::uint64_t size = 0;                            // bytes
  std::uint32_t mode = 0;                            // st_mode: permission and type bits
  entry_type type = entry_type::unknown;             // what mode's type bits say
  std::chrono::system_clock::time_point modified{};  // mtime, nanosecond resolution
};

// One entry of a directory listing.
struct directory_entry {
  std::string name;                       // without the directory ("a.txt")
  entry_type type = entry_type::unknown;  // unknown when the file system does not say
};

// stat(2), rename(2), unlink(2), mkdir(2) and rmdir(2) for coroutines (see above).
file_status stat(const std::string& path, const timeout& limit = timeout::never());
void rename(const std::string& from, const std::string& to,
            const timeout& limit = timeout::never());
void unlink(const std::string& path, const timeout& limit = timeout::never());
void mkdir(const std::string& path, int mode = 0777, const timeout& limit = timeout::never());
void rmdir(const std::string& path, const timeout& limit = timeout::never());
// The entries of a directory, without "." and "..", in the order the file system gives them.
std::vector<directory_entry> readdir(const std::string& path,
                                     const timeout& limit = timeout::never());

// The whole content of a file (read in chunks until end of file).
std::string read_file(const std::string& path, const timeout& limit = timeout::never());
// Creates or truncates path (mode 0666 before the umask) and writes all of data.
void write_file(const std::string& path, std::string_view data,
                const timeout& limit = timeout::never());

// --- Watching a path (uv_fs_event) ---

// One change reported by the kernel. filename is the entry that changed, relative to the watched
// directory (for a watched file: the file's own name); it may be empty when the kernel does not
// say. renamed covers creation, deletion and renaming; changed covers content and attributes.
struct watch_event {
  std::string
      filename;  // the entry's name, relative to the watched directory (or the file's own name)
  bool renamed = false;  // created, deleted or renamed
  bool changed = false;  // content or attributes changed
};

// Events arrived while the watcher's queue was full. Thrown by watcher::next() once the events
// queued before the overflow have been delivered; the dropped ones are lost, so rescan what you
// watch. The watcher keeps working afterwards.
class watch_overflow_error : public error {
 public:
  // path: the watched path; dropped: events lost; capacity: watch_options::queue_capacity.
  watch_overflow_error(std::string path, std::size_t dropped, std::size_t capacity);
  // How many events were lost.
  std::size_t dropped() const noexcept { return dropped_; }

 private:
  std::size_t dropped_;
};

// Options of fs::watch.
struct watch_options {
  // Events queue up while no coroutine waits in next(); past this many, further ones are counted
  // and reported by watch_overflow_error instead of growing without bound.
  std::size_t queue_capacity = 1024;
  // Watch a directory's subdirectories too (not supported by libuv on Linux: io_error ENOSYS).
  bool recursive = false;
};

// A started watch. Movable, not copyable. Owned by one coroutine at a time; several coroutines
// may wait in next() together (each event goes to one of them). Must be closed (or destroyed)
// before run() returns, like every handle.
class watcher {
 public:
  watcher() noexcept = default;
  watcher(watcher&& other) noexcept;
  watcher& operator=(watcher&& other) noexcept;
  watcher(const watcher&) = delete;
  watcher& operator=(const watcher&) = delete;
  // Closes the watch (see close()).
  ~watcher();

  // The next event, waiting for one if none is queued. Throws timeout_error, cancelled_error,
  // watch_overflow_error (see above), io_error if the kernel reported an error on the watch, and
  // weft::error if the watcher is closed while waiting. std::logic_error on a closed watcher.
  watch_event next(const timeout& limit = timeout::never());
  // Events queued right now.
  std::size_t queued() const noexcept;

  // Stops watching and closes the uv_fs_event handle. Idempotent, never blocks: libuv closes
  // the handle asynchronously and the watcher's state is freed in the close callback (run()
  // waits for it). Coroutines waiting in next() wake with weft::error.
  void close() noexcept;
  bool is_open() const noexcept { return state_ != nullptr; }  // false once closed or moved from
  const std::string& path() const noexcept;                    // the watched path

 private:
  friend watcher watch(const std::string& path, const watch_options& options);
  explicit watcher(detail::watch_state* state) noexcept : state_(state) {}
  detail::watch_state* state_ = nullptr;
};

// Starts watching path (a file or a directory). io_error if it cannot be watched
// ("watch /nope: no such file or directory").
watcher watch(const std::string& path, const watch_options& options = {});

}  // namespace fs
}  // namespace weft
