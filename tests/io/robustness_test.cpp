// Edges of the I/O layer: listeners out of file descriptors, zero-length reads and writes on
// every stream type, extreme time limits, and error messages that name what was wrong.
//
// The descriptor-exhaustion tests run the server in a forked child with a low RLIMIT_NOFILE
// (this process keeps its own limit, and its other tests their descriptors) and the clients
// here: the child reports what it saw through a pipe and its exit status, and every client
// checks that it was served.
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

// --- descriptor exhaustion -------------------------------------------------------------------

constexpr int client_count = 200;
constexpr rlim_t child_fd_limit = 64;
constexpr std::string_view served_line = "served\n";

void write_fd(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t written = ::write(fd, text.data(), text.size());
    if (written < 0 && errno == EINTR) {
      continue;
    }
    if (written <= 0) {
      return;
    }
    text.remove_prefix(static_cast<std::size_t>(written));
  }
}

// Reads up to and including '\n', or to end of file.
std::string read_line_fd(int fd) {
  std::string line;
  char byte = 0;
  while (::read(fd, &byte, 1) == 1) {
    line += byte;
    if (byte == '\n') {
      break;
    }
  }
  return line;
}

std::string read_rest_fd(int fd) {
  std::string all;
  std::array<char, 4096> buffer;
  ssize_t got = 0;
  while ((got = ::read(fd, buffer.data(), buffer.size())) > 0 || (got < 0 && errno == EINTR)) {
    if (got > 0) {
      all.append(buffer.data(), static_cast<std::size_t>(got));
    }
  }
  return all;
}

// Serves one connection: the client learns it was taken.
template <class Stream>
void serve(Stream& connection) {
  connection.write_all(served_line);
  connection.close();
}

// An acceptor with no limit, as a task: a named type, so that warm_up_type_checks can run the
// same task type once while descriptors are free.
template <class Listener>
struct accept_one {
  Listener* listener;
  auto operator()() const { return listener->accept(); }
};

// The server's part, in the child. Listener: tcp::listener or pipe::listener, made with
// out_of_fds = mode; all client_count clients are queued before this runs. Appends what it saw
// to report.
template <class Listener>
void serve_through_exhaustion(Listener& listener, weft::fd_exhaustion mode, std::string& report) {
  using stream_type = decltype(listener.accept());
  std::vector<stream_type> held;
  if (mode == weft::fd_exhaustion::report) {
    // Accept and keep every connection until the descriptors run out: accept says so.
    for (;;) {
      try {
        held.push_back(listener.accept(weft::timeout(10s)));
      } catch (const weft::io_error& error) {
        report += "error " + std::to_string(error.uv_code()) + " " + error.what() + "\n";
        break;
      }
    }
  } else {
    // Every client is queued, so an accept that waits can only be backing off.
    for (;;) {
      try {
        held.push_back(listener.accept(weft::timeout(300ms)));
      } catch (const weft::timeout_error&) {
        report += "waited\n";
        break;
      }
    }
  }
  report += "held " + std::to_string(held.size()) + "\n";
  std::size_t served = 0;
  if (mode == weft::fd_exhaustion::retry) {
    // An acceptor with no limit waits through the exhaustion and takes a connection by itself
    // once the held ones are closed below. (It tries first under fifo order; either order
    // must end with it served.)
    weft::task<stream_type> acceptor = weft::spawn(accept_one<Listener>{&listener});
    weft::yield();
    for (stream_type& connection : held) {
      serve(connection);
      ++served;
    }
    held.clear();
    stream_type first = std::move(acceptor.await(weft::timeout(10s)));
    serve(first);
    ++served;
  } else {
    for (stream_type& connection : held) {
      serve(connection);
      ++served;
    }
    held.clear();
  }
  // The descriptors are free again: the same listener takes every connection still queued.
  while (served < client_count) {
    stream_type connection = listener.accept(weft::timeout(10s));
    serve(connection);
    ++served;
  }
  report += "served " + std::to_string(served) + "\n";
}

