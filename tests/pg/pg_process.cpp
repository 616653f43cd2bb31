// See pg_process.hpp.
#include "pg/pg_process.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace weft_pg_test::process {

namespace fs = std::filesystem;

namespace {
constexpr const char* default_bin_dir = "/usr/lib/postgresql/15/bin";
}

runner pick_runner() {
  if (::geteuid() != 0) {
    return {::geteuid(), ::getegid()};
  }
  passwd* entry = ::getpwnam("postgres");
  if (entry == nullptr) {
    throw std::runtime_error(
        "weft pg server: running as root, but there is no `postgres` system user to run the "
        "PostgreSQL server as (install the postgresql package: scripts/install-deps)");
  }
  return {entry->pw_uid, entry->pw_gid};
}

fs::path server_binaries() {
  const char* bin_override = std::getenv("WEFT_PG_BIN");
  fs::path bin = bin_override != nullptr ? bin_override : default_bin_dir;
  if (!fs::exists(bin / "initdb") || !fs::exists(bin / "postgres")) {
    throw std::runtime_error(
        "weft pg server: PostgreSQL 15 server binaries not found in " + bin.string() +
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

pid_t spawn_as(const runner& as, const std::vector<std::string>& arguments, const fs::path& log,
               const fs::path& directory, const std::optional<cpu_set_t>& cpus) {
  std::vector<char*> argv;
  for (const std::string& argument : arguments) {
    argv.push_back(const_cast<char*>(argument.c_str()));
  }
  argv.push_back(nullptr);
  int output = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (output < 0) {
    throw std::runtime_error("weft pg server: cannot open " + log.string());
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
    if (::chdir(directory.c_str()) != 0) {
      ::_exit(126);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(output);
  if (child < 0) {
    throw std::runtime_error("weft pg server: fork failed");
  }
  return child;
}

void run_to_end(const runner& as, const std::vector<std::string>& arguments, const fs::path& log,
                const fs::path& directory) {
  pid_t child = spawn_as(as, arguments, log, directory);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("weft pg server: " + arguments[0] + " failed (status " +
                             std::to_string(status) + "):\n" + read_tail(log));
  }
}

void give_to(const runner& as, const fs::path& path) {
  if (::geteuid() == 0 && ::chown(path.c_str(), as.uid, as.gid) != 0) {
    throw std::runtime_error("weft pg server: cannot chown " + path.string());
  }
}

void initdb_throwaway(const runner& as, const fs::path& bin, const fs::path& base,
                      int max_connections) {
  run_to_end(as,
             {(bin / "initdb").string(), "-D", (base / "data").string(), "-U", "weft", "-A",
              "trust", "--no-sync", "-E", "UTF8", "--locale=C", "--wal-segsize=1"},
             base / "initdb.log", base);
  std::ofstream config(base / "data" / "postgresql.conf", std::ios::app);
  config << "\nfsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
            "listen_addresses = ''\nshared_buffers = 16MB\nmax_connections = "
         << max_connections << "\nmax_wal_size = 32MB\nmin_wal_size = 4MB\n";
}

}  // namespace weft_pg_test::process
