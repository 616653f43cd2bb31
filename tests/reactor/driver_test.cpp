// The drivers under the scheduler (src/reactor/drivers/): the factory that picks one, the
// interface every driver implements (fd watches and timers, driven here directly, with no
// scheduler around them), and the runtime's event sources on top.
//
// ctest runs this file, like the whole suite, once per driver with WEFT_DRIVER set (tests
// named "ev:DriverFdWatch.…"), so every test below that does not pick a driver itself runs on
// each of them: make_driver("") and a default weft::run take the one WEFT_DRIVER names.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif

#include "reactor/fd_subscription.hpp"
#include "sched/driver.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft::detail::fd_watch;
using weft::detail::timer_clock;
using weft::detail::timer_entry;
using weft_test::run_clean;

constexpr int both_ways = fd_watch::readable | fd_watch::writable;

// Sets (value) or unsets (null) an environment variable for one scope.
class scoped_environment {
 public:
  scoped_environment(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      old_ = old;
    }
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~scoped_environment() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  scoped_environment(const scoped_environment&) = delete;
  scoped_environment& operator=(const scoped_environment&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// The drivers CMake found for this build ("uv,ev,event,poll").
std::vector<std::string> built_drivers() {
  std::vector<std::string> names;
  std::stringstream list(WEFT_TEST_DRIVERS);
  for (std::string name; std::getline(list, name, ',');) {
    names.push_back(name);
  }
  return names;
}

// The driver of this test run: WEFT_DRIVER, or the default.
std::string driver_under_test() {
  const char* chosen = std::getenv("WEFT_DRIVER");
  return chosen != nullptr && *chosen != '\0' ? chosen : "uv";
}

// A connected pair of non-blocking unix sockets.
struct socket_pair {
  int ends[2] = {-1, -1};
  socket_pair() {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends), 0);
  }
  ~socket_pair() {
    close_end(0);
    close_end(1);
  }
  void close_end(int which) {
    if (ends[which] >= 0) {
      ::close(ends[which]);
      ends[which] = -1;
    }
  }
  socket_pair(const socket_pair&) = delete;
  socket_pair& operator=(const socket_pair&) = delete;
};

// An fd watch that records what each ready() call reported.
struct recorder : fd_watch {
  std::vector<int> seen;
  recorder(int watched_fd, int wanted) {
    fd = watched_fd;
    events = wanted;
    ready = [](fd_watch& watch, int ready_events) {
      static_cast<recorder&>(watch).seen.push_back(ready_events);
    };
  }
};

// A timer entry recording when it fired.
struct recorded_timer : timer_entry {
  std::vector<int>* order = nullptr;
  int label = 0;
  std::optional<timer_clock::time_point> fired_at;
  recorded_timer(timer_clock::time_point at, std::vector<int>* fired_order, int name)
      : order(fired_order), label(name) {
    deadline = at;
    fire = [](timer_entry& entry) {
      auto& self = static_cast<recorded_timer&>(entry);
      self.fired_at = timer_clock::now();
      if (self.order != nullptr) {
        self.order->push_back(self.label);
      }
    };
  }
};

// A driver as a scheduler would get it (WEFT_DRIVER or the default), driven by hand.
std::unique_ptr<weft::detail::driver> make_test_driver() { return weft::detail::make_driver(""); }

// Polls (blocking) until done() holds; false when a generous limit passed first. A timer at
// the limit keeps the driver from blocking forever if nothing ever comes.
template <class Condition>
bool poll_until(weft::detail::driver& driver, Condition done,
                timer_clock::duration limit = std::chrono::seconds(10)) {
  recorded_timer safety(timer_clock::now() + limit, nullptr, 0);
  driver.add_timer(safety);
  while (!done() && !safety.fired_at) {
    driver.poll(true);
  }
  driver.remove_timer(safety);
  return done();
}

// ---------------------------------------------------------------------------------------------
// the factory

TEST(DriverFactory, AvailableDriversAreTheOnesThisBuildFoundUvFirst) {
  std::vector<std::string> listed(weft::available_drivers().begin(),
                                  weft::available_drivers().end());
  EXPECT_EQ(listed, built_drivers());
  ASSERT_FALSE(listed.empty());
  EXPECT_EQ(listed.front(), "uv");
  // The factory's order, of what this build has: uv, ev, event, epoll, poll, uring.
  std::vector<std::string> ordered;
  for (const char* name : {"uv", "ev", "event", "epoll", "poll", "uring"}) {
    if (std::find(listed.begin(), listed.end(), name) != listed.end()) {
      ordered.emplace_back(name);
    }
  }
  EXPECT_EQ(listed, ordered);
  EXPECT_NE(std::find(listed.begin(), listed.end(), "poll"), listed.end());
}

TEST(DriverFactory, WithNothingChosenTheFirstAvailableRuns) {
  scoped_environment unset("WEFT_DRIVER", nullptr);
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  std::string seen = scheduler.run([] { return std::string(weft::current_driver()); });
  EXPECT_EQ(seen, "uv");
  EXPECT_STREQ(scheduler.stats().driver, "uv");
}

TEST(DriverFactory, TheEnvironmentChoosesTheDriver) {
  for (std::string_view name : weft::available_drivers()) {
    scoped_environment chosen("WEFT_DRIVER", std::string(name).c_str());
    weft::scheduler scheduler;
    weft_test::clean_end_check check(scheduler);
    std::string seen = scheduler.run([&] {
      EXPECT_STREQ(scheduler.stats().driver, std::string(name).c_str()) << "during the run";
      return std::string(weft::current_driver());
    });
    EXPECT_EQ(seen, name);
    EXPECT_STREQ(scheduler.stats().driver, std::string(name).c_str()) << "after the run";
  }
}

