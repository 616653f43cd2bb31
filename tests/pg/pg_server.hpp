// A real PostgreSQL 15 server for the weft::pg tests.
//
// Started lazily by the first test that asks for it (other tests of the binary never pay for
// it), on a unix socket in /tmp/weft-pg-15-<version>-uid<uid>/ (listen_addresses='', so no TCP
// port is taken). ctest runs every suite in a process of its own, so the server is shared between
// processes: the first one initdb's the data dir (once per machine) and starts the server under
// an flock; every user holds a shared flock while it runs, and the last one to leave stops the
// server (if that process crashed, the server stays up and the next run reuses it). Tests must
// therefore keep to their own session: TEMP tables, their own backend pid. As root, the server
// runs as the `postgres` system user (PostgreSQL refuses root). Missing server binaries are a
// test failure naming the package to install, never a silent skip.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <string>

namespace weft_pg_test {

// Starts the server if needed; throws std::runtime_error saying what went wrong.
// The conninfo of the running server (user weft, trust authentication, database postgres).
const std::string& conninfo();
// The same as a postgresql:// URL (the socket directory percent-encoded as host).
std::string url();
// The server's socket directory (shared: make private sockets elsewhere).
const std::string& socket_directory();

// The number of fds the test process has open (to check that nothing leaked).
std::size_t open_fd_count();

// Base fixture: fails the test (with the reason) when the server cannot be started.
class pg_test : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      conninfo_ = conninfo();
    } catch (const std::exception& failure) {
      FAIL() << failure.what();
    }
  }
  std::string conninfo_;
};

}  // namespace weft_pg_test
