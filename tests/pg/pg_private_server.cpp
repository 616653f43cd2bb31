// A PostgreSQL server of one's own (see pg_private_server.hpp).
#include "pg/pg_private_server.hpp"

#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace weft_pg_test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// Bump when the initdb options or settings change, so a stale template is not reused.
constexpr const char* template_version = "v1";
constexpr const char* default_bin_dir = "/usr/lib/postgresql/15/bin";
constexpr int port = 5432;  // no TCP: each instance has its own socket directory

struct runner {
  uid_t uid;
  gid_t gid;
};

// PostgreSQL refuses to run as root: then run it as the postgres system user.
runner pick_runner() {
  if (::geteuid() != 0) {
    return {::geteuid(), ::getegid()};
  }
  passwd* entry = ::getpwnam("postgres");
  if (entry == nullptr) {
    throw std::runtime_error(
        "private PostgreSQL server: running as root, but there is no `postgres` system user to "
        "run the server as (install the postgresql package: scripts/install-deps)");
  }
  return {entry->pw_uid, entry->pw_gid};
}

fs::path server_binaries() {
  const char* bin_override = std::getenv("WEFT_PG_BIN");
  fs::path bin = bin_override != nullptr ? bin_override : default_bin_dir;
  if (!fs::exists(bin / "initdb") || !fs::exists(bin / "postgres")) {
    throw std::runtime_error(
        "private PostgreSQL server: PostgreSQL 15 server binaries not found in " + bin.string() +
        " (initdb, postgres); install the postgresql package (scripts/install-deps does) or set "
        "WEFT_PG_BIN to the directory holding them");
  }
  return bin;
}

std::string read_tail(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream all;
  all << in.rdbuf();
  std::string text = all.str();
  return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
}

// fork + exec as the runner, output appended to log, in its own session (a signal to this
// process group must not reach it). cpus: the affinity the child gets, if set.
pid_t spawn_as(const runner& as, const std::vector<std::string>& arguments, const fs::path& log,
               const std::optional<cpu_set_t>& cpus = std::nullopt) {
  std::vector<char*> argv;
  for (const std::string& argument : arguments) {
    argv.push_back(const_cast<char*>(argument.c_str()));
  }
  argv.push_back(nullptr);
  int output = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (output < 0) {
    throw std::runtime_error("private PostgreSQL server: cannot open " + log.string());
  }
  bool drop = ::geteuid() == 0 && as.uid != 0;
  pid_t child = ::fork();
  if (child == 0) {
    // Only async-signal-safe calls until exec: the process may have threads.
    ::dup2(output, 1);
    ::dup2(output, 2);
    if (cpus.has_value()) {
      ::sched_setaffinity(0, sizeof(cpu_set_t), &*cpus);
    }
    if (drop && (::setgroups(1, &as.gid) != 0 || ::setgid(as.gid) != 0 || ::setuid(as.uid) != 0)) {
      ::_exit(126);
    }
    ::setsid();
    if (::chdir("/") != 0) {
      ::_exit(126);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(output);
  if (child < 0) {
    throw std::runtime_error("private PostgreSQL server: fork failed");
  }
  return child;
}

void run_to_end(const runner& as, const std::vector<std::string>& arguments, const fs::path& log) {
  pid_t child = spawn_as(as, arguments, log);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("private PostgreSQL server: " + arguments[0] + " failed (status " +
                             std::to_string(status) + "):\n" + read_tail(log));
  }
}

void give_to(const runner& as, const fs::path& path) {
  if (::geteuid() == 0 && ::chown(path.c_str(), as.uid, as.gid) != 0) {
    throw std::runtime_error("private PostgreSQL server: cannot chown " + path.string());
  }
}

// The template data dir, initdb'd once per machine (per runner uid) under an flock so parallel
// test processes do it once; never run, only copied.
fs::path template_data(const runner& as, const fs::path& bin) {
  fs::path base =
      fs::temp_directory_path() / ("weft-pg-15-private-template-" + std::string(template_version) +
                                   "-uid" + std::to_string(as.uid));
  fs::path ready = base / "READY";
  fs::path lock_path = base.string() + ".lock";
  int lock = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock < 0) {
    throw std::runtime_error("private PostgreSQL server: cannot open " + lock_path.string());
  }
  ::flock(lock, LOCK_EX);
  try {
    if (!fs::exists(ready)) {
      fs::remove_all(base);
      fs::create_directories(base);
      give_to(as, base);
      run_to_end(as,
                 {(bin / "initdb").string(), "-D", (base / "data").string(), "-U", "weft", "-A",
                  "trust", "--no-sync", "-E", "UTF8", "--locale=C", "--wal-segsize=1"},
                 base / "initdb.log");
      // A throwaway server: durability off, small memory, no TCP.
      std::ofstream config(base / "data" / "postgresql.conf", std::ios::app);
      config << "\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                "listen_addresses = ''\nshared_buffers = 16MB\nmax_connections = 60\n"
                "max_wal_size = 32MB\nmin_wal_size = 4MB\n";
      config.close();
      std::ofstream(ready) << "ok\n";
    }
  } catch (...) {
    ::flock(lock, LOCK_UN);
    ::close(lock);
    throw;
  }
  ::flock(lock, LOCK_UN);
  ::close(lock);
  return base / "data";
}

