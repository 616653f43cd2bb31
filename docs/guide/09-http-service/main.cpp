// Guide, page 9: an HTTP service on weft::http: a router with path parameters, a request body
// read whole, a response streamed in chunks, a form upload read as it arrives, a cookie, shared
// state across workers, graceful stop on Ctrl-C.
//
//   ./http-service [port]    (default 8080; 0 picks a free port)
#include <weft/weft.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

using namespace std::chrono_literals;
namespace http = weft::http;

int main(int argc, char** argv) {
  auto port = static_cast<std::uint16_t>(argc > 1 ? std::atoi(argv[1]) : 8080);
  std::atomic<long> grand_total{0};  // the handlers run on several threads at once

  http::router routes;
  routes.get("/hello", [](http::exchange& ex) { ex.respond(http::status::ok, "hello\n"); });

  // ":id" matches one path segment; ex.param() gives it (still percent-encoded).
  routes.get("/users/:id", [](http::exchange& ex) {
    std::string id(ex.param("id"));
    ex.respond(http::status::ok, "{\"user\":\"" + id + "\"}\n", "application/json");
  });

  // The body, read whole: numbers separated by spaces. A body over the server's limit is
  // answered 413 by the server before this handler sees it.
  routes.post("/sum", [&grand_total](http::exchange& ex) {
    std::istringstream numbers(ex.read_body());
    long sum = 0;
    for (long n = 0; numbers >> n;) {
      sum += n;
    }
    grand_total += sum;
    ex.respond(http::status::ok, std::to_string(sum) + "\n");
  });

  // A response streamed as it is made: no Content-Length, so it goes out chunked, one chunk per
  // write. The sleep suspends this request's coroutine only; the others go on.
  routes.get("/count/:n", [](http::exchange& ex) {
    const int n = std::atoi(std::string(ex.param("n")).c_str());
    http::response head;
    head.headers.set("Content-Type", "text/plain");
    http::exchange::body_writer body = ex.start_response(std::move(head));
    for (int i = 1; i <= n; ++i) {
      body.write(std::to_string(i) + "\n");
      weft::sleep_for(10ms);
    }
    body.finish();
  });

  // A form upload (multipart/form-data, as a browser's form or curl -F sends it), read part by
  // part as it arrives: a file of any size passes through a small buffer, never whole in memory.
  routes.post("/upload", [](http::exchange& ex) {
    http::multipart_reader form(ex);  // 415 or 400 from the server if the body is not a form
    std::string report;
    while (std::optional<http::form_part> part = form.next_part()) {
      std::size_t bytes = 0;
      while (std::optional<std::string_view> piece = form.read()) {
        bytes += piece->size();
      }
      report += part->name + ": " + std::to_string(bytes) + " bytes";
      report += part->filename ? " from " + *part->filename + "\n" : "\n";
    }
    ex.respond(http::status::ok, report);
  });

  // A cookie: set on the first visit, read and counted up on the next ones.
  routes.get("/visit", [](http::exchange& ex) {
    std::optional<std::string_view> seen = http::cookie(ex.request().headers, "visits");
    const int visits = seen ? std::atoi(std::string(*seen).c_str()) + 1 : 1;
    http::response answer;
    answer.headers.set("Content-Type", "text/plain");
    http::add_cookie(answer, {.name = "visits",
                              .value = std::to_string(visits),
                              .path = "/",
                              .http_only = true,
                              .same_site = http::same_site::lax});
    answer.body = "visit " + std::to_string(visits) + "\n";
    ex.respond(std::move(answer));
  });

  http::server server({.host = "127.0.0.1",
                       .port = port,
                       .workers = 2,             // threads; 0 means one per core
                       .handle_signals = true},  // Ctrl-C stops gracefully
                      std::move(routes));
  server.listen();
  std::printf("http service listening on 127.0.0.1:%u\n", server.port());
  std::fflush(stdout);
  server.serve();  // returns once the server has stopped

  http::worker_stats total = server.stats().total;
  std::printf("stopped: %llu requests, %llu answered 4xx, sums added up to %ld\n",
              static_cast<unsigned long long>(total.requests),
              static_cast<unsigned long long>(total.responses_of_class(4)), grand_total.load());
  return 0;
}
