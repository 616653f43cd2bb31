// weft::pg::bytea: binary data goes to the server and comes back byte for byte (every value,
// NUL included, and the empty one), alone, pipelined behind other queries, and through a
// prepared statement. Text parameters with a NUL are refused: robustness_test.cpp.
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "pg/pg_server.hpp"
#include "test_support.hpp"
#include "weft/pg/connection.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
namespace pg = weft::pg;

class PgBytea : public weft_pg_test::pg_test {
 protected:
  pg::connection connect() const { return pg::connection::connect(conninfo_, weft::timeout(10s)); }
};

pg::bytea every_byte_value(int rotation = 0) {
  pg::bytea bytes;
  for (int value = 0; value < 256; ++value) {
    bytes.push_back(static_cast<std::byte>((value + rotation) % 256));
  }
  return bytes;
}

pg::bytea bytes_of(std::string_view text) {
  std::span<const std::byte> view = std::as_bytes(std::span(text.data(), text.size()));
  return pg::bytea(view.begin(), view.end());
}

// The values every test sends: all 256 byte values, NULs inside and at both ends, only NULs,
// and nothing at all.
std::vector<pg::bytea> samples() {
  return {every_byte_value(), bytes_of(std::string_view("abc\0def", 7)),
          bytes_of(std::string_view("\0\0x\0", 4)), pg::bytea(1000, std::byte{0}), pg::bytea{}};
}

TEST_F(PgBytea, EveryByteRoundTripsThroughALoneQuery) {
  run_clean([&] {
    pg::connection conn = connect();
    for (const pg::bytea& sample : samples()) {
      pg::result row = conn.query("SELECT $1::bytea, octet_length($1::bytea)", sample);
      EXPECT_EQ(row[0][0].as<pg::bytea>(), sample);
      EXPECT_EQ(row[0][1].as<std::size_t>(), sample.size()) << "the server got every byte";
      EXPECT_FALSE(row[0][0].is_null()) << "empty is not NULL";
    }
    // Stored and read back from a table, and bytes held in a std::string sent as a span.
    conn.execute_script("CREATE TEMP TABLE blobs (id int, data bytea)");
    std::string held("\0nul\0", 5);
    conn.execute("INSERT INTO blobs VALUES (1, $1)", std::as_bytes(std::span(held)));
    conn.execute("INSERT INTO blobs VALUES (2, $1)", every_byte_value(7));
    conn.execute("INSERT INTO blobs VALUES (3, $1)", std::optional<pg::bytea>());
    pg::result stored = conn.query("SELECT data FROM blobs ORDER BY id");
    ASSERT_EQ(stored.size(), 3u);
    EXPECT_EQ(stored[0][0].as<pg::bytea>(), bytes_of(held));
    EXPECT_EQ(stored[1][0].as<pg::bytea>(), every_byte_value(7));
    EXPECT_EQ(stored[2][0].as<std::optional<pg::bytea>>(), std::nullopt);
  });
}

TEST_F(PgBytea, EveryByteRoundTripsThroughAPreparedStatement) {
  run_clean([&] {
    pg::connection conn = connect();
    pg::statement echo = conn.prepare("SELECT $1::bytea, octet_length($1::bytea)");
    for (const pg::bytea& sample : samples()) {
      pg::result row = conn.query(echo, sample);
      EXPECT_EQ(row[0][0].as<pg::bytea>(), sample);
      EXPECT_EQ(row[0][1].as<std::size_t>(), sample.size());
    }
  });
}

// Pipelined: the first query waits on the server for an advisory lock that a second connection
// holds, so every bytea query is queued on the connection behind it, in flight at once.
TEST_F(PgBytea, EveryByteRoundTripsThroughPipelinedQueries) {
  run_clean([&] {
    const int key = static_cast<int>(::getpid());
    pg::connection holder = connect();
    holder.query("SELECT pg_advisory_lock($1)", key);
    pg::connection conn = connect();
    auto head = weft::spawn([&] { conn.query("SELECT pg_advisory_xact_lock($1)", key); });
    weft_test::yield_until([&] { return conn.in_flight() == 1; });

    std::vector<pg::bytea> sent = samples();
    for (int rotation = 1; rotation < 8; ++rotation) {
      sent.push_back(every_byte_value(rotation * 31));
    }
    std::vector<weft::task<pg::bytea>> queries;
    for (const pg::bytea& each : sent) {
      queries.push_back(weft::spawn([&conn, &each] {
        pg::result row = conn.query("SELECT $1::bytea, octet_length($1::bytea)", each);
        EXPECT_EQ(row[0][1].as<std::size_t>(), each.size());
        return row[0][0].as<pg::bytea>();
      }));
    }
    weft_test::yield_until([&] { return conn.in_flight() == sent.size() + 1; });
    EXPECT_TRUE(holder.query("SELECT pg_advisory_unlock($1)", key).value<bool>());
    head.await();
    for (std::size_t index = 0; index < sent.size(); ++index) {
      EXPECT_EQ(queries[index].await(), sent[index]) << "query " << index;
    }
    EXPECT_EQ(conn.in_flight(), 0u);
  });
}

}  // namespace
