// weft-httpd's PostgreSQL routes (with --pg): each request runs its own query through this
// worker's weft::pg::pool; a database that fails answers 503 with the SQLSTATE, never a hang.
#include <charconv>
#include <string>

#include "site.hpp"
#include "weft/error.hpp"
#include "weft/pg/error.hpp"

namespace weft_httpd {

namespace http = weft::http;

namespace {

constexpr auto query_limit = std::chrono::milliseconds(5000);

void respond_json(http::exchange& ex, http::status status, std::string body) {
  http::response r;
  r.status = status;
  r.headers.set("Content-Type", "application/json");
  r.headers.set("Cache-Control", "no-store");
  r.body = std::move(body);
  ex.respond(std::move(r));
}

// Runs query(db) and answers its JSON, or 503 naming what failed: the server's SQLSTATE for a
// PostgreSQL error, "08006"-style codes for a lost connection, and none for a pool that could
// not hand out a connection in time.
template <class Query>
void with_database(http::exchange& ex, Query query) {
  weft::pg::pool& db = *local().db;
  try {
    respond_json(ex, http::status::ok, query(db));
  } catch (const weft::pg::error& failure) {
    respond_json(ex, http::status::service_unavailable,
                 "{\"error\":" + json_string(failure.what()) +
                     ",\"sqlstate\":" + json_string(failure.sqlstate()) + "}\n");
  } catch (const weft::timeout_error& failure) {
    respond_json(ex, http::status::service_unavailable,
                 "{\"error\":" + json_string(failure.what()) + ",\"sqlstate\":null}\n");
  } catch (const weft::service_unavailable_error& failure) {
    respond_json(ex, http::status::service_unavailable,
                 "{\"error\":" + json_string(failure.what()) + ",\"sqlstate\":null}\n");
  }
}

}  // namespace

void site::pg_now(http::exchange& ex) {
  with_database(ex, [](weft::pg::pool& db) {
    weft::pg::result now = db.query(weft::timeout(query_limit), "SELECT now()::text");
    return "{\"now\":" + json_string(now[0].get<std::string_view>(0)) + "}\n";
  });
}

void site::pg_query(http::exchange& ex) {
  std::optional<std::string> text = ex.request().query("n");
  long n = 1;
  if (text) {
    auto [end, failure] = std::from_chars(text->data(), text->data() + text->size(), n);
    if (failure != std::errc() || end != text->data() + text->size() || n < 1 || n > 500) {
      ex.respond(http::status::bad_request,
                 "query parameter n=" + *text + " is not an integer from 1 to 500\n");
      return;
    }
  }
  with_database(ex, [n](weft::pg::pool& db) {
    weft::pg::result rows =
        db.query(weft::timeout(query_limit),
                 "SELECT i, md5(i::text) FROM generate_series(1, $1::int) AS i", n);
    std::string json = "{\"rows\":[";
    bool first = true;
    for (weft::pg::row row : rows) {
      json += first ? "" : ",";
      first = false;
      json += "{\"i\":" + std::to_string(row.get<long>(0)) +
              ",\"md5\":" + json_string(row.get<std::string_view>(1)) + "}";
    }
    json += "]}\n";
    return json;
  });
}

}  // namespace weft_httpd