TEST(DriverFactory, RunOptionsWinOverTheEnvironment) {
  for (std::string_view name : weft::available_drivers()) {
    // The environment names another driver than the option.
    scoped_environment other("WEFT_DRIVER", name == "poll" ? "uv" : "poll");
    weft::run_options options;
    options.driver = std::string(name);
    std::string seen = run_clean([] { return std::string(weft::current_driver()); }, options);
    EXPECT_EQ(seen, name);
  }
}

TEST(DriverFactory, AnUnknownNameIsInvalidArgumentListingTheValidOnes) {
  weft::run_options options;
  options.driver = "kqueue";
  try {
    weft::run([] {}, options);
    ADD_FAILURE() << "an unknown driver must not run";
  } catch (const std::invalid_argument& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("run_options::driver"), std::string::npos) << message;
    EXPECT_NE(message.find("'kqueue'"), std::string::npos) << message;
    EXPECT_NE(message.find("does not exist"), std::string::npos) << message;
    for (std::string_view name : weft::available_drivers()) {
      EXPECT_NE(message.find(std::string(name)), std::string::npos) << message;
    }
  }
  scoped_environment chosen("WEFT_DRIVER", "select");
  try {
    weft::run([] {});
    ADD_FAILURE() << "an unknown driver must not run";
  } catch (const std::invalid_argument& error) {
    std::string message = error.what();
    EXPECT_NE(message.find("WEFT_DRIVER"), std::string::npos) << message;
    EXPECT_NE(message.find("'select'"), std::string::npos) << message;
    EXPECT_NE(message.find("valid drivers here: uv"), std::string::npos) << message;
  }
}

TEST(DriverFactory, CurrentDriverOutsideARunIsALogicError) {
  EXPECT_THROW(weft::current_driver(), std::logic_error);
}

// Under valgrind 3.19 (Debian 12's) io_uring_enter runs holding valgrind's one lock, so while
// the spawner waits in the uring driver the spawned thread can never start: the await times out
// and ~thread_task's join waits forever (a 25-line liburing program waits out its whole timeout
// the same way). The uring pass is left out there; the other drivers' waits release the lock.
bool under_valgrind() {
#ifdef RUNNING_ON_VALGRIND
  return RUNNING_ON_VALGRIND != 0;
#else
  return false;
#endif
}

TEST(DriverFactory, ASpawnedThreadRunsOnItsSpawnersDriver) {
  for (std::string_view name : weft::available_drivers()) {
    if (name == "uring" && under_valgrind()) continue;
    scoped_environment other("WEFT_DRIVER", name == "poll" ? "uv" : "poll");
    weft::run_options options;
    options.driver = std::string(name);
    run_clean(
        [&] {
          auto thread = weft::spawn_thread([] { return std::string(weft::current_driver()); });
          EXPECT_EQ(thread.await(weft::timeout(10s)), name);
        },
        options);
  }
}

// ---------------------------------------------------------------------------------------------
// fd watches, on the driver of this run

TEST(DriverFdWatch, ReportsReadinessLevelTriggeredUntilUnwatched) {
  auto driver = make_test_driver();
  socket_pair pair;
  recorder watch(pair.ends[0], fd_watch::readable);
  ASSERT_EQ(driver->watch_fd(watch), 0);
  EXPECT_TRUE(watch.watched);
  EXPECT_EQ(watch.armed, fd_watch::readable);
  driver->poll(false);
  EXPECT_TRUE(watch.seen.empty()) << "nothing to read yet";

  ASSERT_EQ(::write(pair.ends[1], "x", 1), 1);
  ASSERT_TRUE(poll_until(*driver, [&] { return !watch.seen.empty(); }));
  EXPECT_EQ(watch.seen.front(), fd_watch::readable);
  // Level-triggered: the unread byte is reported again.
  ASSERT_TRUE(poll_until(*driver, [&] { return watch.seen.size() >= 2; }));

  driver->unwatch_fd(watch);
  EXPECT_FALSE(watch.watched);
  std::size_t reported = watch.seen.size();
  ASSERT_EQ(::write(pair.ends[1], "y", 1), 1);
  for (int turn = 0; turn < 5; ++turn) {
    driver->poll(false);
  }
  EXPECT_EQ(watch.seen.size(), reported) << "an unwatched fd reported again";
  EXPECT_NO_THROW(driver->close());
}

TEST(DriverFdWatch, ChangesWhatItPollsForAndIdlesAtZero) {
  auto driver = make_test_driver();
  socket_pair pair;
  recorder watch(pair.ends[0], fd_watch::readable);
  ASSERT_EQ(driver->watch_fd(watch), 0);
  for (int turn = 0; turn < 3; ++turn) {
    driver->poll(false);
  }
  EXPECT_TRUE(watch.seen.empty());

  watch.events = fd_watch::writable;  // an empty socket buffer is writable at once
  ASSERT_EQ(driver->watch_fd(watch), 0);
  EXPECT_EQ(watch.armed, fd_watch::writable);
  ASSERT_TRUE(poll_until(*driver, [&] { return !watch.seen.empty(); }));
  EXPECT_EQ(watch.seen.front(), fd_watch::writable);

  watch.events = 0;
  ASSERT_EQ(driver->watch_fd(watch), 0);
  EXPECT_TRUE(watch.watched) << "registered, polling for nothing";
  std::size_t reported = watch.seen.size();
  for (int turn = 0; turn < 5; ++turn) {
    driver->poll(false);
  }
  EXPECT_EQ(watch.seen.size(), reported) << "an idle watch reported";
  driver->unwatch_fd(watch);
  EXPECT_NO_THROW(driver->close());
}

