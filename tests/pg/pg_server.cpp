// Starting and stopping the tests' PostgreSQL server (see pg_server.hpp).
#include "pg/pg_server.hpp"

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
constexpr const char* default_bin_dir = "/usr/lib/postgresql/15/bin";
constexpr int port = 5432;

struct runner {
  uid_t uid;
  gid_t gid;
  std::string name;
};

// PostgreSQL refuses to run as root: then run it as the postgres system user.
runner pick_runner() {
  if (::geteuid() != 0) {
    return {::geteuid(), ::getegid(), "current user"};
  }
  passwd* entry = ::getpwnam("postgres");
  if (entry == nullptr) {
    throw std::runtime_error(
        "weft pg tests: running as root, but there is no `postgres` system user to run the "
        "PostgreSQL server as (install the postgresql package: scripts/install-deps)");
  }
  return {entry->pw_uid, entry->pw_gid, "postgres"};
}

std::string read_tail(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  std::string text = all.str();
  return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
}

// fork + exec as the runner, output to log; returns the child's pid.
pid_t spawn_as(const runner& as, const std::vector<std::string>& arguments, const fs::path& log,
               const fs::path& directory) {
  std::vector<char*> argv;
  for (const std::string& argument : arguments) {
    argv.push_back(const_cast<char*>(argument.c_str()));
  }
  argv.push_back(nullptr);
  int output = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (output < 0) {
    throw std::runtime_error("weft pg tests: cannot open " + log.string());
  }
  bool drop = ::geteuid() == 0 && as.uid != 0;
  pid_t child = ::fork();
  if (child == 0) {
    // Only async-signal-safe calls until exec: the test process may have threads.
    ::dup2(output, 1);
    ::dup2(output, 2);
    if (drop && (::setgroups(1, &as.gid) != 0 || ::setgid(as.gid) != 0 || ::setuid(as.uid) != 0)) {
      ::_exit(126);
    }
    ::setsid();
    if (::chdir(directory.c_str()) != 0) {
      ::_exit(126);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(output);
  if (child < 0) {
    throw std::runtime_error("weft pg tests: fork failed");
  }
  return child;
}

void run_to_end(const runner& as, const std::vector<std::string>& arguments, const fs::path& log,
                const fs::path& directory) {
  pid_t child = spawn_as(as, arguments, log, directory);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("weft pg tests: " + arguments[0] + " failed (status " +
                             std::to_string(status) + "):\n" + read_tail(log));
  }
}

void give_to(const runner& as, const fs::path& path) {
  if (::geteuid() == 0 && ::chown(path.c_str(), as.uid, as.gid) != 0) {
    throw std::runtime_error("weft pg tests: cannot chown " + path.string());
  }
}

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
  run_to_end(as,
             {(bin / "initdb").string(), "-D", layout.data().string(), "-U", "weft", "-A", "trust",
              "--no-sync", "-E", "UTF8", "--locale=C", "--wal-segsize=1"},
             layout.base / "initdb.log", layout.base);
  // Settings for a throwaway server: durability off, small memory, no TCP.
  std::ofstream config(layout.data() / "postgresql.conf", std::ios::app);
  config << "\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
            "listen_addresses = ''\nshared_buffers = 16MB\nmax_connections = 100\n"
            "max_wal_size = 32MB\nmin_wal_size = 4MB\n";
  config.close();
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
    const char* bin_override = std::getenv("WEFT_PG_BIN");
    fs::path bin = bin_override != nullptr ? bin_override : default_bin_dir;
    if (!fs::exists(bin / "initdb") || !fs::exists(bin / "postgres")) {
      throw std::runtime_error(
          "weft pg tests: PostgreSQL 15 server binaries not found in " + bin.string() +
          " (initdb, postgres); install the postgresql package (scripts/install-deps does) or "
          "set WEFT_PG_BIN to the directory holding them");
    }
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