struct child_outcome {
  std::string report;    // what the child wrote after its first line
  int exit_status = -1;  // -1: killed by a signal
  int clients_served = 0;
  int clients_dropped = 0;  // end of file or reset before being served
};

// Forks a server under child_fd_limit. server(ready_fd, go_fd, report) runs in the child: it
// listens, writes one line to ready_fd (what connect needs), waits for a byte on go_fd, serves,
// and appends what it saw to report. connect(line) runs here for each client and returns a
// connected socket. Returns what the child reported and what the clients saw.
child_outcome run_exhaustion(
    const std::function<void(int ready_fd, int go_fd, std::string& report)>& server,
    const std::function<int(const std::string& ready_line)>& connect) {
  int to_parent[2];
  int go[2];
  if (::pipe2(to_parent, O_CLOEXEC) != 0 || ::pipe2(go, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << std::strerror(errno);
    return {};
  }
  pid_t child = ::fork();
  if (child == 0) {
    ::close(to_parent[0]);
    ::close(go[1]);
    ::alarm(60);  // a wedged child must not hang the suite
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = child_fd_limit;
    int code = 0;
    std::string report;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      report = "setrlimit failed\n";
      code = 3;
    } else {
      try {
        server(to_parent[1], go[0], report);
      } catch (const std::exception& error) {
        report += std::string("uncaught: ") + error.what() + "\n";
        code = 2;
      }
    }
    write_fd(to_parent[1], report);
    ::_exit(code);
  }
  ::close(to_parent[1]);
  ::close(go[0]);
  child_outcome outcome;
  std::string ready = read_line_fd(to_parent[0]);
  std::vector<int> clients;
  if (!ready.empty() && ready.back() == '\n') {
    ready.pop_back();
    for (int index = 0; index < client_count; ++index) {
      int client = connect(ready);
      if (client < 0) {
        ADD_FAILURE() << "client " << index << " could not connect: " << std::strerror(errno);
        break;
      }
      clients.push_back(client);
    }
  }
  write_fd(go[1], "g");
  ::close(go[1]);
  // Every client waits for its line, all at once, with one generous deadline.
  std::vector<std::string> received(clients.size());
  std::vector<bool> done(clients.size(), false);
  std::size_t open = clients.size();
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (open > 0 && std::chrono::steady_clock::now() < deadline) {
    std::vector<pollfd> waiting;
    std::vector<std::size_t> which;
    for (std::size_t index = 0; index < clients.size(); ++index) {
      if (!done[index]) {
        waiting.push_back({clients[index], POLLIN, 0});
        which.push_back(index);
      }
    }
    if (::poll(waiting.data(), waiting.size(), 1000) <= 0) {
      continue;
    }
    for (std::size_t slot = 0; slot < waiting.size(); ++slot) {
      if (waiting[slot].revents == 0) {
        continue;
      }
      std::size_t index = which[slot];
      std::array<char, 64> buffer;
      ssize_t got = ::read(clients[index], buffer.data(), buffer.size());
      if (got > 0) {
        received[index].append(buffer.data(), static_cast<std::size_t>(got));
      }
      if (got <= 0 || received[index].size() >= served_line.size()) {
        done[index] = true;
        --open;
      }
    }
  }
  for (std::size_t index = 0; index < clients.size(); ++index) {
    if (received[index] == served_line) {
      ++outcome.clients_served;
    } else if (done[index]) {
      ++outcome.clients_dropped;
    }
    ::close(clients[index]);
  }
  outcome.report = read_rest_fd(to_parent[0]);
  EXPECT_EQ(outcome.report.find("warm-up:"), std::string::npos) << outcome.report;
  ::close(to_parent[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  outcome.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return outcome;
}

void wait_for_go(int go_fd) {
  char byte = 0;
  while (::read(go_fd, &byte, 1) < 0 && errno == EINTR) {
  }
}

int connect_tcp(const std::string& port) {
  int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(std::stoi(port)));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(client);
    return -1;
  }
  return client;
}