TEST(DriverFdWatch, OnlyArmedReferencedWatchesKeepTheDriverAlive) {
  auto driver = make_test_driver();
  EXPECT_FALSE(driver->alive()) << "a fresh driver has nothing that could wake it";
  socket_pair pair;
  recorder watch(pair.ends[0], fd_watch::readable);
  ASSERT_EQ(driver->watch_fd(watch), 0);
  EXPECT_TRUE(driver->alive());
  driver->set_fd_referenced(watch, false);
  EXPECT_FALSE(driver->alive()) << "an unreferenced watch does not count";
  driver->set_fd_referenced(watch, true);
  EXPECT_TRUE(driver->alive());
  watch.events = 0;
  ASSERT_EQ(driver->watch_fd(watch), 0);
  EXPECT_FALSE(driver->alive()) << "an idle watch does not count";
  watch.events = fd_watch::readable;
  ASSERT_EQ(driver->watch_fd(watch), 0);
  EXPECT_TRUE(driver->alive());
  driver->unwatch_fd(watch);
  driver->poll(false);  // the uv driver counts a closing uv_poll_t until its close callback ran
  EXPECT_FALSE(driver->alive());
  EXPECT_NO_THROW(driver->close());
}

// A callback may stop its own watch and another ready one, and free them: the driver must not
// report the other one afterwards, in the same turn or later.
TEST(DriverFdWatch, ACallbackMayUnwatchItselfAndAnotherReadyWatch) {
  auto driver = make_test_driver();
  socket_pair first_pair;
  socket_pair second_pair;
  struct pair_watch : fd_watch {
    weft::detail::driver* owner = nullptr;
    std::unique_ptr<pair_watch>* self = nullptr;
    std::unique_ptr<pair_watch>* other = nullptr;
    int* calls = nullptr;
  };
  int calls = 0;
  std::unique_ptr<pair_watch> first = std::make_unique<pair_watch>();
  std::unique_ptr<pair_watch> second = std::make_unique<pair_watch>();
  auto prepare = [&](std::unique_ptr<pair_watch>& watch, std::unique_ptr<pair_watch>& other,
                     int fd) {
    watch->fd = fd;
    watch->events = fd_watch::readable;
    watch->owner = driver.get();
    watch->self = &watch;
    watch->other = &other;
    watch->calls = &calls;
    watch->ready = [](fd_watch& ready_watch, int) {
      auto& self = static_cast<pair_watch&>(ready_watch);
      ++*self.calls;
      std::unique_ptr<pair_watch>* mine = self.self;
      std::unique_ptr<pair_watch>* theirs = self.other;
      weft::detail::driver* owner = self.owner;
      if (*theirs != nullptr) {
        owner->unwatch_fd(**theirs);
        theirs->reset();
      }
      owner->unwatch_fd(**mine);
      mine->reset();  // frees self: nothing may touch it after this
    };
  };
  prepare(first, second, first_pair.ends[0]);
  prepare(second, first, second_pair.ends[0]);
  ASSERT_EQ(driver->watch_fd(*first), 0);
  ASSERT_EQ(driver->watch_fd(*second), 0);
  driver->poll(false);  // both registered with the kernel before both become ready
  ASSERT_EQ(::write(first_pair.ends[1], "x", 1), 1);
  ASSERT_EQ(::write(second_pair.ends[1], "x", 1), 1);
  ASSERT_TRUE(poll_until(*driver, [&] { return calls > 0; }));
  for (int turn = 0; turn < 5; ++turn) {
    driver->poll(false);
  }
  EXPECT_EQ(calls, 1) << "a watch unwatched by an earlier callback was reported";
  EXPECT_EQ(first, nullptr);
  EXPECT_EQ(second, nullptr);
  EXPECT_NO_THROW(driver->close());
}

// Watches changed and dropped while the driver is polling for them (the uring driver has a poll
// in flight per watch, which must complete into its own slot, never into a watch already freed):
// a watch that wants more than it polled for gets it, a dropped one never reports, and the
// driver serves a fresh pair afterwards. Under ASan this is also the use-after-free check.
TEST(DriverFdWatch, WatchesChangedAndDroppedWhilePolledForReportOnlyWhatTheyWant) {
  auto driver = make_test_driver();
  constexpr int pairs = 64;
  for (int round = 0; round < 8; ++round) {
    std::vector<std::unique_ptr<socket_pair>> sockets;
    std::vector<std::unique_ptr<recorder>> watches;
    for (int i = 0; i < pairs; ++i) {
      sockets.push_back(std::make_unique<socket_pair>());
      watches.push_back(std::make_unique<recorder>(sockets.back()->ends[0], fd_watch::readable));
      ASSERT_EQ(driver->watch_fd(*watches.back()), 0);
    }
    driver->poll(false);  // every watch polled for readable: nothing to read yet
    for (int i = 0; i < pairs; ++i) {
      EXPECT_TRUE(watches[i]->seen.empty()) << "round " << round << " watch " << i;
      if (i % 2 == 0) {
        watches[i]->events = fd_watch::readable | fd_watch::writable;  // more than polled for
        ASSERT_EQ(driver->watch_fd(*watches[i]), 0);
      } else {
        driver->unwatch_fd(*watches[i]);
        watches[i].reset();  // freed while its poll may still be in flight
      }
    }
    ASSERT_EQ(::write(sockets[1]->ends[1], "x", 1), 1);  // the dropped watch's fd turns ready
    ASSERT_TRUE(poll_until(*driver,
                           [&] {
                             for (int i = 0; i < pairs; i += 2) {
                               if (watches[i]->seen.empty()) {
                                 return false;
                               }
                             }
                             return true;
                           }))
        << "round " << round << ": a watch that wants writable was never told";
    for (int i = 0; i < pairs; i += 2) {
      EXPECT_EQ(watches[i]->seen.front(), fd_watch::writable) << "round " << round;
      driver->unwatch_fd(*watches[i]);
    }
  }
  socket_pair fresh;
  recorder watch(fresh.ends[0], fd_watch::readable);
  ASSERT_EQ(driver->watch_fd(watch), 0);
  ASSERT_EQ(::write(fresh.ends[1], "y", 1), 1);
  ASSERT_TRUE(poll_until(*driver, [&] { return !watch.seen.empty(); }));
  EXPECT_EQ(watch.seen.front(), fd_watch::readable);
  driver->unwatch_fd(watch);
  EXPECT_NO_THROW(driver->close());
}

