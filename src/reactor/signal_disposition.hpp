// SIGCHLD's disposition around libuv's child watcher. uv_spawn starts a signal handle of the
// loop's own for SIGCHLD, and libuv stops it when the loop's last process handle closes, leaving
// SIGCHLD at SIG_DFL whatever the program had (its own handler, or SIG_IGN to reap children
// itself). The same process-wide count that puts back a signal's disposition after the last
// signals::wait handle closes (src/reactor/signals.cpp) counts these watchers too.
#pragma once

#include <uv.h>

namespace weft::detail {

// Around anything that may start or stop loop's child watcher (uv_spawn; uv_close of a
// process handle): counts the watcher before it starts, keeping SIGCHLD's disposition when it
// is the first handle of the process to catch it, and uncounts it once it has stopped, putting
// that disposition back when it was the last. From the loop's thread.
class child_signal_scope {
 public:
  explicit child_signal_scope(uv_loop_t& loop);
  ~child_signal_scope();
  child_signal_scope(const child_signal_scope&) = delete;
  child_signal_scope& operator=(const child_signal_scope&) = delete;

 private:
  uv_loop_t& loop_;
};

}  // namespace weft::detail
