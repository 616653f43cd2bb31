// Pipelined queries on a weft::pg connection (see session.hpp and state's comment on
// pipelining): each query is sent with its own Sync; one coroutine at a time reads the socket
// and hands every caller its answer; an interrupted query is cancelled when alone in flight and
// abandoned otherwise.
#include <libpq-fe.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#include "pg/session.hpp"
#include "weft/error.hpp"
#include "weft/reactor/fd.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace weft::pg::detail {

void describe_answers(const void* owner, std::string& out) {
  const auto& session = *static_cast<const state*>(owner);
  out += "the answer of a query on PostgreSQL connection " + session.target + " (" +
         std::to_string(session.pending.size()) + " queries in flight)";
}

void describe_gate(const void* owner, std::string& out) {
  const auto& session = *static_cast<const state*>(owner);
  out += "PostgreSQL connection " + session.target +
         " (an interrupted query is being cancelled on the server)";
}

namespace {

// queued_waiter outcomes for a parked query.
constexpr std::uint8_t outcome_answered = 0;  // its answer is filled in
constexpr std::uint8_t outcome_read = 1;      // the reading is handed to it

// The oldest unanswered query is complete: hand it what was gathered (and wake its coroutine
// if parked). An answer nobody waits for any more (abandoned) is dropped.
void deliver(state& session, bool lost) {
  answer* target = session.pending.front();
  session.pending.pop_front();
  if (target == nullptr) {
    session.gathered = result();
    session.gathered_error.reset();
    return;
  }
  target->value = std::move(session.gathered);
  target->failure = std::move(session.gathered_error);
  target->lost = lost;
  target->ready = true;
  if (target->parked) {
    target->wakeup.grant_front(outcome_answered);
  }
}

// The reader is done: the oldest parked query reads next. A query still sending (not parked yet)
// finds nobody reading when it comes to wait, and reads itself.
void hand_reading_on(state& session) noexcept {
  session.reading = false;
  for (answer* each : session.pending) {
    if (each != nullptr && each->parked && !each->ready) {
      session.reading = true;
      each->parked = false;
      each->wakeup.grant_front(outcome_read);
      return;
    }
  }
}

// The session is gone: every query still in flight is answered "lost".
void lose_everything(state& session, std::string reason) {
  while (!session.pending.empty()) {
    deliver(session, true);
  }
  mark_closed(session, std::move(reason));
  session.gate.grant_all(0);  // they find the session closed
}

// Reads answers (for everyone) until mine is ready. Timeouts and cancels reach the caller with
// mine unanswered; everything read until then was handed out.
void read_answers(state& session, answer& mine, const timeout& limit, const exchange& what) {
  while (!mine.ready) {
    int empty_in_a_row = 0;
    while (!mine.ready && PQisBusy(session.session) == 0 && empty_in_a_row < 2) {
      PGresult* raw = PQgetResult(session.session);
      if (raw == nullptr) {
        ++empty_in_a_row;  // the end of one query's results; its Sync comes next
        continue;
      }
      empty_in_a_row = 0;
      switch (PQresultStatus(raw)) {
        case PGRES_PIPELINE_SYNC:
          PQclear(raw);
          deliver(session, false);
          break;
        case PGRES_FATAL_ERROR:
        case PGRES_BAD_RESPONSE:
        case PGRES_NONFATAL_ERROR:
        case PGRES_PIPELINE_ABORTED:
          keep_first_error(session.gathered_error, raw);
          break;
        case PGRES_COPY_IN:
        case PGRES_COPY_OUT:
        case PGRES_COPY_BOTH:
          PQclear(raw);
          lose_everything(session, "a COPY statement was run, which weft::pg does not support");
          throw std::logic_error("weft::pg: a query on " + session.target +
                                 " started a COPY, which weft::pg does not support; the "
                                 "connection was closed (use INSERT / SELECT instead)");
        default:
          session.gathered = result(raw);
          break;
      }
    }
    if (mine.ready) {
      return;
    }
    if (PQstatus(session.session) == CONNECTION_BAD) {
      lose_everything(session,
                      "the connection was lost: " + trimmed(PQerrorMessage(session.session)));
      return;
    }
    // Send what the queries queued since (theirs and others'), then wait for more answers; while
    // the output does not fit, wait to write in slices and take in answers between them.
    int flushed = PQflush(session.session);
    if (flushed == 0) {
      wait_readable(socket_of(session, what), limit);
    } else if (flushed > 0) {
      wait_writable_slice(session, limit, what);
    }
    if (flushed < 0 || PQconsumeInput(session.session) == 0) {
      lose_everything(session,
                      "the connection was lost: " + trimmed(PQerrorMessage(session.session)));
      return;
    }
  }
}

}  // namespace

// Waits for mine to be answered: reads for everyone while nobody else does, else parks until
// its answer comes or the reading is handed to it.
void await_answer(state& session, answer& mine, const timeout& limit, const exchange& what) {
  bool handed_reading = false;
  while (!mine.ready) {
    if (handed_reading || !session.reading) {
      session.reading = true;
      struct pass_reading {
        state& session;
        ~pass_reading() { hand_reading_on(session); }
      } pass{session};
      read_answers(session, mine, limit, what);
      return;
    }
    weft::detail::queued_waiter waiter(mine.wakeup);
    mine.parked = true;
    try {
      mine.wakeup.wait(waiter, limit, [&](weft::detail::queued_waiter& granted) {
        if (granted.outcome == outcome_read) {
          hand_reading_on(session);  // cancelled after the hand-over: someone else reads
        }
      });
    } catch (...) {
      mine.parked = false;
      throw;
    }
    mine.parked = false;
    handed_reading = waiter.outcome == outcome_read;
  }
}

// A pipelined query was interrupted before its answer came. Alone in flight, it is cancelled on
// the server and its answer drained (queries sent meanwhile wait at the gate); with later
// queries behind it, it is abandoned. Returns what the caller's error should add.
std::string abandon(state& session, answer& mine, const exchange& what) noexcept {
  if (mine.ready) {
    return "";
  }
  bool alone = session.pending.size() == 1;  // then it is mine: mine is not answered yet
  if (!alone || session.reading || session.session == nullptr) {
    auto place = std::find(session.pending.begin(), session.pending.end(), &mine);
    if (place != session.pending.end()) {
      *place = nullptr;  // its answer is dropped
    }
    return "; it was left to finish on the server (other queries were pipelined behind it, and "
           "a cancel request could stop one of those) and its result will be dropped";
  }
  session.recovering = true;
  session.reading = true;
  weft::protect([&] {
    try {
      timeout limit(recovery_limit);
      flush_output(session, limit, what);
      send_cancel(session, limit);
      read_answers(session, mine, limit, what);
    } catch (const std::exception& failure) {
      lose_everything(session, "it could not be brought back after " + what.describe() +
                                   " was interrupted (" + failure.what() + ")");
    }
  });
  session.reading = false;
  session.recovering = false;
  session.gate.grant_all(0);
  return session.session != nullptr
             ? "; it was cancelled on the server and the connection is ready for the next query"
             : "; the connection was closed: " + session.closed_reason;
}

// The outcome of an answered query: its result, or its error.
result take_answer(state& session, answer& mine, const exchange& what) {
  if (mine.failure != nullptr) {
    error failure = server_error(mine.failure.get(), session, what, mine.lost);
    throw failure;
  }
  if (mine.lost) {
    throw error("weft::pg: " + what.describe() + " on " + session.target +
                    " failed: " + session.closed_reason + "; open a new connection",
                "08006", session.closed_reason);
  }
  return std::move(mine.value);
}

}  // namespace weft::pg::detail