TEST(DriverFdWatch, AClosedFdOrARegularFileCannotBeWatched) {
  auto driver = make_test_driver();
  int closed = ::dup(0);
  ASSERT_GE(closed, 0);
  ::close(closed);
  recorder on_closed(closed, fd_watch::readable);
  EXPECT_EQ(driver->watch_fd(on_closed), -EBADF);
  EXPECT_FALSE(on_closed.watched);

  FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  recorder on_file(::fileno(file), fd_watch::readable);
  EXPECT_EQ(driver->watch_fd(on_file), -EPERM) << "epoll refuses regular files; so does every "
                                                  "driver, poll(2) included";
  EXPECT_FALSE(on_file.watched);
  std::fclose(file);
  EXPECT_NO_THROW(driver->close());
}

// What a fd closed under a live watch does, per driver (documented at fd_watch in
// src/sched/driver.hpp): poll(2) reports POLLNVAL, so the poll driver calls it ready both ways
// and stops polling it; epoll forgets a closed fd silently, so the epoll-based drivers report
// nothing. Never a crash, and the watch can still be stopped and the driver closed cleanly.
TEST(DriverFdWatch, AFdClosedUnderALiveWatchIsReportedOrForgottenAsDocumented) {
  auto driver = make_test_driver();
  socket_pair pair;
  recorder watch(pair.ends[0], fd_watch::readable);
  ASSERT_EQ(driver->watch_fd(watch), 0);
  for (int turn = 0; turn < 3; ++turn) {
    driver->poll(false);  // the watch reaches the kernel (libuv and libev queue changes)
  }
  ASSERT_TRUE(watch.seen.empty());
  pair.close_end(0);
  if (std::string(driver->name()) == "poll") {
    ASSERT_TRUE(poll_until(*driver, [&] { return !watch.seen.empty(); }));
    EXPECT_EQ(watch.seen.front(), both_ways);
    EXPECT_EQ(watch.armed, 0) << "a closed fd must not be reported at every turn";
    std::size_t reported = watch.seen.size();
    for (int turn = 0; turn < 5; ++turn) {
      driver->poll(false);
    }
    EXPECT_EQ(watch.seen.size(), reported);
  } else {
    for (int turn = 0; turn < 5; ++turn) {
      driver->poll(false);
    }
    EXPECT_TRUE(watch.seen.empty()) << "epoll does not report a closed fd";
  }
  driver->unwatch_fd(watch);
  EXPECT_NO_THROW(driver->close());
}

TEST(DriverFdWatch, AFdClosedWithAChangeStillQueuedIsReportedNotAnAbort) {
  auto driver = make_test_driver();
  socket_pair pair;
  recorder watch(pair.ends[0], fd_watch::readable);
  ASSERT_EQ(driver->watch_fd(watch), 0);
  for (int turn = 0; turn < 3; ++turn) {
    driver->poll(false);
  }
  ASSERT_TRUE(watch.seen.empty());
  // libuv and libev queue this change for their next poll, and would abort there (EBADF in
  // epoll_ctl) once the fd is closed; libevent and the epoll driver apply it now; poll(2) keeps
  // it in memory.
  watch.events = both_ways;
  ASSERT_EQ(driver->watch_fd(watch), 0);
  pair.close_end(0);
  const std::string name = driver->name();
  if (name == "event" || name == "epoll") {
    for (int turn = 0; turn < 5; ++turn) {
      driver->poll(false);
    }
    EXPECT_TRUE(watch.seen.empty()) << "epoll forgets a closed fd silently";
  } else {
    ASSERT_TRUE(poll_until(*driver, [&] { return !watch.seen.empty(); }));
    EXPECT_EQ(watch.seen.front(), both_ways) << "an error condition: ready both ways";
    EXPECT_EQ(watch.armed, 0) << "and no longer polled";
  }
  driver->unwatch_fd(watch);
  EXPECT_NO_THROW(driver->close());
}

using weft_test::allow_fds;

