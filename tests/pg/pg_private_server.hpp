// A PostgreSQL 15 server of one's own, for the tests that stop and restart their server (the
// shared one of pg_server.hpp must stay up for every other test process) and for the bench
// programs of suite `pool` (which need a server and no GoogleTest).
//
// Each instance has its own directory under /tmp (data dir and unix socket; no TCP port): the
// data dir is a copy of a template initdb'd once per machine (under an flock, like the shared
// server's, with the same settings), so making one costs a directory copy and a server start,
// not an initdb. The postmaster is a child of this process; the destructor stops it (if it runs)
// and removes the directory. A process that crashes leaves its directory behind in /tmp.
//
// Blocking: every member blocks the calling thread (server start ~0.1-1 s, stop until the
// postmaster has exited). From a coroutine, call start() / stop() through
// weft::thread_pool::run so the scheduler keeps running meanwhile. One thread at a time.
// Failures are std::runtime_error saying what went wrong (missing server binaries name the
// package to install). As root, the server runs as the `postgres` system user.
#pragma once

#include <sys/types.h>

#include <string>

namespace weft_pg_test {

struct private_server_options {
  // When this process is pinned to some cores (taskset), run the server on the others (all
  // cores when there are no others): a benchmark pinned to one core then measures its client,
  // not a server squeezed onto the client's core. Off: the server inherits this process's
  // affinity.
  bool server_on_other_cores = false;
};

class private_server {
 public:
  // Makes the data dir and starts the server.
  explicit private_server(private_server_options options = {});
  ~private_server();
  private_server(const private_server&) = delete;
  private_server& operator=(const private_server&) = delete;

  // user weft, trust authentication, database postgres, this instance's socket directory.
  const std::string& conninfo() const noexcept { return conninfo_; }
  bool running() const noexcept { return postmaster_ > 0; }
  // The end of the server's log, for failure messages.
  std::string log_tail() const;

  // Immediate shutdown (SIGQUIT to the postmaster, what `pg_ctl stop -m immediate` sends):
  // every session is cut at once, nothing is flushed. Returns when the postmaster has exited.
  // std::logic_error if it is not running.
  void stop();
  // Starts the server again (crash recovery first after an immediate stop); returns when it
  // accepts connections. std::logic_error if it is running.
  void start();

 private:
  void remove_directory() noexcept;

  private_server_options options_;
  std::string directory_;
  std::string conninfo_;
  pid_t postmaster_ = -1;
};

}  // namespace weft_pg_test