// The cores this process may not use (the others online), or every online core when it may use
// them all: where the server goes with server_on_other_cores.
cpu_set_t other_cores() {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ::sched_getaffinity(0, sizeof(mine), &mine);
  long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t others;
  cpu_set_t all;
  CPU_ZERO(&others);
  CPU_ZERO(&all);
  for (long cpu = 0; cpu < online && cpu < CPU_SETSIZE; ++cpu) {
    CPU_SET(static_cast<int>(cpu), &all);
    if (!CPU_ISSET(static_cast<int>(cpu), &mine)) {
      CPU_SET(static_cast<int>(cpu), &others);
    }
  }
  return CPU_COUNT(&others) > 0 ? others : all;
}

}  // namespace

private_server::private_server(private_server_options options) : options_(options) {
  fs::path bin = server_binaries();
  runner as = pick_runner();
  fs::path source = template_data(as, bin);
  char pattern[] = "/tmp/weft-pg-private-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) {
    throw std::runtime_error("private PostgreSQL server: mkdtemp failed");
  }
  directory_ = pattern;
  conninfo_ = "host=" + directory_ + " port=" + std::to_string(port) +
              " user=weft dbname=postgres connect_timeout=10";
  try {
    give_to(as, directory_);
    // As the runner, so the copy belongs to it and keeps the data dir's 0700.
    run_to_end(as, {"/bin/cp", "-a", source.string(), directory_ + "/data"},
               fs::path(directory_) / "copy.log");
    start();
  } catch (...) {
    remove_directory();
    throw;
  }
}

private_server::~private_server() {
  if (running()) {
    try {
      stop();
    } catch (const std::exception&) {
      // The directory goes all the same; a postmaster left running notices its data dir is gone.
    }
  }
  remove_directory();
}

void private_server::start() {
  if (running()) {
    throw std::logic_error("private_server::start: the server is already running; stop() it first");
  }
  fs::path bin = server_binaries();
  fs::path log = fs::path(directory_) / "server.log";
  std::optional<cpu_set_t> cpus;
  if (options_.server_on_other_cores) {
    cpus = other_cores();
  }
  pid_t child = spawn_as(pick_runner(),
                         {(bin / "postgres").string(), "-D", directory_ + "/data", "-k", directory_,
                          "-p", std::to_string(port)},
                         log, cpus);
  postmaster_ = child;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (PQping(conninfo_.c_str()) != PQPING_OK) {
    int status = 0;
    if (::waitpid(child, &status, WNOHANG) == child) {
      postmaster_ = -1;
      throw std::runtime_error("private PostgreSQL server: the server exited at start:\n" +
                               read_tail(log));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      stop();
      throw std::runtime_error(
          "private PostgreSQL server: the server did not accept connections within 60 s:\n" +
          read_tail(log));
    }
    std::this_thread::sleep_for(2ms);
  }
}

void private_server::stop() {
  if (!running()) {
    throw std::logic_error("private_server::stop: the server is not running; start() it first");
  }
  pid_t postmaster = postmaster_;
  postmaster_ = -1;
  // The postmaster cuts every backend (SIGQUIT to them, SIGKILL after 5 s) before it exits.
  ::kill(postmaster, SIGQUIT);
  int status = 0;
  while (::waitpid(postmaster, &status, 0) < 0 && errno == EINTR) {
  }
}

void private_server::remove_directory() noexcept {
  if (!directory_.empty()) {
    std::error_code ignored;
    fs::remove_all(directory_, ignored);
  }
}

}  // namespace weft_pg_test