TEST(DriverFdWatch, TenThousandIdleFdsAndOneActivePair) {
  constexpr int idle_pairs = 5000;  // 10,000 watched fds, none ever ready
  if (!allow_fds(2 * idle_pairs + 200)) {
    GTEST_SKIP() << "the hard RLIMIT_NOFILE is below " << 2 * idle_pairs + 200;
  }
  auto driver = make_test_driver();
  std::vector<std::unique_ptr<socket_pair>> pairs;
  std::vector<std::unique_ptr<recorder>> idle;
  for (int index = 0; index < idle_pairs; ++index) {
    pairs.push_back(std::make_unique<socket_pair>());
    for (int end : pairs.back()->ends) {
      ASSERT_GE(end, 0) << "socketpair " << index << " failed";
      idle.push_back(std::make_unique<recorder>(end, fd_watch::readable));
      ASSERT_EQ(driver->watch_fd(*idle.back()), 0);
    }
  }
  socket_pair active;
  recorder ping(active.ends[0], fd_watch::readable);
  recorder pong(active.ends[1], fd_watch::readable);
  ASSERT_EQ(driver->watch_fd(ping), 0);
  ASSERT_EQ(driver->watch_fd(pong), 0);

  // poll(2) scans every fd at each call (about 1.3 ms for 10,000 sockets here, twice for a call
  // that sleeps): a few hundred round trips keep the poll driver's run to seconds.
  constexpr int round_trips = 300;
  auto round_trip = [&] {
    char byte = 0;
    ASSERT_EQ(::write(active.ends[1], "p", 1), 1);
    ASSERT_TRUE(poll_until(*driver, [&] { return !ping.seen.empty(); }));
    ping.seen.clear();
    ASSERT_EQ(::read(active.ends[0], &byte, 1), 1);
    ASSERT_EQ(::write(active.ends[0], "q", 1), 1);
    ASSERT_TRUE(poll_until(*driver, [&] { return !pong.seen.empty(); }));
    pong.seen.clear();
    ASSERT_EQ(::read(active.ends[1], &byte, 1), 1);
  };
  round_trip();  // libuv and libev hand the 10,002 registrations to epoll at their first turn
  ASSERT_FALSE(HasFatalFailure());
  auto started = std::chrono::steady_clock::now();
  for (int trip = 0; trip < round_trips; ++trip) {
    round_trip();
    ASSERT_FALSE(HasFatalFailure());
  }
  auto elapsed = std::chrono::steady_clock::now() - started;
  EXPECT_LT(elapsed, 20s) << round_trips << " round trips beside 10,000 idle fds";
  for (auto& watch : idle) {
    EXPECT_TRUE(watch->seen.empty()) << "idle fd " << watch->fd << " was reported";
    driver->unwatch_fd(*watch);
  }
  driver->unwatch_fd(ping);
  driver->unwatch_fd(pong);
  EXPECT_NO_THROW(driver->close());
}

// count socket pairs, each one's first end watched for readable (and made readable first when
// readable_now): pairs[i] and watches[i] belong together.
void watch_pairs(weft::detail::driver& driver, int count, bool readable_now,
                 std::vector<std::unique_ptr<socket_pair>>& pairs,
                 std::vector<std::unique_ptr<recorder>>& watches) {
  for (int index = 0; index < count; ++index) {
    pairs.push_back(std::make_unique<socket_pair>());
    ASSERT_GE(pairs.back()->ends[0], 0) << "socketpair " << index << " failed";
    if (readable_now) {
      ASSERT_EQ(::write(pairs.back()->ends[1], "x", 1), 1);
    }
    watches.push_back(std::make_unique<recorder>(pairs.back()->ends[0], fd_watch::readable));
    ASSERT_EQ(driver.watch_fd(*watches.back()), 0) << "watch " << index;
  }
}

// A driver closed with fd watches still registered says so, naming their fds, after releasing
// them (src/reactor/uv_driver.hpp, watch_list and throw_watches_left). The uv driver's poll
// handles are libuv's, and libuv's own check names them instead (close_libuv_loop), keeping
// them: not run there.
TEST(DriverFdWatch, WatchesLeftAtCloseAreALogicErrorNamingTheirFds) {
  auto driver = make_test_driver();
  if (std::string(driver->name()) == "uv") {
    GTEST_SKIP() << "libuv reports its poll handles itself, and keeps them";
  }
  socket_pair first;
  socket_pair second;
  recorder left_one(first.ends[0], fd_watch::readable);
  recorder left_two(second.ends[0], 0);
  ASSERT_EQ(driver->watch_fd(left_one), 0);
  ASSERT_EQ(driver->watch_fd(left_two), 0);
  driver->poll(false);
  try {
    driver->close();
    ADD_FAILURE() << "close() accepted watches left over";
  } catch (const std::logic_error& error) {
    const std::string expected = "fd watches still registered when the scheduler closed (driver '" +
                                 std::string(driver->name()) + "'): fd " +
                                 std::to_string(first.ends[0]) + ", " +
                                 std::to_string(second.ends[0]) + ";";
    EXPECT_NE(std::string(error.what()).find(expected), std::string::npos) << error.what();
  }
  EXPECT_FALSE(left_one.watched);
  EXPECT_FALSE(left_two.watched);
}

// More fds ready at once than libuv's epoll array holds (1024 events). Level-triggered, a fd
// stays ready until read, but one poll reports it once at most: libuv calls epoll_wait again
// within one turn when a call fills its array, and before the uv driver kept its own poll
// handles below that (the spill set of src/reactor/drivers/uv_driver.cpp) every unread fd came
// back from each of those calls, dozens of reports per fd and turn.
TEST(DriverFdWatch, TwoThousandReadyFdsAreEachReportedOncePerPoll) {
  constexpr int count = 2000;
  if (!allow_fds(2 * count + 200)) {
    GTEST_SKIP() << "the hard RLIMIT_NOFILE is below " << 2 * count + 200;
  }
  auto driver = make_test_driver();
  std::vector<std::unique_ptr<socket_pair>> pairs;
  std::vector<std::unique_ptr<recorder>> watches;
  ASSERT_NO_FATAL_FAILURE(watch_pairs(*driver, count, true, pairs, watches));
  auto unseen = [&] {
    return std::count_if(watches.begin(), watches.end(),
                         [](const auto& watch) { return watch->seen.empty(); });
  };
  std::size_t polls = 0;
  while (unseen() > 0 && polls < 50) {
    driver->poll(false);
    ++polls;
  }
  ASSERT_EQ(unseen(), 0) << "ready fds never reported after " << polls << " polls";
  std::size_t reports = 0;
  for (const auto& watch : watches) {
    reports += watch->seen.size();
    EXPECT_LE(watch->seen.size(), polls) << "fd " << watch->fd << " reported more than once by "
                                         << "one of " << polls << " polls";
    EXPECT_EQ(watch->seen.front(), fd_watch::readable);
  }
  EXPECT_LE(reports, count * polls);
  // Read, the fds are reported no more.
  char byte = 0;
  for (auto& pair : pairs) {
    ASSERT_EQ(::read(pair->ends[0], &byte, 1), 1);
  }
  for (auto& watch : watches) {
    watch->seen.clear();
  }
  for (int turn = 0; turn < 3; ++turn) {
    driver->poll(false);
  }
  EXPECT_EQ(unseen(), count) << "a fd read empty was reported";
  for (auto& watch : watches) {
    driver->unwatch_fd(*watch);
  }
  EXPECT_NO_THROW(driver->close());
}

