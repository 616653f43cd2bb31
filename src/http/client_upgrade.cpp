// The upgraded_connection that client::upgrade hands over (client.hpp has the contract).
#include <cerrno>
#include <string>
#include <utility>

#include "http/client_call.hpp"
#include "http/client_connection.hpp"
#include "weft/error.hpp"

namespace weft::http {

upgraded_connection::upgraded_connection(detail::client_connection&& connection, std::string url)
    : connection_(std::make_unique<detail::client_connection>(std::move(connection))),
      url_(std::move(url)) {}

upgraded_connection::~upgraded_connection() { close(); }

bool upgraded_connection::is_open() const noexcept { return connection_->connected(); }

std::optional<std::string_view> upgraded_connection::read(const timeout& limit) {
  detail::client_connection& c = *connection_;
  c.consume(std::exchange(handed_, 0));
  if (!c.connected()) {
    return std::nullopt;
  }
  if (c.input().empty() && c.fill(limit, url_) == 0) {
    return std::nullopt;
  }
  handed_ = c.input().size();
  return c.input();
}

void upgraded_connection::write(std::string_view bytes, const timeout& limit) {
  detail::client_connection& c = *connection_;
  if (!c.connected()) {
    throw io_error(-EBADF, "send", url_, "the upgraded connection is closed");
  }
  if (write_shut_) {
    throw io_error(-EPIPE, "send", url_, "the upgraded connection's sending side was shut down");
  }
  c.write_all(bytes, limit, url_);
}

void upgraded_connection::shutdown_write(const timeout& limit) {
  if (write_shut_ || !connection_->connected()) {
    return;
  }
  write_shut_ = true;
  connection_->shutdown_write(limit, url_);
}

void upgraded_connection::close() noexcept {
  handed_ = 0;
  connection_->close();
}

}  // namespace weft::http
