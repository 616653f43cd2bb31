// A PostgreSQL server of one's own (see pg_private_server.hpp).
#include "pg/pg_private_server.hpp"

#include "pg/pg_process.hpp"

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
constexpr int port = 5432;  // no TCP: each instance has its own socket directory

using process::give_to;
using process::pick_runner;
using process::read_tail;
using process::run_to_end;
using process::runner;
using process::server_binaries;
using process::spawn_as;

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
      process::initdb_throwaway(as, bin, base, 60);
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
               fs::path(directory_) / "copy.log", "/");
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
                         log, "/", cpus);
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

std::string private_server::log_tail() const {
  return read_tail(fs::path(directory_) / "server.log");
}

void private_server::remove_directory() noexcept {
  if (!directory_.empty()) {
    std::error_code ignored;
    fs::remove_all(directory_, ignored);
  }
}

}  // namespace weft_pg_test