// Among thousands of watches, ready at once, each callback stops and frees its partner (the
// other end's watch, ready in the same turn) and then itself: no partner is reported once
// freed, whichever of the driver's tables the two sit in (the uv driver keeps watches past its
// first 896 in a set of its own, dispatched from one array: ASan checks that no stale entry is
// followed). Then both ends of every pair are watched for writable, changed to idle and back.
TEST(DriverFdWatch, CallbacksStoppingOtherReadyWatchesAmongThousandsAreSafe) {
  constexpr int count = 1200;  // pairs: 2400 watches
  if (!allow_fds(2 * count + 200)) {
    GTEST_SKIP() << "the hard RLIMIT_NOFILE is below " << 2 * count + 200;
  }
  auto driver = make_test_driver();
  struct partnered : fd_watch {
    weft::detail::driver* owner = nullptr;
    std::vector<std::unique_ptr<partnered>>* all = nullptr;
    std::size_t self = 0;
    int* calls = nullptr;
  };
  std::vector<std::unique_ptr<socket_pair>> pairs;
  std::vector<std::unique_ptr<partnered>> watches;
  int calls = 0;
  for (int index = 0; index < count; ++index) {
    pairs.push_back(std::make_unique<socket_pair>());
    for (int end : pairs.back()->ends) {
      ASSERT_GE(end, 0);
      ASSERT_EQ(::write(end, "x", 1), 1);  // makes the other end readable
      auto watch = std::make_unique<partnered>();
      watch->fd = end;
      watch->events = fd_watch::readable;
      watch->owner = driver.get();
      watch->all = &watches;
      watch->self = watches.size();
      watch->calls = &calls;
      watch->ready = [](fd_watch& ready_watch, int) {
        auto& me = static_cast<partnered&>(ready_watch);
        ++*me.calls;
        auto& all = *me.all;
        weft::detail::driver* owner = me.owner;
        std::size_t mine = me.self;
        std::size_t theirs = mine ^ 1;
        if (all[theirs] != nullptr) {
          owner->unwatch_fd(*all[theirs]);
          all[theirs].reset();
        }
        owner->unwatch_fd(*all[mine]);
        all[mine].reset();  // frees me
      };
      watches.push_back(std::move(watch));
      ASSERT_EQ(driver->watch_fd(*watches.back()), 0);
    }
  }
  auto left = [&] {
    return std::count_if(watches.begin(), watches.end(),
                         [](const auto& watch) { return watch != nullptr; });
  };
  for (int turn = 0; turn < 50 && left() > 0; ++turn) {
    driver->poll(false);
  }
  EXPECT_EQ(left(), 0);
  EXPECT_EQ(calls, count) << "one call per pair: a freed partner was reported";

  // The same fds again, both ends writable, idled and re-armed in place.
  std::vector<std::unique_ptr<recorder>> writers;
  for (auto& pair : pairs) {
    for (int end : pair->ends) {
      writers.push_back(std::make_unique<recorder>(end, fd_watch::writable));
      ASSERT_EQ(driver->watch_fd(*writers.back()), 0);
    }
  }
  for (auto& writer : writers) {
    writer->events = 0;
    ASSERT_EQ(driver->watch_fd(*writer), 0);
  }
  for (int turn = 0; turn < 3; ++turn) {
    driver->poll(false);
  }
  for (auto& writer : writers) {
    EXPECT_TRUE(writer->seen.empty()) << "idle watch of fd " << writer->fd << " was reported";
    writer->events = fd_watch::writable;
    ASSERT_EQ(driver->watch_fd(*writer), 0);
  }
  ASSERT_TRUE(poll_until(*driver, [&] {
    return std::all_of(writers.begin(), writers.end(),
                       [](const auto& writer) { return !writer->seen.empty(); });
  }));
  for (auto& writer : writers) {
    EXPECT_EQ(writer->seen.front(), fd_watch::writable);
    driver->unwatch_fd(*writer);
  }
  EXPECT_NO_THROW(driver->close());
}

