// connection::hibernate: an idle connection without a coroutine (see connection.hpp).
//
// Hibernating, the connection is watched by a callback subscription of its fd and, when its wait is
// bounded, a lazy timer (hibernation.hpp); it holds a reference to itself, and reader_waiting_
// stays set, so that no close releases the socket under the subscription. Anything that would wake
// a waiting reader wakes it instead: the fd's readiness (or the driver giving up on it), the
// deadline, interrupt_reader() (close, destroy, the server's stop). Waking spawns the coroutine
// that calls the handler again (resume_hibernated, src/net/workers.cpp); that coroutine leaves the
// hibernation first (its subscription goes dormant, it drops the self-reference) and only then
// may the socket be released (which unsubscribes). The subscription's callback runs inside the
// driver's poll, where subscribing and switching are not allowed: it only spawns, which queues the
// coroutine.
#include <chrono>
#include <stdexcept>
#include <string>

#include "net/hibernation.hpp"
#include "net/tls_session.hpp"
#include "net/worker_state.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/net/connection.hpp"
#include "weft/sched/scheduler.hpp"

namespace weft::net {

namespace {
using steady = std::chrono::steady_clock;

// Spawns the coroutine that calls the handler again, once per hibernation. Reads only the
// hibernation's first cache line (hibernation.hpp).
[[gnu::hot]] void wake(detail::hibernation& h) noexcept {
  if (!h.hibernating || h.waking) {
    return;
  }
  h.waking = true;
  h.repeats = 0;
  try {
    detail::resume_hibernated(*h.worker, *h.self);
  } catch (const std::exception& failure) {
    // Out of memory for a coroutine: the fd stays watched (level-triggered) and the next poll
    // (or the next interrupt) tries again.
    h.waking = false;
    detail::connection_access::log(
        *h.self,
        std::string("could not start the coroutine that resumes the hibernating connection: ") +
            failure.what());
  }
}

// The socket stays readable until the coroutine a wake spawned has run and read, so a poll
// before then (a due poll in a long batch; libuv's own second look, which calls epoll_wait again
// within one turn, up to 48 times, whenever a call fills its 1024 events) reports it again for
// nothing. The first max_woken_repeats of them are let through, as the fd registry lets a woken
// waiter's through (fd_subscription.hpp: why that many); then the subscription goes dormant, and
// the registry drops the interest at the next report.
// Measured at 2000 connections on one worker (bench_net_weft echo, callback style): dormant at
// once, 0.44 epoll_ctl per message from due polls coming in long batches; with libuv's 48 looks
// and no cap at all (before the uv driver's spill set), about 195 reports per message.
void on_hibernation_ready(weft::detail::fd_subscription& subscription, int /*events*/) {
  auto& h = static_cast<detail::hibernation&>(subscription);
  if (h.waking) {
    if (++h.repeats >= weft::detail::max_woken_repeats) {
      h.events = 0;
    }
    return;
  }
  wake(h);
}

void on_hibernation_deadline(weft::detail::timer_entry& fired) {
  auto& timer = static_cast<detail::hibernation::deadline_timer&>(fired);
  detail::hibernation& h = *timer.owner_state;
  if (!h.hibernating || h.waking || h.until == steady::time_point::max()) {
    return;  // the wait it was queued for is over: out of the heap until a hibernation needs it
  }
  if (steady::now() >= h.until) {
    wake(h);
    return;
  }
  timer.deadline = h.until;  // queued for an earlier hibernation: on to this one's deadline
  h.core->driver().add_timer(timer);
}
}  // namespace

[[gnu::hot]] void connection::hibernate(const timeout& limit, std::uint64_t carry) {
  auto refuse = [&](const char* why) {
    throw std::logic_error("weft::net::connection::hibernate: connection " + std::to_string(id_) +
                           " (" + peer_address_ + ") " + why);
  };
  if (weft::detail::cancel_token_of(limit) != nullptr) {
    throw std::invalid_argument(
        "weft::net::connection::hibernate: the limit carries a cancel token, which nothing would "
        "watch while the connection is hibernating");
  }
  if (worker_ == nullptr || worker_->server == nullptr || serving_ == nullptr ||
      weft::detail::running_coroutine(*scheduler_) != serving_) {
    refuse(
        "is not being served by this coroutine as a tcp_server handler; only the server's "
        "handler can hibernate its connection");
  }
  if (reader_active_) {
    refuse("is being received from; hibernate between reads");
  }
  if (buffered() > 0) {
    refuse(("has " + std::to_string(buffered()) +
            " bytes of input not consumed; hibernate only with nothing buffered")
               .c_str());
  }
  if (paused_) {
    refuse("has receiving paused (pause_recv); resume it before hibernating");
  }
  hibernate_requested_ = true;
  carried_ = carry;
  hibernate_cap_ = limit.bounded();
  hibernate_until_ = limit.bounded() ? limit.deadline() : steady::time_point::max();
}

[[gnu::hot]] bool connection::enter_hibernation(std::shared_ptr<connection>& self) {
  if (state_ != state::open || stopping_ || paused_ || buffered() > 0 || reader_active_ ||
      finished_ || peer_ended_ || (tls_ != nullptr && tls_->buffered())) {
    return false;  // (TLS bytes already received: the handler goes on, reading them first)
  }
  weft::detail::scheduler_core* core = weft::detail::current_core();
  if (hibernation_ == nullptr) {
    auto made = std::make_unique<detail::hibernation>();
    made->worker = worker_;
    made->core = core;
    made->fd = fd_;
    made->events = weft::detail::fd_subscription::readable;
    made->ready = &on_hibernation_ready;
    made->timer.owner_state = made.get();
    made->timer.fire = &on_hibernation_deadline;
    made->timer.background = true;  // the subscription keeps the loop alive while hibernating
    hibernation_ = std::move(made);
  }
  detail::hibernation& h = *hibernation_;
  h.events = weft::detail::fd_subscription::readable;
  if (weft::detail::subscribe_fd(*core, h) < 0) {
    h.events = 0;  // dormant again where it stayed subscribed (a change refused)
    return false;
  }
  release_idle_input();
  steady::time_point until = timeouts_deadline();
  if (hibernate_cap_ && hibernate_until_ < until) {
    until = hibernate_until_;
  }
  h.until = until;
  if (until != steady::time_point::max()) {
    auto& timer = h.timer;
    if (timer.queued() && timer.deadline > until) {
      core->driver().remove_timer(timer);
    }
    if (!timer.queued()) {
      timer.deadline = until;
      core->driver().add_timer(timer);
    }
  }
  h.hibernating = true;
  h.waking = false;
  h.self = std::move(self);
  reader_waiting_ = true;  // no release under the subscription (try_release)
  reader_ = nullptr;
  serving_ = nullptr;
  return true;
}

[[gnu::hot]] std::shared_ptr<connection> connection::leave_hibernation() noexcept {
  detail::hibernation& h = *hibernation_;
  // Dormant, not unsubscribed: the registry stops reporting to it at once, and the next
  // hibernation only re-arms it (an unsubscribe and a subscribe per request cost ~250
  // instructions and two cold writes of the fd's entry at 1000 connections). The fd's read
  // interest stays with the driver until it fires with nobody to take it (the registry drops
  // it then); the release unsubscribes.
  h.events = 0;
  h.hibernating = false;
  h.waking = false;
  reader_waiting_ = false;
  read_first_ = true;  // woken by input (or to find its end): read before waiting
  std::shared_ptr<connection> self = std::move(h.self);
  try_release();  // closed while hibernating: the socket goes now that nothing watches it
  return self;
}

[[gnu::hot]] void connection::hibernation_ready() noexcept {
  if (hibernation_ != nullptr) {
    wake(*hibernation_);
  }
}

void connection::drop_hibernation() noexcept {
  // Only on the connection's thread while its scheduler runs (the release does it there; a
  // connection is released before its worker's scheduler ends).
  if (hibernation_ == nullptr || hibernation_->core != weft::detail::current_core()) {
    return;
  }
  if (hibernation_->timer.queued()) {
    hibernation_->core->driver().remove_timer(hibernation_->timer);
  }
  weft::detail::unsubscribe_fd(*hibernation_->core, *hibernation_);
}

}  // namespace weft::net
