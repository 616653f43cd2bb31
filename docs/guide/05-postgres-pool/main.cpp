// Guide, page 5: a pool of PostgreSQL connections: a transaction on a leased connection, a
// hundred coroutines sharing four connections, errors, and a query cut short by its timeout.
//
//   ./postgres-pool "host=/run/postgresql dbname=postgres"
#include <weft/weft.hpp>

#include <chrono>
#include <cstdio>
#include <numeric>
#include <string>
#include <vector>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  std::string conninfo = argc > 1 ? argv[1] : "host=/run/postgresql dbname=postgres";
  try {
    weft::run([&] {
      weft::pg::pool db({.conninfo = conninfo, .max = 4});

      // A lease: a connection of our own, back to the pool (session reset) when it goes out of
      // scope. Transactions and temp tables need one.
      {
        weft::lease<weft::pg::connection> conn = db.acquire(weft::timeout(5s));
        conn->query("CREATE TEMP TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)");
        conn->query("INSERT INTO accounts VALUES ($1, $2), ($3, $4)", 1, 100, 2, 50);
        {
          weft::pg::transaction transfer(*conn);  // BEGIN
          conn->query("UPDATE accounts SET balance = balance - $1 WHERE id = $2", 30, 1);
          conn->query("UPDATE accounts SET balance = balance + $1 WHERE id = $2", 30, 2);
          transfer.commit();  // without it, leaving the block rolls back
        }
        for (weft::pg::row account : conn->query("SELECT id, balance FROM accounts ORDER BY id")) {
          std::printf("account %d: balance %d\n", account[0].as<int>(),
                      account["balance"].as<int>());
        }
      }

      // pool.query: statements that leave no session state behind. A hundred coroutines share the
      // pool's four connections; their queries are pipelined.
      std::vector<int> numbers(100);
      std::iota(numbers.begin(), numbers.end(), 1);
      long total = 0;
      weft::iterate(
          numbers, [&](int n) { total += db.query("SELECT $1::int * 2", n).value<int>(); }, 100);
      auto opened = static_cast<std::size_t>(db.stats().created);  // at most max
      std::printf("100 coroutines shared %zu connections; the doubled numbers add up to %ld\n",
                  opened, total);

      // Server errors carry their SQLSTATE.
      try {
        db.query("SELECT 1 / 0");
      } catch (const weft::pg::error& error) {
        std::printf("the server said: %s (SQLSTATE %s)\n", error.primary_message().c_str(),
                    error.sqlstate().c_str());
      }

      // A query past its limit is cancelled on the server; the connection stays usable.
      try {
        db.query(weft::timeout(100ms), "SELECT pg_sleep(10)");
      } catch (const weft::timeout_error& error) {
        std::printf("pg_sleep(10) gave up: timeout\n");
      }
      std::printf("the pool still answers: %d\n", db.query("SELECT 42").value<int>());
      db.close();
    });
  } catch (const weft::error& error) {  // pg::error, timeout_error, io_error...
    std::fprintf(stderr, "postgres-pool: %s\n", error.what());
    return 1;
  }
  return 0;
}
