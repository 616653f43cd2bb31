// weft::tty over uv_tty_t.
#include "weft/io/tty.hpp"

#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <string>

#include "io/stream_state.hpp"

namespace weft {

tty tty::open(int fd) {
  uv_loop_t& loop = detail::current_uv_loop("weft::tty::open");
  detail::ignore_sigpipe_once();
  std::string subject = "tty fd " + std::to_string(fd);
  if (isatty(fd) == 0) {
    int code = uv_translate_sys_error(errno);
    throw io_error(code, "open", subject, uv_strerror(code));
  }
  detail::handle_owner<detail::stream_state> state(
      new detail::stream_state(detail::stream_kind::tty, subject));
  int status = uv_tty_init(&loop, &state->uv.tty, fd, 0);
  if (status < 0) {
    detail::throw_uv_error(status, "open", subject);
  }
  state->mark_initialized();
  return tty(state.release());
}

void tty::set_raw(bool raw) {
  detail::stream_state& state = this->state("set_raw");
  // libuv saves the terminal's settings the first time the mode leaves normal, and normal mode
  // puts them back: that is what close() relies on too.
  int status = uv_tty_set_mode(&state.uv.tty, raw ? UV_TTY_MODE_RAW : UV_TTY_MODE_NORMAL);
  if (status < 0) {
    detail::throw_uv_error(status, raw ? "set raw mode" : "restore mode", state.subject());
  }
  state.raw_mode = raw;
}

bool tty::raw() const noexcept { return state_ != nullptr && state_->raw_mode; }

tty::window_size tty::size() const {
  detail::stream_state& state = this->state("window size");
  window_size result;
  int status = uv_tty_get_winsize(&state.uv.tty, &result.columns, &result.rows);
  if (status < 0) {
    detail::throw_uv_error(status, "window size", state.subject());
  }
  return result;
}

}  // namespace weft
