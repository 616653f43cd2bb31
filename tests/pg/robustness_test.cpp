// weft::pg at its edges: NUL bytes where libpq takes C strings (refused, never truncated), a
// connection string libpq cannot parse (named, password masked), and durations too long for
// the clock (they mean never; this file is also run under ASan+UBSan).
#include <unistd.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pg/pg_server.hpp"
#include "test_support.hpp"
#include "weft/pg/connection.hpp"
#include "weft/pg/pool.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
namespace pg = weft::pg;

class PgRobustness : public weft_pg_test::pg_test {
 protected:
  pg::connection connect() const { return pg::connection::connect(conninfo_, weft::timeout(10s)); }
};

const std::string with_nul("abc\0def", 7);

// Runs query and returns the pg::error it must throw ("" and a test failure if it does not).
template <class Query>
pg::error expect_nul_refused(Query&& query) {
  try {
    query();
    ADD_FAILURE() << "a text parameter with a NUL byte was accepted";
  } catch (const pg::error& failure) {
    return failure;
  }
  return pg::error("", "", "");
}

TEST_F(PgRobustness, ATextParameterWithANulIsRefusedNamingItsPositionAndNothingIsSent) {
  run_clean([&] {
    pg::connection conn = connect();
    pg::error failure =
        expect_nul_refused([&] { conn.query("SELECT $1::text, $2::text", "fine", with_nul); });
    std::string message = failure.what();
    EXPECT_EQ(failure.sqlstate(), "22021");
    EXPECT_NE(message.find("parameter $2 contains a NUL byte at offset 3"), std::string::npos)
        << message;
    EXPECT_NE(message.find("weft::pg::bytea"), std::string::npos) << message;
    EXPECT_NE(message.find("SELECT $1::text, $2::text"), std::string::npos) << message;
    EXPECT_EQ(failure.primary_message(),
              "parameter $2 contains a NUL byte at offset 3; text cannot hold NUL");
    EXPECT_EQ(conn.in_flight(), 0u);
    EXPECT_TRUE(conn.is_open());
    EXPECT_EQ(conn.query("SELECT $1::text", "after").value<std::string>(), "after");

    // Every way a string becomes a text parameter, and a prepared statement.
    std::optional<std::string> optional_text = std::string("\0", 1);
    EXPECT_EQ(expect_nul_refused([&] { conn.query("SELECT $1", optional_text); }).sqlstate(),
              "22021");
    EXPECT_EQ(
        expect_nul_refused([&] { conn.query("SELECT $1", std::string_view(with_nul)); }).sqlstate(),
        "22021");
    pg::statement echo = conn.prepare("SELECT $1::text");
    message = expect_nul_refused([&] { conn.query(echo, with_nul); }).what();
    EXPECT_NE(message.find("parameter $1 contains a NUL byte at offset 3"), std::string::npos)
        << message;
    EXPECT_EQ(conn.query(echo, "ok").value<std::string>(), "ok");
  });
}

// With a query in flight ahead of it (pipelined), the refused one disturbs nothing.
TEST_F(PgRobustness, ARefusedParameterLeavesThePipelineAlone) {
  run_clean([&] {
    const int key = static_cast<int>(::getpid());
    pg::connection holder = connect();
    holder.query("SELECT pg_advisory_lock($1)", key);
    pg::connection conn = connect();
    auto head = weft::spawn(
        [&] { return conn.query("SELECT 7 FROM pg_advisory_xact_lock($1)", key).value<int>(); });
    weft_test::yield_until([&] { return conn.in_flight() == 1; });
    expect_nul_refused([&] { conn.query("SELECT $1::text", with_nul); });
    EXPECT_EQ(conn.in_flight(), 1u) << "nothing was sent";
    EXPECT_TRUE(holder.query("SELECT pg_advisory_unlock($1)", key).value<bool>());
    EXPECT_EQ(head.await(), 7);
    EXPECT_EQ(conn.query("SELECT 8").value<int>(), 8);
  });
}

TEST_F(PgRobustness, ATextParameterWithANulIsRefusedByPoolQueryToo) {
  run_clean([&] {
    pg::pool_options options;
    options.conninfo = conninfo_;
    options.max = 1;
    pg::pool db(std::move(options));
    EXPECT_EQ(expect_nul_refused([&] { db.query("SELECT $1::text", with_nul); }).sqlstate(),
              "22021");
    EXPECT_EQ(db.query("SELECT 1").value<int>(), 1);
    EXPECT_EQ(db.stats().created, 1u) << "the connection was kept";
    db.close();
  });
}

TEST_F(PgRobustness, NulBytesInSqlTextStatementNamesAndConninfoAreRefused) {
  run_clean([&] {
    pg::connection conn = connect();
    auto expect_invalid = [](auto&& call, const std::string& wanted) {
      try {
        call();
        ADD_FAILURE() << "accepted: " << wanted;
      } catch (const std::invalid_argument& failure) {
        EXPECT_NE(std::string(failure.what()).find(wanted), std::string::npos) << failure.what();
      }
    };
    const std::string sql("SELECT 1\0 + 1", 13);
    expect_invalid([&] { conn.query(sql); }, "query: the SQL text contains a NUL byte at offset 8");
    expect_invalid([&] { conn.execute_script(sql); },
                   "execute_script: the SQL text contains a NUL byte at offset 8");
    expect_invalid([&] { conn.prepare(sql); },
                   "prepare: the SQL text contains a NUL byte at offset 8");
    expect_invalid([&] { conn.prepare("SELECT 1", std::string("name\0x", 6)); },
                   "prepare: the statement name contains a NUL byte at offset 4");
    expect_invalid([&] { pg::connection::connect(conninfo_ + std::string("\0 port=1", 8)); },
                   "connect: the connection string contains a NUL byte at offset " +
                       std::to_string(conninfo_.size()));
    EXPECT_EQ(conn.query("SELECT 2").value<int>(), 2) << "the session is untouched";
    EXPECT_EQ(conn.query("SELECT count(*) FROM pg_prepared_statements").value<int>(), 0);
  });
}