// Idle watches (events 0) among thousands, whose peers hang up: epoll reports a hang-up whatever
// a fd is polled for, so a driver that left such fds in its set polling for nothing would be
// woken by them at every poll and never sleep (the uv driver keeps its spilled idle watches
// registered, one-shot). Nothing is reported, a blocking poll blocks until its timer, and once
// polled for readable again each reports its end of stream.
TEST(DriverFdWatch, IdleWatchesAmongThousandsStayQuietWhenTheirPeersHangUp) {
  constexpr int count = 1200;
  if (!allow_fds(2 * count + 200)) {
    GTEST_SKIP() << "the hard RLIMIT_NOFILE is below " << 2 * count + 200;
  }
  auto driver = make_test_driver();
  std::vector<std::unique_ptr<socket_pair>> pairs;
  std::vector<std::unique_ptr<recorder>> watches;
  ASSERT_NO_FATAL_FAILURE(watch_pairs(*driver, count, false, pairs, watches));
  driver->poll(false);  // every watch in the kernel's set
  for (auto& watch : watches) {
    watch->events = 0;
    ASSERT_EQ(driver->watch_fd(*watch), 0);
  }
  for (auto& pair : pairs) {
    pair->close_end(1);
  }
  std::vector<int> fired;
  recorded_timer quiet(timer_clock::now() + 50ms, &fired, 1);
  driver->add_timer(quiet);
  int polls = 0;
  while (!quiet.fired_at && polls < 10'000) {
    driver->poll(true);
    ++polls;
  }
  EXPECT_TRUE(quiet.fired_at);
  EXPECT_LT(polls, 100) << "blocking polls did not block: hang-ups of idle fds woke them";
  for (auto& watch : watches) {
    EXPECT_TRUE(watch->seen.empty()) << "idle fd " << watch->fd << " was reported";
    watch->events = fd_watch::readable;
    ASSERT_EQ(driver->watch_fd(*watch), 0);
  }
  ASSERT_TRUE(poll_until(*driver, [&] {
    return std::all_of(watches.begin(), watches.end(),
                       [](const auto& watch) { return !watch->seen.empty(); });
  })) << "a hung-up fd polled for readable again was never reported";
  for (auto& watch : watches) {
    EXPECT_NE(watch->seen.front() & fd_watch::readable, 0);
    driver->unwatch_fd(*watch);
  }
  EXPECT_NO_THROW(driver->close());
}

// ---------------------------------------------------------------------------------------------
// timers, on the driver of this run

TEST(DriverTimers, FireInDeadlineOrderNeverEarly) {
  auto driver = make_test_driver();
  std::vector<int> order;
  auto now = timer_clock::now();
  std::vector<std::unique_ptr<recorded_timer>> timers;
  // label: its place in the firing order (equal deadlines fire in the order they were added).
  const std::pair<std::chrono::milliseconds, int> plan[] = {{7ms, 5}, {2ms, 1}, {4ms, 3},
                                                            {2ms, 2}, {5ms, 4}, {1ms, 0}};
  for (auto [delay, label] : plan) {
    timers.push_back(std::make_unique<recorded_timer>(now + delay, &order, label));
    driver->add_timer(*timers.back());
  }
  EXPECT_TRUE(driver->alive()) << "foreground timers keep it alive";
  ASSERT_TRUE(poll_until(*driver, [&] { return order.size() == timers.size(); }));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  for (const auto& timer : timers) {
    ASSERT_TRUE(timer->fired_at);
    EXPECT_GE(*timer->fired_at, timer->deadline) << "timer " << timer->label << " fired early";
  }
  EXPECT_FALSE(driver->alive());
  EXPECT_NO_THROW(driver->close());
}

// Deadlines at the clock's end (a sleep for hours::max() saturates there) or centuries away
// must neither fire nor turn the native timer's delay into zero or a negative number: the
// driver still blocks until a fd is ready. A thread writes after a while; the blocking polls
// made meanwhile are counted: a spinning driver would make thousands.
TEST(DriverTimers, HugeDeadlinesDoNotOverflowTheNativeTimer) {
  auto driver = make_test_driver();
  auto now = timer_clock::now();
  recorded_timer at_the_end(timer_clock::time_point::max(), nullptr, 0);
  recorded_timer centuries(now + std::chrono::hours(24 * 365 * 200), nullptr, 1);
  driver->add_timer(at_the_end);
  driver->add_timer(centuries);
  EXPECT_TRUE(driver->alive());

  socket_pair pair;
  recorder watch(pair.ends[0], fd_watch::readable);
  ASSERT_EQ(driver->watch_fd(watch), 0);
  driver->poll(false);
  std::thread writer([&] {
    std::this_thread::sleep_for(100ms);
    EXPECT_EQ(::write(pair.ends[1], "x", 1), 1);
  });
  int blocking_polls = 0;
  while (watch.seen.empty() && blocking_polls < 1000) {
    driver->poll(true);
    ++blocking_polls;
  }
  writer.join();
  EXPECT_FALSE(watch.seen.empty());
  EXPECT_LE(blocking_polls, 10) << "the driver did not block: an overflowed timer?";
  EXPECT_FALSE(at_the_end.fired_at);
  EXPECT_FALSE(centuries.fired_at);

  driver->remove_timer(at_the_end);
  driver->remove_timer(centuries);
  driver->unwatch_fd(watch);
  driver->poll(false);  // the uv driver counts a closing uv_poll_t until its close callback ran
  EXPECT_FALSE(driver->alive());
  EXPECT_NO_THROW(driver->close());
}

// ---------------------------------------------------------------------------------------------
// the runtime's event sources, on the driver of this run

TEST(OnTheDriver, TheRunReportsTheDriverItRunsOn) {
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  std::string seen = scheduler.run([] { return std::string(weft::current_driver()); });
  EXPECT_EQ(seen, driver_under_test());
  EXPECT_EQ(std::string(scheduler.stats().driver), driver_under_test());
}

TEST(OnTheDriver, ASleepLastsAtLeastItsDuration) {
  run_clean([] {
    for (auto duration : {1ms, 5ms, 20ms}) {
      auto started = std::chrono::steady_clock::now();
      weft::sleep_for(duration);
      EXPECT_GE(std::chrono::steady_clock::now() - started, duration);
    }
  });
}

