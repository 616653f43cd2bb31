// weft::pg::connection: connecting, server errors, a lost session (pipelining: pipeline_test.cpp).
#include "weft/pg/connection.hpp"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <chrono>

#include <cstdio>
#include <filesystem>
#include <string>

#include "pg/pg_server.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
namespace pg = weft::pg;

class PgConnection : public weft_pg_test::pg_test {};

// A unix socket that accepts connections (the kernel's backlog does) but never answers them: a
// server that hangs. In a private directory, since the real server's is shared by parallel test
// processes; plain POSIX, so the test's own event loop holds no extra fd for it.
struct silent_server {
  std::string directory;
  int fd = -1;
  silent_server() {
    char pattern[] = "/tmp/weft-pg-silent-XXXXXX";
    EXPECT_NE(::mkdtemp(pattern), nullptr);
    directory = pattern;
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::string path = directory + "/.s.PGSQL.9";
    path.copy(address.sun_path, sizeof(address.sun_path) - 1);
    EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    EXPECT_EQ(::listen(fd, 8), 0);
  }
  ~silent_server() {
    ::close(fd);
    std::filesystem::remove_all(directory);
  }
  std::string conninfo() const { return "host=" + directory + " port=9 user=weft dbname=postgres"; }
};

TEST_F(PgConnection, ConnectsWithAConninfoString) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    EXPECT_TRUE(conn.is_open());
    EXPECT_GE(conn.server_version(), 150000);
    EXPECT_EQ(conn.query("SELECT current_user").value<std::string>(), "weft");
  });
}

TEST_F(PgConnection, ConnectsWithAUrl) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(weft_pg_test::url(), weft::timeout(10s));
    EXPECT_EQ(conn.query("SELECT current_database()").value<std::string>(), "postgres");
  });
}

TEST_F(PgConnection, ConnectFailureSaysWhereAndWhyWithoutThePassword) {
  run_clean([&] {
    std::string nowhere = "host=" + weft_pg_test::socket_directory() +
                          " port=1 user=weft password=sekrit dbname=postgres";
    try {
      pg::connection::connect(nowhere, weft::timeout(10s));
      FAIL() << "connect to a port nobody listens on succeeded";
    } catch (const pg::error& failure) {
      std::string message = failure.what();
      EXPECT_EQ(failure.sqlstate(), "08001");
      EXPECT_NE(message.find("connect to weft@"), std::string::npos) << message;
      EXPECT_NE(message.find(":1/postgres"), std::string::npos) << message;
      EXPECT_NE(message.find("No such file or directory"), std::string::npos) << message;
      EXPECT_EQ(message.find("sekrit"), std::string::npos) << message;
    }
  });
}

TEST_F(PgConnection, ServerErrorCarriesSqlstateAndMessage) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    try {
      conn.query("SELECT * FROM no_such_table");
      FAIL() << "a query on a missing table succeeded";
    } catch (const pg::error& failure) {
      EXPECT_EQ(failure.sqlstate(), "42P01");
      EXPECT_EQ(failure.primary_message(), "relation \"no_such_table\" does not exist");
      EXPECT_NE(std::string(failure.what()).find("SELECT * FROM no_such_table"), std::string::npos);
    }
    EXPECT_EQ(conn.query("SELECT 7").value<int>(), 7) << "the session survives a server error";
  });
}

TEST_F(PgConnection, ServerErrorCarriesDetailAndHint) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    try {
      conn.execute_script(
          "DO $$ BEGIN RAISE EXCEPTION 'custom failure' USING ERRCODE = '22012', "
          "DETAIL = 'the detail', HINT = 'the hint'; END $$");
      FAIL() << "RAISE EXCEPTION did not fail";
    } catch (const pg::error& failure) {
      EXPECT_EQ(failure.sqlstate(), "22012");
      EXPECT_EQ(failure.primary_message(), "custom failure");
      EXPECT_EQ(failure.detail(), "the detail");
      EXPECT_EQ(failure.hint(), "the hint");
    }
  });
}

TEST_F(PgConnection, KilledBackendMakesTheNextUseFailAndTheConnectionStaysClosed) {
  run_clean([&] {
    pg::connection victim = pg::connection::connect(conninfo_, weft::timeout(10s));
    pg::connection killer = pg::connection::connect(conninfo_, weft::timeout(10s));
    // The two-argument form waits (up to 5 s) until the backend has exited.
    EXPECT_TRUE(
        killer.query("SELECT pg_terminate_backend($1, 5000)", victim.backend_pid()).value<bool>());
    try {
      victim.query("SELECT 1");
      FAIL() << "a query on a terminated backend succeeded";
    } catch (const pg::error& failure) {
      EXPECT_TRUE(failure.sqlstate() == "57P01" || failure.sqlstate() == "08006")
          << failure.sqlstate() << ": " << failure.what();
    }
    EXPECT_FALSE(victim.is_open());
    try {
      victim.query("SELECT 1");
      FAIL() << "a closed connection ran a query";
    } catch (const pg::error& failure) {
      EXPECT_EQ(failure.sqlstate(), "08003");
      EXPECT_NE(std::string(failure.what()).find("connection is closed"), std::string::npos)
          << failure.what();
    }
  });
}

TEST_F(PgConnection, CallsOutsideACoroutineAreLogicErrors) {
  EXPECT_THROW(pg::connection::connect(conninfo_), std::logic_error);
  pg::connection empty;
  EXPECT_FALSE(empty.is_open());
  run_clean([&] { EXPECT_THROW(empty.query("SELECT 1"), std::logic_error); });
}

TEST_F(PgConnection, ConnectTimeoutLeavesNothingOpen) {
  run_clean([&] {
    silent_server silent;
    std::size_t fds_before = weft_pg_test::open_fd_count();
    try {
      pg::connection::connect(silent.conninfo(), weft::timeout(20ms));
      FAIL() << "connect to a server that never answers succeeded";
    } catch (const weft::timeout_error& failure) {
      EXPECT_NE(std::string(failure.what()).find("connect to weft@"), std::string::npos)
          << failure.what();
    }
    EXPECT_EQ(weft_pg_test::open_fd_count(), fds_before);
  });
}

TEST_F(PgConnection, CancelledConnectLeavesNothingOpen) {
  run_clean([&] {
    silent_server silent;
    std::size_t fds_before = weft_pg_test::open_fd_count();
    bool started = false;
    auto connecting = weft::spawn([&] {
      started = true;
      pg::connection::connect(silent.conninfo());
    });
    weft_test::yield_until([&] { return started; });
    weft::yield();
    connecting.cancel("test");
    EXPECT_THROW(connecting.await(), weft::cancelled_error);
    EXPECT_EQ(weft_pg_test::open_fd_count(), fds_before);
  });
}

}  // namespace
