// Starting and stopping the tests' PostgreSQL server (see pg_server.hpp).
#include "pg/pg_server.hpp"

#include "pg/pg_process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace weft_pg_test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Bump when the initdb options or settings change, so a stale data dir is not reused.
constexpr const char* layout_version = "v2";
constexpr int port = 5432;

using process::give_to;
using process::pick_runner;
using process::read_tail;
using process::runner;
using process::spawn_as;

// The shared server's home: <base>/data (initdb'd once), the socket, and two lock files:
// control.lock serializes starting and stopping; users.lock is held shared by every process
// using the server, so the last one to leave can tell (an exclusive try-lock succeeds) and stop
// it. The kernel drops a crashed process's locks, so a crash never blocks a later stop.
struct shared_layout {
  fs::path base;
  fs::path data() const { return base / "data"; }
  fs::path ready() const { return base / "READY"; }
  fs::path control_lock() const { return base.string() + ".control.lock"; }
  fs::path users_lock() const { return base.string() + ".users.lock"; }
  fs::path log() const { return base / "server.log"; }
};

int open_lock(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw std::runtime_error("weft pg tests: cannot open the lock file " + path.string());
  }
  return fd;
}

// Holds an flock for a scope (closing the fd would drop the lock: the fd stays open).
struct scoped_flock {
  int fd;
  scoped_flock(int lock_fd, int operation) : fd(lock_fd) { ::flock(fd, operation); }
  ~scoped_flock() { ::flock(fd, LOCK_UN); }
};

void initdb_once(const runner& as, const fs::path& bin, const shared_layout& layout) {
  if (fs::exists(layout.ready())) {
    return;
  }
  fs::remove_all(layout.base);
  fs::create_directories(layout.base);
  give_to(as, layout.base);
  process::initdb_throwaway(as, bin, layout.base, 100);
  std::ofstream(layout.ready()) << "ok\n";
}

std::string conninfo_for(const shared_layout& layout) {
  return "host=" + layout.base.string() + " port=" + std::to_string(port) +
         " user=weft dbname=postgres connect_timeout=10";
}

bool answers(const std::string& conninfo) { return PQping(conninfo.c_str()) == PQPING_OK; }

class server {
 public:
  server() {
    fs::path bin = process::server_binaries();
    runner as = pick_runner();
    layout_.base = fs::temp_directory_path() /
                   ("weft-pg-15-" + std::string(layout_version) + "-uid" + std::to_string(as.uid));
    conninfo_ = conninfo_for(layout_);
    control_fd_ = open_lock(layout_.control_lock());
    users_fd_ = open_lock(layout_.users_lock());
    scoped_flock control(control_fd_, LOCK_EX);
    if (!answers(conninfo_)) {
      initdb_once(as, bin, layout_);
      // Its own session: the server outlives this process while other test processes use it,
      // and a signal to this test's process group must not reach it.
      pid_t child = spawn_as(as,
                             {(bin / "postgres").string(), "-D", layout_.data().string(), "-k",
                              layout_.base.string(), "-p", std::to_string(port)},
                             layout_.log(), layout_.base);
      wait_ready(child);
    }
    ::flock(users_fd_, LOCK_SH);
  }

  ~server() {
    ::flock(users_fd_, LOCK_UN);
    {
      scoped_flock control(control_fd_, LOCK_EX);
      if (::flock(users_fd_, LOCK_EX | LOCK_NB) == 0) {
        stop();  // nobody else uses it
        ::flock(users_fd_, LOCK_UN);
      }
    }
    ::close(users_fd_);
    ::close(control_fd_);
  }

  const std::string& conninfo() const { return conninfo_; }
  std::string socket_directory() const { return layout_.base.string(); }

 private:
  void wait_ready(pid_t child) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (!answers(conninfo_)) {
      int status = 0;
      if (::waitpid(child, &status, WNOHANG) == child) {
        throw std::runtime_error("weft pg tests: the PostgreSQL server exited at start:\n" +
                                 read_tail(layout_.log()));
      }
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error(
            "weft pg tests: the PostgreSQL server did not accept connections within 60 s:\n" +
            read_tail(layout_.log()));
      }
      std::this_thread::sleep_for(5ms);
    }
  }

  // Fast shutdown, then wait for the postmaster to remove its pid file (it may not be our
  // child: another test process may have started it).
  void stop() {
    fs::path pid_file = layout_.data() / "postmaster.pid";
    std::ifstream in(pid_file);
    pid_t pid = 0;
    if (!(in >> pid) || pid <= 0) {
      return;
    }
    if (::kill(pid, SIGINT) != 0) {
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (fs::exists(pid_file) && std::chrono::steady_clock::now() < deadline) {
      ::waitpid(pid, nullptr, WNOHANG);  // reaps it if this process started it
      std::this_thread::sleep_for(2ms);
    }
    ::waitpid(pid, nullptr, WNOHANG);
  }

  shared_layout layout_;
  std::string conninfo_;
  int control_fd_ = -1;
  int users_fd_ = -1;
};

std::unique_ptr<server> started;
std::string start_failure;
std::string started_socket_directory;

server& the_server() {
  if (started == nullptr) {
    if (!start_failure.empty()) {
      throw std::runtime_error(start_failure);
    }
    try {
      started = std::make_unique<server>();
      started_socket_directory = started->socket_directory();
    } catch (const std::exception& failure) {
      start_failure = failure.what();
      throw;
    }
  }
  return *started;
}

// Leaves (and, as the last user, stops) the server when the test program ends.
class stop_server final : public ::testing::Environment {
 public:
  void TearDown() override { started.reset(); }
};

[[maybe_unused]] ::testing::Environment* const registered =
    ::testing::AddGlobalTestEnvironment(new stop_server);

}  // namespace

std::size_t open_fd_count() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/fd")) {
    ++count;
  }
  return count;
}

const std::string& conninfo() { return the_server().conninfo(); }

const std::string& socket_directory() {
  the_server();
  return started_socket_directory;
}

std::string url() {
  std::string encoded;
  for (char c : socket_directory()) {
    encoded += c == '/' ? std::string("%2F") : std::string(1, c);
  }
  return "postgresql://weft@" + encoded + ":" + std::to_string(port) + "/postgres";
}

}  // namespace weft_pg_test
