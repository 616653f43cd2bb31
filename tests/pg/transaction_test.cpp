// weft::pg::transaction: commit, rollback, and the rollback on scope exit.
#include "weft/pg/transaction.hpp"

#include <chrono>
#include <stdexcept>
#include <string>

#include "pg/pg_server.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
namespace pg = weft::pg;

class PgTransaction : public weft_pg_test::pg_test {
 protected:
  static pg::connection open_with_table(const std::string& conninfo) {
    pg::connection conn = pg::connection::connect(conninfo, weft::timeout(10s));
    conn.execute_script("CREATE TEMP TABLE accounts (id int PRIMARY KEY, balance int)");
    conn.execute("INSERT INTO accounts VALUES (1, 100)");
    return conn;
  }
  static int balance(pg::connection& conn) {
    return conn.query("SELECT balance FROM accounts WHERE id = 1").value<int>();
  }
};

TEST_F(PgTransaction, CommitKeepsTheChanges) {
  run_clean([&] {
    pg::connection conn = open_with_table(conninfo_);
    {
      pg::transaction tx(conn);
      EXPECT_TRUE(conn.in_transaction());
      conn.execute("UPDATE accounts SET balance = balance - $1 WHERE id = 1", 30);
      tx.commit();
      EXPECT_FALSE(tx.active());
    }
    EXPECT_FALSE(conn.in_transaction());
    EXPECT_EQ(balance(conn), 70);
  });
}

TEST_F(PgTransaction, RollbackUndoesTheChanges) {
  run_clean([&] {
    pg::connection conn = open_with_table(conninfo_);
    pg::transaction tx(conn);
    conn.execute("UPDATE accounts SET balance = 0 WHERE id = 1");
    EXPECT_EQ(balance(conn), 0);
    tx.rollback();
    EXPECT_EQ(balance(conn), 100);
    EXPECT_THROW(tx.commit(), std::logic_error);
  });
}

TEST_F(PgTransaction, LeavingTheScopeWithoutCommitRollsBack) {
  run_clean([&] {
    pg::connection conn = open_with_table(conninfo_);
    {
      pg::transaction tx(conn);
      conn.execute("UPDATE accounts SET balance = 0 WHERE id = 1");
    }
    EXPECT_FALSE(conn.in_transaction());
    EXPECT_EQ(balance(conn), 100);
  });
}

TEST_F(PgTransaction, AnExceptionRollsBack) {
  run_clean([&] {
    pg::connection conn = open_with_table(conninfo_);
    try {
      pg::transaction tx(conn);
      conn.execute("UPDATE accounts SET balance = 0 WHERE id = 1");
      throw std::runtime_error("business rule violated");
    } catch (const std::runtime_error&) {
    }
    EXPECT_FALSE(conn.in_transaction());
    EXPECT_EQ(balance(conn), 100);
  });
}

TEST_F(PgTransaction, CancellingTheCoroutineRollsBack) {
  run_clean([&] {
    pg::connection conn = open_with_table(conninfo_);
    bool updated = false;
    auto worker = weft::spawn([&] {
      pg::transaction tx(conn);
      conn.execute("UPDATE accounts SET balance = 0 WHERE id = 1");
      updated = true;
      weft::sleep_for(1h);
      tx.commit();
    });
    weft_test::yield_until([&] { return updated; });
    worker.cancel("test");
    EXPECT_THROW(worker.await(), weft::cancelled_error);
    EXPECT_FALSE(conn.in_transaction());
    EXPECT_EQ(balance(conn), 100);
  });
}

TEST_F(PgTransaction, CommitOfAFailedTransactionThrowsAndSavesNothing) {
  run_clean([&] {
    pg::connection conn = open_with_table(conninfo_);
    pg::transaction tx(conn);
    conn.execute("UPDATE accounts SET balance = 0 WHERE id = 1");
    EXPECT_THROW(conn.query("SELECT 1/0"), pg::error);
    try {
      tx.commit();
      FAIL() << "commit of a failed transaction reported success";
    } catch (const pg::error& failure) {
      EXPECT_EQ(failure.sqlstate(), "25P02");
    }
    EXPECT_EQ(balance(conn), 100);
  });
}

TEST_F(PgTransaction, NestedTransactionIsALogicError) {
  run_clean([&] {
    pg::connection conn = open_with_table(conninfo_);
    pg::transaction outer(conn);
    EXPECT_THROW(pg::transaction inner(conn), std::logic_error);
    outer.commit();
  });
}

TEST_F(PgTransaction, BeginCommandPicksTheMode) {
  run_clean([&] {
    pg::connection conn = open_with_table(conninfo_);
    pg::transaction tx(conn, weft::timeout(5s), "BEGIN READ ONLY");
    EXPECT_EQ(conn.query("SHOW transaction_read_only").value<std::string>(), "on");
    try {
      conn.execute("CREATE TABLE forbidden (n int)");  // temp tables stay writable: not those
      FAIL() << "a read-only transaction wrote";
    } catch (const pg::error& failure) {
      EXPECT_EQ(failure.sqlstate(), "25006");
    }
  });
}

}  // namespace
