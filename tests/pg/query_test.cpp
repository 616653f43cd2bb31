// weft::pg queries: typed parameters, typed rows, NULL, prepared statements, affected rows.
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "pg/pg_server.hpp"
#include "test_support.hpp"
#include "weft/pg/connection.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
namespace pg = weft::pg;

class PgQuery : public weft_pg_test::pg_test {};

TEST_F(PgQuery, TypedParametersComeBackAsTypedValues) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    std::int64_t big = std::numeric_limits<std::int64_t>::max();
    std::string text = "it's \"quoted\" \\ and ünïcode";
    pg::result rows =
        conn.query("SELECT $1::int4 + 1, $2::int8, $3::float8, $4::bool, $5::text, $6::text", 41,
                   big, 2.5, true, text, std::string_view("view"));
    ASSERT_EQ(rows.size(), 1u);
    pg::row row = rows[0];
    EXPECT_EQ(row[0].as<int>(), 42);
    EXPECT_EQ(row[1].as<std::int64_t>(), big);
    EXPECT_DOUBLE_EQ(row[2].as<double>(), 2.5);
    EXPECT_TRUE(row[3].as<bool>());
    EXPECT_EQ(row[4].as<std::string>(), text);
    EXPECT_EQ(row[5].as<std::string_view>(), "view");
  });
}

TEST_F(PgQuery, ParametersInferTheirTypeFromTheStatement) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    // Untyped: the server infers int for the addition, date for the comparison.
    EXPECT_EQ(conn.query("SELECT $1 + 1", 1).value<int>(), 2);
    EXPECT_TRUE(conn.query("SELECT $1::date < $2", "2020-01-01", "2021-06-30").value<bool>());
    EXPECT_EQ(conn.query("SELECT $1 * 2", 1.25).value<double>(), 2.5);
    EXPECT_EQ(conn.query("SELECT $1", static_cast<std::uint64_t>(18446744073709551615ull))
                  .value<std::uint64_t>(),
              18446744073709551615ull);
  });
}

TEST_F(PgQuery, SpecialFloatingValuesRoundTrip) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    pg::result values = conn.query("SELECT $1::float8, $2::float8, $3::float8, $4::float8",
                                   std::numeric_limits<double>::infinity(),
                                   -std::numeric_limits<double>::infinity(),
                                   std::numeric_limits<double>::quiet_NaN(), 0.1);
    pg::row row = values[0];
    EXPECT_EQ(row[0].as<double>(), std::numeric_limits<double>::infinity());
    EXPECT_EQ(row[1].as<double>(), -std::numeric_limits<double>::infinity());
    EXPECT_TRUE(std::isnan(row[2].as<double>()));
    EXPECT_EQ(row[3].as<double>(), 0.1) << "no precision lost either way";
  });
}

TEST_F(PgQuery, NullParametersAndNullColumns) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    std::optional<int> none;
    std::optional<int> some = 5;
    pg::result values = conn.query("SELECT $1::int, $2::int, $3::text, NULL::int", none, some,
                                   std::optional<std::string>());
    pg::row row = values[0];
    EXPECT_TRUE(row[0].is_null());
    EXPECT_EQ(row[0].as<std::optional<int>>(), std::nullopt);
    EXPECT_EQ(row[1].as<std::optional<int>>(), 5);
    EXPECT_EQ(row[2].as<std::optional<std::string>>(), std::nullopt);
    try {
      row[3].as<int>();
      FAIL() << "NULL read as int";
    } catch (const pg::conversion_error& failure) {
      EXPECT_NE(std::string(failure.what()).find("is NULL"), std::string::npos);
    }
    EXPECT_TRUE(conn.query("SELECT $1::int IS NULL", nullptr).value<bool>());
  });
}

TEST_F(PgQuery, RowsByIndexAndByColumnName) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    pg::result rows = conn.query(
        "SELECT n AS number, 'row ' || n AS label FROM generate_series(1, $1) AS n ORDER BY n", 3);
    ASSERT_EQ(rows.size(), 3u);
    ASSERT_EQ(rows.columns(), 2u);
    EXPECT_EQ(rows.column_name(1), "label");
    EXPECT_EQ(rows.column_index("label"), 1u);
    EXPECT_EQ(rows.column_type(0), pg::type_oid::int4);
    std::vector<std::string> labels;
    int sum = 0;
    for (pg::row row : rows) {
      sum += row["number"].as<int>();
      labels.push_back(row.get<std::string>("label"));
    }
    EXPECT_EQ(sum, 6);
    EXPECT_EQ(labels, (std::vector<std::string>{"row 1", "row 2", "row 3"}));
    EXPECT_EQ(rows.command_tag(), "SELECT 3");
    EXPECT_THROW(rows[0]["nope"], std::out_of_range);
    EXPECT_THROW(rows[0][2], std::out_of_range);
    EXPECT_THROW(rows[3], std::out_of_range);
  });
}