int connect_unix(const std::string& path) {
  int client = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  if (::connect(client, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    ::close(client);
    return -1;
  }
  return client;
}

// Runs, while descriptors are still free, the checks that running out of them would otherwise
// meet first. Under the asan preset UBSan checks a polymorphic object's vptr by reading memory
// through a pipe it opens (IsAccessibleMemoryRange) the first time it meets a (vptr, static
// type) pair; out of descriptors that pipe fails and it reports a false "invalid vptr" and stops
// the process. Pairs it has checked stay in its type cache, so the exhaustion meets only known
// ones: an accept that waits and times out (the listener's waiter, which the back-off shares,
// and its deadline), an io_error thrown and read as the report path does, and the retry path's
// acceptor task taking a connection (its task type first stores a result when a descriptor has
// just been freed and the accept took it). connect_self(): a client socket connected to
// listener. Call before the ready line, so that no client of the test can be queued yet.
template <class Listener>
void warm_up_type_checks(Listener& listener, const std::function<int()>& connect_self,
                         std::string& report) {
  try {
    listener.accept(weft::timeout(1ms));
    report += "warm-up: accept took a connection nobody made\n";
  } catch (const weft::timeout_error&) {
  }
  try {
    throw weft::io_error(UV_EMFILE, "accept", "warm-up", "warm-up");
  } catch (const weft::io_error& error) {
    if (error.uv_code() != UV_EMFILE || std::string_view(error.what()).empty()) {
      report += "warm-up: io_error lost its code or message\n";
    }
  }
  int client = connect_self();
  if (client < 0) {
    report += std::string("warm-up: connect failed: ") + std::strerror(errno) + "\n";
    return;
  }
  auto acceptor = weft::spawn(accept_one<Listener>{&listener});
  auto connection = std::move(acceptor.await(weft::timeout(10s)));
  serve(connection);
  if (read_line_fd(client) != served_line) {
    report += "warm-up: the connection was not served\n";
  }
  ::close(client);
}

// The server's run in the child (no gtest there: what it saw goes into report).
void run_tcp_server(int ready_fd, int go_fd, std::string& report, weft::fd_exhaustion mode) {
  weft::scheduler scheduler(weft_test::fifo_options());
  scheduler.run([&] {
    weft::tcp::listen_options options;
    options.out_of_fds = mode;
    auto listener = weft::tcp::listener::listen("127.0.0.1", 0, options);
    report += "port " + std::to_string(listener.port()) + "\n";
    warm_up_type_checks(
        listener, [&listener] { return connect_tcp(std::to_string(listener.port())); }, report);
    write_fd(ready_fd, std::to_string(listener.port()) + "\n");
    wait_for_go(go_fd);
    serve_through_exhaustion(listener, mode, report);
  });
  report += "live " + std::to_string(scheduler.stats().live_coroutines) + "\n";
}

void run_pipe_server(int ready_fd, int go_fd, std::string& report, const std::string& path,
                     weft::fd_exhaustion mode) {
  weft::scheduler scheduler(weft_test::fifo_options());
  scheduler.run([&] {
    weft::pipe::listen_options options;
    options.out_of_fds = mode;
    auto listener = weft::pipe::listener::listen(path, options);
    warm_up_type_checks(
        listener, [&path] { return connect_unix(path); }, report);
    write_fd(ready_fd, path + "\n");
    wait_for_go(go_fd);
    serve_through_exhaustion(listener, mode, report);
  });
  report += "live " + std::to_string(scheduler.stats().live_coroutines) + "\n";
}

// "held N" from the report, or -1.
int held_count(const std::string& report) {
  std::size_t at = report.find("held ");
  return at == std::string::npos ? -1 : std::stoi(report.substr(at + 5));
}

TEST(IoRobustness, TcpListenerReportsFdExhaustionAndAcceptsAgainOnceDescriptorsAreFree) {
  child_outcome outcome = run_exhaustion(
      [](int ready_fd, int go_fd, std::string& report) {
        run_tcp_server(ready_fd, go_fd, report, weft::fd_exhaustion::report);
      },
      connect_tcp);
  EXPECT_EQ(outcome.exit_status, 0) << outcome.report;
  std::size_t at = outcome.report.find("port ");
  ASSERT_NE(at, std::string::npos) << outcome.report;
  std::string port = outcome.report.substr(at + 5, outcome.report.find('\n', at) - at - 5);
  EXPECT_NE(outcome.report.find("error " + std::to_string(UV_EMFILE) + " accept 127.0.0.1:" + port +
                                ": too many open files (EMFILE); close descriptors or raise "
                                "ulimit -n\n"),
            std::string::npos)
      << outcome.report;
  int held = held_count(outcome.report);
  EXPECT_GT(held, 0) << outcome.report;
  EXPECT_LT(held, static_cast<int>(child_fd_limit)) << outcome.report;
  EXPECT_NE(outcome.report.find("served 200\nlive 0\n"), std::string::npos) << outcome.report;
  EXPECT_EQ(outcome.clients_served, client_count) << "no queued connection may be lost";
  EXPECT_EQ(outcome.clients_dropped, 0);
}

TEST(IoRobustness, TcpListenerRetriesThroughFdExhaustionWhenAskedTo) {
  child_outcome outcome = run_exhaustion(
      [](int ready_fd, int go_fd, std::string& report) {
        run_tcp_server(ready_fd, go_fd, report, weft::fd_exhaustion::retry);
      },
      connect_tcp);
  EXPECT_EQ(outcome.exit_status, 0) << outcome.report;
  EXPECT_NE(outcome.report.find("waited\n"), std::string::npos) << outcome.report;
  int held = held_count(outcome.report);
  EXPECT_GT(held, 0) << outcome.report;
  EXPECT_LT(held, static_cast<int>(child_fd_limit)) << outcome.report;
  EXPECT_NE(outcome.report.find("served 200\nlive 0\n"), std::string::npos) << outcome.report;
  EXPECT_EQ(outcome.clients_served, client_count);
  EXPECT_EQ(outcome.clients_dropped, 0);
}

TEST(IoRobustness, UnixListenerReportsFdExhaustionAndAcceptsAgain) {
  weft_test::temporary_directory directory;
  const std::string path = directory / "exhaust.sock";
  child_outcome outcome = run_exhaustion(
      [&](int ready_fd, int go_fd, std::string& report) {
        run_pipe_server(ready_fd, go_fd, report, path, weft::fd_exhaustion::report);
      },
      connect_unix);
  EXPECT_EQ(outcome.exit_status, 0) << outcome.report;
  EXPECT_NE(outcome.report.find("error " + std::to_string(UV_EMFILE) + " accept " + path +
                                ": too many open files (EMFILE); close descriptors or raise "
                                "ulimit -n\n"),
            std::string::npos)
      << outcome.report;
  EXPECT_NE(outcome.report.find("served 200\nlive 0\n"), std::string::npos) << outcome.report;
  EXPECT_EQ(outcome.clients_served, client_count);
  EXPECT_EQ(outcome.clients_dropped, 0);
}

TEST(IoRobustness, UnixListenerRetriesThroughFdExhaustionWhenAskedTo) {
  weft_test::temporary_directory directory;
  const std::string path = directory / "retry.sock";
  child_outcome outcome = run_exhaustion(
      [&](int ready_fd, int go_fd, std::string& report) {
        run_pipe_server(ready_fd, go_fd, report, path, weft::fd_exhaustion::retry);
      },
      connect_unix);
  EXPECT_EQ(outcome.exit_status, 0) << outcome.report;
  EXPECT_NE(outcome.report.find("waited\n"), std::string::npos) << outcome.report;
  EXPECT_NE(outcome.report.find("served 200\nlive 0\n"), std::string::npos) << outcome.report;
  EXPECT_EQ(outcome.clients_served, client_count);
  EXPECT_EQ(outcome.clients_dropped, 0);
}

TEST(IoRobustness, ARetryingAcceptStillEndsWhenTheListenerCloses) {
  // With the retry option on, an acceptor that waits (here for a connection that never comes)
  // is still woken by close().
  run_clean([] {
    weft::tcp::listen_options options;
    options.out_of_fds = weft::fd_exhaustion::retry;
    auto listener = weft::tcp::listener::listen("127.0.0.1", 0, options);
    const std::string address = listener.local_address();
    auto acceptor = weft::spawn([&] {
      try {
        listener.accept();
        ADD_FAILURE() << "nothing connected";
      } catch (const weft::io_error& error) {
        EXPECT_EQ(error.uv_code(), UV_ECANCELED);
        EXPECT_EQ(std::string(error.what()), "accept " + address + ": the listener is closed");
      }
    });
    weft::yield();
    listener.close();
    acceptor.await();
    EXPECT_FALSE(listener.is_open());
  });
}

// --- zero-length reads and writes ------------------------------------------------------------

// Every zero-length call on a connected stream does nothing and returns at once, and the stream
// still carries data afterwards.
void check_zero_length_calls(weft::stream& reader, weft::stream& writer) {
  std::span<char> nothing;
  EXPECT_EQ(reader.read_some(nothing, weft::timeout(10s)), 0u);
  reader.read_exactly(nothing, weft::timeout(10s));  // nothing buffered: no memcpy from null
  reader.read_exactly(nothing, 0, weft::timeout(10s));
  writer.write_all("", weft::timeout(10s));
  writer.write_all(std::string_view(), weft::timeout(10s));
  std::array<std::string_view, 2> empties{std::string_view(), std::string_view("")};
  writer.writev(empties, weft::timeout(10s));
  EXPECT_EQ(reader.buffered(), 0u) << "an empty write sends nothing";
  writer.write_all("abc", weft::timeout(10s));
  std::array<char, 3> bytes{};
  reader.read_exactly(std::span<char>(bytes.data(), 1), weft::timeout(10s));
  // Something buffered now: the empty reads still take nothing.
  reader.read_exactly(nothing, weft::timeout(10s));
  EXPECT_EQ(reader.read_some(nothing, weft::timeout(10s)), 0u);
  reader.read_exactly(std::span<char>(bytes.data() + 1, 2), weft::timeout(10s));
  EXPECT_EQ(std::string_view(bytes.data(), 3), "abc");
}

TEST(IoRobustness, ZeroLengthReadsAndWritesAreNoOpsOnTcp) {
  run_clean([] {
    auto listener = weft::tcp::listener::listen("127.0.0.1", 0);
    auto client = weft::tcp::connect("127.0.0.1", listener.port(), weft::timeout(10s));
    auto server = listener.accept(weft::timeout(10s));
    check_zero_length_calls(server, client);
    check_zero_length_calls(client, server);
  });
}

TEST(IoRobustness, ZeroLengthReadsAndWritesAreNoOpsOnPipes) {
  run_clean([] {
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    auto left = weft::pipe::open(pair[0]);
    auto right = weft::pipe::open(pair[1]);
    check_zero_length_calls(left, right);
    check_zero_length_calls(right, left);
  });
}

TEST(IoRobustness, ZeroLengthReadsAndWritesAreNoOpsOnATty) {
  int master = -1;
  int slave = -1;
  if (::openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) {
    GTEST_SKIP() << "openpty failed (no /dev/ptmx here?): " << std::strerror(errno);
  }
  run_clean([&] {
    auto terminal = weft::tty::open(slave);
    terminal.set_raw(true);  // no echo, no line discipline: bytes pass as written
    std::span<char> nothing;
    EXPECT_EQ(terminal.read_some(nothing, weft::timeout(10s)), 0u);
    terminal.read_exactly(nothing, weft::timeout(10s));
    terminal.write_all("", weft::timeout(10s));
    ASSERT_EQ(::write(master, "x", 1), 1);
    char byte = 0;
    terminal.read_exactly(std::span<char>(&byte, 1), weft::timeout(10s));
    EXPECT_EQ(byte, 'x');
    terminal.close();
  });
  ::close(slave);
  ::close(master);
}

TEST(IoRobustness, ZeroLengthReadsAndWritesAreNoOpsOnFiles) {
  weft_test::temporary_directory directory;
  run_clean([&] {
    auto file = weft::file::open(directory / "data", O_RDWR | O_CREAT, 0600);
    std::span<char> nothing;
    file.write("", weft::timeout(10s));
    file.write_at(0, std::string_view(), weft::timeout(10s));
    EXPECT_EQ(file.position(), 0u);
    EXPECT_EQ(file.read(nothing, weft::timeout(10s)), 0u);
    EXPECT_EQ(file.read_at(0, nothing, weft::timeout(10s)), 0u);
    file.write("abc", weft::timeout(10s));
    EXPECT_EQ(file.read_at(1, nothing, weft::timeout(10s)), 0u);
    EXPECT_EQ(file.stat().size, 3u);
    file.close();
  });
}

TEST(IoRobustness, AnEmptyUdpDatagramIsARealDatagram) {
  run_clean([] {
    auto receiver = weft::udp::socket::bind("127.0.0.1", 0);
    auto sender = weft::udp::socket::bind("127.0.0.1", 0);
    sender.send_to(std::string_view(), "127.0.0.1", receiver.port(), weft::timeout(10s));
    sender.send_to("after", "127.0.0.1", receiver.port(), weft::timeout(10s));
    // Into an empty buffer: the empty datagram arrives whole, and nothing is copied.
    weft::udp::datagram empty = receiver.recv_from(std::span<char>(), weft::timeout(10s));
    EXPECT_EQ(empty.bytes, 0u);
    EXPECT_FALSE(empty.truncated);
    EXPECT_EQ(empty.peer, sender.local_address());
    // A non-empty datagram into an empty buffer: received, and reported truncated.
    weft::udp::datagram cut = receiver.recv_from(std::span<char>(), weft::timeout(10s));
    EXPECT_EQ(cut.bytes, 0u);
    EXPECT_TRUE(cut.truncated);
  });
}

// --- extreme time limits -------------------------------------------------------------------

TEST(IoRobustness, HugeTimeLimitsMeanNeverAndNegativeOnesHaveExpired) {
  run_clean([] {
    auto listener = weft::tcp::listener::listen("127.0.0.1", 0);
    auto client =
        weft::tcp::connect("127.0.0.1", listener.port(), weft::timeout(std::chrono::hours::max()));
    auto server = listener.accept(weft::timeout(std::chrono::nanoseconds::max()));
    client.write_all("x", weft::timeout(std::chrono::duration<double>(1e300)));
    char byte = 0;
    server.read_exactly(std::span<char>(&byte, 1), weft::timeout(std::chrono::hours::max()));
    EXPECT_EQ(byte, 'x');
    // Already expired: fails at once, and says so rather than "after -N ms".
    try {
      server.read_some(std::span<char>(&byte, 1), weft::timeout(std::chrono::hours::min()));
      ADD_FAILURE() << "nothing was sent";
    } catch (const weft::timeout_error& error) {
      EXPECT_NE(std::string(error.what()).find("had already passed"), std::string::npos)
          << error.what();
    }
    try {
      listener.accept(weft::timeout(-5s));
      ADD_FAILURE() << "nobody connected";
    } catch (const weft::timeout_error& error) {
      EXPECT_EQ(std::string(error.what()),
                "weft: accept " + listener.local_address() +
                    " timed out: its deadline had already passed 5000 ms before the wait began");
    }
    weft::tcp::listen_options retrying;
    retrying.out_of_fds = weft::fd_exhaustion::retry;
    auto patient = weft::tcp::listener::listen("127.0.0.1", 0, retrying);
    EXPECT_THROW(patient.accept(weft::timeout(std::chrono::nanoseconds::min())),
                 weft::timeout_error);
    auto late =
        weft::tcp::connect("127.0.0.1", patient.port(), weft::timeout(std::chrono::seconds::max()));
    auto taken = patient.accept(weft::timeout(std::chrono::hours::max()));
    EXPECT_TRUE(taken.is_open());
  });
}

// --- child processes: errors that name what was wrong ----------------------------------------

TEST(IoRobustness, AMissingWorkingDirectoryIsNamedNotTheProgram) {
  run_clean([] {
    try {
      weft::subprocess::exec({"true"}, {.cwd = "/nonexistent"});
      ADD_FAILURE() << "the working directory does not exist";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_ENOENT);
      EXPECT_STREQ(error.what(),
                   "spawn true: working directory /nonexistent: no such file or directory");
    }
    try {
      weft::subprocess::spawn({"true"}, {.cwd = "/etc/hostname"});
      ADD_FAILURE() << "the working directory is a file";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_ENOTDIR);
      EXPECT_STREQ(error.what(), "spawn true: working directory /etc/hostname: not a directory");
    }
    // The directory is fine: the program is at fault, and still named as before.
    try {
      weft::subprocess::exec({"nosuch-program"}, {.cwd = "/"});
      ADD_FAILURE() << "no such program";
    } catch (const weft::io_error& error) {
      EXPECT_STREQ(error.what(), "spawn nosuch-program: no such file or directory");
    }
  });
}