// Returns the message of the pg::error connect must throw for conninfo.
std::string connect_failure(const std::string& conninfo) {
  try {
    pg::connection::connect(conninfo, weft::timeout(10s));
    ADD_FAILURE() << "connect succeeded with " << conninfo;
  } catch (const pg::error& failure) {
    EXPECT_EQ(failure.sqlstate(), "08001");
    EXPECT_EQ(std::string(failure.primary_message()).find("sekrit"), std::string::npos);
    return failure.what();
  }
  return "";
}

TEST_F(PgRobustness, AnUnparsableConninfoIsNamedWithItsPasswordMaskedAndLibpqsReason) {
  run_clean([&] {
    std::string message = connect_failure("host=/tmp password=sekrit dbname");
    EXPECT_NE(message.find("\"host=/tmp password=*** dbname\""), std::string::npos) << message;
    EXPECT_NE(message.find("missing \"=\" after \"dbname\" in connection info string"),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find("@:/"), std::string::npos) << message;
    EXPECT_EQ(message.find("sekrit"), std::string::npos) << message;

    message = connect_failure("user=weft password = 'se\\'krit' bogus=1");
    EXPECT_NE(message.find("\"user=weft password = *** bogus=1\""), std::string::npos) << message;
    EXPECT_NE(message.find("invalid connection option \"bogus\""), std::string::npos) << message;
    EXPECT_EQ(message.find("krit"), std::string::npos) << message;

    // libpq quotes a URI in its reason: the password is masked there too.
    message = connect_failure("postgresql://weft:sekrit@[::1/postgres");
    EXPECT_NE(message.find("\"postgresql://weft:***@[::1/postgres\""), std::string::npos)
        << message;
    EXPECT_NE(message.find("IPv6 host address"), std::string::npos) << message;
    EXPECT_EQ(message.find("sekrit"), std::string::npos) << message;

    message = connect_failure("postgresql:///postgres?password=sekrit&nosuch=1");
    EXPECT_NE(message.find("?password=***&nosuch=1"), std::string::npos) << message;
    EXPECT_NE(message.find("invalid URI query parameter: \"nosuch\""), std::string::npos)
        << message;
    EXPECT_EQ(message.find("sekrit"), std::string::npos) << message;
  });
}

TEST_F(PgRobustness, HugeTimeLimitsMeanNever) {
  run_clean([&] {
    const weft::timeout longest(std::chrono::nanoseconds::max());
    const weft::timeout hours(std::chrono::hours::max());
    const weft::timeout at_the_end =
        weft::timeout::at(std::chrono::steady_clock::time_point::max());
    pg::connection conn = pg::connection::connect(conninfo_, hours);
    EXPECT_EQ(conn.query(longest, "SELECT 1").value<int>(), 1);
    EXPECT_EQ(conn.query(at_the_end, "SELECT 2").value<int>(), 2);
    // More than the socket holds: the send waits for writability in slices (flush_slice).
    std::string big(8 << 20, 'x');
    EXPECT_EQ(conn.query(longest, "SELECT length($1::text)", big).value<int>(), 8 << 20);
    EXPECT_EQ(conn.query(at_the_end, "SELECT length($1::text)", big).value<int>(), 8 << 20);
    pg::statement echo = conn.prepare("SELECT $1::int", "", hours);
    EXPECT_EQ(conn.query(hours, echo, 3).value<int>(), 3);
    EXPECT_EQ(conn.execute_script("SELECT 4", longest).value<int>(), 4);
  });
}

TEST_F(PgRobustness, APoolWithHugeDurationsWorksAndAWaitWithTheLongestLimitIsServed) {
  run_clean([&] {
    pg::pool_options options;
    options.conninfo = conninfo_;
    options.max = 1;
    options.min = 1;
    options.healthcheck_interval = std::chrono::hours::max();
    options.acquire_timeout = std::chrono::hours::max();
    options.connect_timeout = std::chrono::hours::max();
    options.reset_timeout = std::chrono::hours::max();
    options.validate_after_idle = std::chrono::hours::max();
    options.breaker_strategy =
        std::make_shared<weft::consecutive_failures>(1, std::chrono::hours::max());
    pg::pool db(std::move(options));
    weft_test::yield_until([&] { return db.stats().idle == 1; });
    EXPECT_EQ(db.query(weft::timeout(std::chrono::nanoseconds::max()), "SELECT 5").value<int>(), 5);

    weft::lease<pg::connection> held = db.acquire();
    auto waiting = weft::spawn([&] {
      weft::lease<pg::connection> conn = db.acquire(weft::timeout(std::chrono::nanoseconds::max()));
      return conn->query("SELECT 6").value<int>();
    });
    auto defaulted = weft::spawn([&] { return db.query("SELECT 7").value<int>(); });
    weft_test::yield_until([&] { return db.stats().waiters == 2; });
    held.release();  // reset (within reset_timeout = hours::max()), then handed on
    EXPECT_EQ(waiting.await(), 6);
    EXPECT_EQ(defaulted.await(), 7);
    weft::pool_stats stats = db.stats();
    EXPECT_EQ(stats.created, 1u);
    EXPECT_EQ(stats.timeouts, 0u);
    EXPECT_EQ(stats.validation_failures, 0u);
    EXPECT_EQ(db.breaker().state(), weft::circuit_state::closed);
    db.close();
  });
}

}  // namespace