TEST(OnTheDriver, AHugeSleepWaitsUntilCancelled) {
  run_clean([] {
    auto sleeper = weft::spawn([] { weft::sleep_for(std::chrono::hours::max()); });
    weft::sleep_for(10ms);
    EXPECT_FALSE(sleeper.done()) << "a sleep for hours::max() ended";
    sleeper.cancel("enough");
    EXPECT_THROW(sleeper.await(), weft::cancelled_error);
  });
}

TEST(OnTheDriver, AFdWaitWakesWhenThePeerWrites) {
  socket_pair pair;
  run_clean([&] {
    auto reader = weft::spawn([&] {
      weft::wait_readable(pair.ends[0], weft::timeout(10s));
      char buffer[8];
      ssize_t got = ::read(pair.ends[0], buffer, sizeof(buffer));
      return std::string(buffer, got > 0 ? static_cast<std::size_t>(got) : 0);
    });
    weft::yield();  // the reader waits
    EXPECT_EQ(::write(pair.ends[1], "ping", 4), 4);
    EXPECT_EQ(reader.await(), "ping");
  });
}

// A driver that holds a reference to a watched file (io_uring's poll does, until it completes)
// must let it go once the watch ends: a socket closed right after a wait on it timed out is
// released, and its peer sees the end of the stream, while the scheduler goes on waiting.
TEST(OnTheDriver, ASocketClosedAfterItsWaitEndedReachesThePeerAsEndOfStream) {
  socket_pair pair;
  run_clean([&] {
    EXPECT_THROW(weft::wait_readable(pair.ends[0], weft::timeout(10ms)), weft::timeout_error);
    pair.close_end(0);
    weft::wait_readable(pair.ends[1], weft::timeout(10s));  // only the end of the stream comes
    char buffer[8];
    EXPECT_EQ(::read(pair.ends[1], buffer, sizeof(buffer)), 0);
  });
}

// A subscription made dormant (events 0, no call into the registry: what net::connection's
// hibernation does between wakes) on a fd that no registration pins: the interest the driver
// still polls for is dropped the first time it fires unwanted, so the scheduler does not spin
// on the readable fd, and re-arming the subscription reports the input that is still there.
TEST(OnTheDriver, ADormantSubscriptionNeitherSpinsNorLosesTheInputLeftForIt) {
  using weft::detail::fd_subscription;
  struct counting : fd_subscription {
    int reports = 0;
  };
  socket_pair pair;
  run_clean([&] {
    weft::detail::scheduler_core& core = *weft::detail::current_core();
    counting watch;
    watch.fd = pair.ends[0];
    watch.events = fd_subscription::readable;
    watch.ready = [](fd_subscription& self, int) { ++static_cast<counting&>(self).reports; };
    ASSERT_EQ(weft::detail::subscribe_fd(core, watch), 0);
    ASSERT_EQ(::write(pair.ends[1], "x", 1), 1);
    auto reported = [&](int at_least) {
      for (int i = 0; i < 10'000 && watch.reports < at_least; ++i) {
        weft::sleep_for(1ms);  // polls; the bound only ends a test that failed
      }
      return watch.reports >= at_least;
    };
    ASSERT_TRUE(reported(1));
    watch.events = 0;  // dormant; the byte stays unread
    const int before = watch.reports;
    auto polls = [] {
      const weft::scheduler_stats stats = weft::current_scheduler().stats();
      return stats.reactor_polls + stats.reactor_waits;
    };
    const auto polls_before = polls();
    weft::sleep_for(300ms);
    EXPECT_LT(polls() - polls_before, 50u) << "the dormant subscription's fd kept firing";
    EXPECT_EQ(watch.reports, before);
    watch.events = fd_subscription::readable;
    ASSERT_EQ(weft::detail::subscribe_fd(core, watch), 0);
    EXPECT_TRUE(reported(before + 1)) << "re-armed, the unread byte was not reported";
    weft::detail::unsubscribe_fd(core, watch);
  });
}

TEST(OnTheDriver, ATriggerFromAnotherThreadWakesTheWaiter) {
  run_clean([] {
    weft::trigger woken;
    std::atomic<bool> written{false};
    std::thread notifier([&] {
      written.store(true, std::memory_order_relaxed);
      woken.notify();
    });
    woken.wait(weft::timeout(10s));
    EXPECT_TRUE(written.load(std::memory_order_relaxed));
    notifier.join();
  });
}

TEST(OnTheDriver, AChildProcessRunsAndItsExitIsSeen) {
  run_clean([] {
    weft::subprocess::result ended =
        weft::subprocess::exec({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
    EXPECT_EQ(ended.exit_status, 3);
    EXPECT_EQ(ended.standard_output, "out\n");
    EXPECT_EQ(ended.standard_error, "err\n");
  });
}

// libuv's signal handler writes to a pipe inside its loop's epoll set: on the ev, event and
// poll drivers that wakes the native wait through the embedded loop's backend fd.
TEST(OnTheDriver, ASignalArrivingDuringABlockingWaitIsDelivered) {
  run_clean([] {
    // Catch SIGUSR1 from here on (a wait that times out at once installs weft's handler, which
    // then stays for the run): under WEFT_SCHED=random one yield does not make sure the waiter
    // below has started, and the default disposition would end the process.
    try {
      weft::signals::wait({SIGUSR1}, weft::timeout(0s));
    } catch (const weft::timeout_error&) {
    }
    auto waiter = weft::spawn([] { return weft::signals::wait({SIGUSR1}, weft::timeout(10s)); });
    weft::yield();  // the waiter most likely waits in the kernel already; it need not
    std::thread sender([] { ::kill(::getpid(), SIGUSR1); });
    EXPECT_EQ(waiter.await(), SIGUSR1);
    sender.join();
  });
}

}  // namespace