TEST(IoRobustness, AProgramPathNamesWhatIsWrongWithIt) {
  weft_test::temporary_directory directory;
  run_clean([&] {
    const std::string missing = directory / "missing-tool";
    try {
      weft::subprocess::exec({missing});
      ADD_FAILURE() << "no such program";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_ENOENT);
      EXPECT_EQ(std::string(error.what()),
                "spawn " + missing + ": program " + missing + ": no such file or directory");
    }
    // A script whose interpreter is missing: execve says ENOENT, though the file is there.
    const std::string script = directory / "script";
    {
      auto file = weft::file::open(script, O_WRONLY | O_CREAT, 0755);
      file.write("#!/nonexistent/interpreter\n");
      file.close();
    }
    try {
      weft::subprocess::exec({script});
      ADD_FAILURE() << "the interpreter does not exist";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_ENOENT);
      EXPECT_EQ(std::string(error.what()),
                "spawn " + script + ": program " + script +
                    ": its interpreter (the #! line) or its dynamic loader was not found: no such "
                    "file or directory");
    }
    // Not executable; and a relative path is resolved in the working directory given.
    ASSERT_EQ(::chmod(script.c_str(), 0644), 0);
    try {
      weft::subprocess::exec({"./script"}, {.cwd = directory.path()});
      ADD_FAILURE() << "not executable";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_EACCES);
      EXPECT_EQ(std::string(error.what()), "spawn ./script: program " + directory.path() +
                                               "/./script is not executable: permission denied");
    }
  });
}

TEST(IoRobustness, ChildProcessCallsOutsideACoroutineNameTheCallMade) {
  try {
    weft::subprocess::exec({"true"});
    ADD_FAILURE() << "outside a coroutine";
  } catch (const std::logic_error& error) {
    EXPECT_EQ(std::string(error.what())
                  .rfind("weft: weft::subprocess::exec called outside a coroutine", 0),
              0u)
        << error.what();
  }
  try {
    weft::subprocess::spawn({"true"});
    ADD_FAILURE() << "outside a coroutine";
  } catch (const std::logic_error& error) {
    EXPECT_EQ(std::string(error.what())
                  .rfind("weft: weft::subprocess::spawn called outside a coroutine", 0),
              0u)
        << error.what();
  }
  run_clean([] {
    try {
      weft::subprocess::exec({});
      ADD_FAILURE() << "argv is empty";
    } catch (const std::logic_error& error) {
      EXPECT_EQ(std::string(error.what()).rfind("weft::subprocess::exec: argv is empty", 0), 0u)
          << error.what();
    }
  });
}

}  // namespace