TEST_F(PgQuery, ValuesThatDoNotFitAreConversionErrors) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    pg::result values = conn.query("SELECT 300, 'abc', -1");
    pg::row row = values[0];
    EXPECT_EQ(row[0].as<std::int16_t>(), 300);
    EXPECT_THROW(row[0].as<std::int8_t>(), pg::conversion_error);
    EXPECT_THROW(row[1].as<int>(), pg::conversion_error);
    EXPECT_THROW(row[1].as<bool>(), pg::conversion_error);
    EXPECT_THROW(row[2].as<unsigned>(), pg::conversion_error);
  });
}

TEST_F(PgQuery, ByteaRoundTripsEveryByte) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    std::vector<std::byte> bytes;
    for (int value = 0; value < 256; ++value) {
      bytes.push_back(static_cast<std::byte>(value));
    }
    pg::result values = conn.query("SELECT $1::bytea, length($1::bytea)", bytes);
    pg::row row = values[0];
    EXPECT_EQ(row[0].as<std::vector<std::byte>>(), bytes);
    EXPECT_EQ(row[1].as<int>(), 256);
  });
}

TEST_F(PgQuery, ParameterLargerThanTheSocketBufferIsSentWhole) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    std::string big(8 << 20, 'x');  // far more than a socket buffer: PQflush must be waited on
    big.back() = 'y';
    pg::result values = conn.query("SELECT length($1::text), right($1::text, 2)", big);
    EXPECT_EQ(values[0][0].as<int>(), 8 << 20);
    EXPECT_EQ(values[0][1].as<std::string>(), "xy");
  });
}

TEST_F(PgQuery, AffectedRowsOfInsertUpdateDelete) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    conn.execute_script("CREATE TEMP TABLE items (id int PRIMARY KEY, name text)");
    EXPECT_EQ(conn.execute("INSERT INTO items VALUES ($1, $2), ($3, $4)", 1, "a", 2, "b"), 2u);
    EXPECT_EQ(conn.execute("UPDATE items SET name = upper(name) WHERE id > $1", 0), 2u);
    EXPECT_EQ(conn.execute("DELETE FROM items WHERE id = $1", 1), 1u);
    EXPECT_EQ(conn.query("SELECT name FROM items").value<std::string>(), "B");
    try {
      conn.execute("INSERT INTO items VALUES ($1, $2)", 2, "again");
      FAIL() << "duplicate key accepted";
    } catch (const pg::error& failure) {
      EXPECT_EQ(failure.sqlstate(), "23505");
      EXPECT_EQ(failure.detail(), "Key (id)=(2) already exists.");
    }
  });
}

TEST_F(PgQuery, PreparedStatementsRunManyTimes) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    pg::statement square = conn.prepare("SELECT $1::int * $1::int");
    EXPECT_FALSE(square.name().empty());
    for (int value = 1; value <= 5; ++value) {
      EXPECT_EQ(conn.query(square, value).value<int>(), value * value);
    }
    pg::statement named = conn.prepare("SELECT $1::text || '!'", "shout");
    EXPECT_EQ(named.name(), "shout");
    EXPECT_EQ(conn.query(weft::timeout(5s), named, "hi").value<std::string>(), "hi!");
    EXPECT_THROW(conn.prepare("SELECT 1", "shout"), pg::error) << "the name is taken";
    EXPECT_EQ(conn.query("SELECT count(*) FROM pg_prepared_statements").value<int>(), 2);
  });
}

TEST_F(PgQuery, PreparedStatementOfAnotherConnectionIsALogicError) {
  run_clean([&] {
    pg::connection first = pg::connection::connect(conninfo_, weft::timeout(10s));
    pg::connection second = pg::connection::connect(conninfo_, weft::timeout(10s));
    pg::statement statement = first.prepare("SELECT 1");
    EXPECT_THROW(second.query(statement), std::logic_error);
    EXPECT_THROW(first.query(pg::statement()), std::logic_error);
  });
}

TEST_F(PgQuery, ScriptRunsSeveralStatementsAndStopsAtTheFirstError) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    pg::result last = conn.execute_script(
        "CREATE TEMP TABLE t (n int); INSERT INTO t VALUES (1), (2); SELECT sum(n) FROM t");
    EXPECT_EQ(last.value<int>(), 3);
    EXPECT_THROW(
        conn.execute_script("INSERT INTO t VALUES (3); SELECT 1/0; INSERT INTO t VALUES (4)"),
        pg::error);
    // A script is one implicit transaction: the failed one left nothing behind.
    EXPECT_EQ(conn.query("SELECT count(*) FROM t").value<int>(), 2);
  });
}

TEST_F(PgQuery, NoticesReachTheHandler) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    std::vector<std::string> notices;
    conn.set_notice_handler([&](std::string_view notice) { notices.emplace_back(notice); });
    conn.execute_script("DO $$ BEGIN RAISE NOTICE 'hello %', 42; END $$");
    ASSERT_EQ(notices.size(), 1u);
    EXPECT_NE(notices[0].find("hello 42"), std::string::npos) << notices[0];
  });
}

}  // namespace
