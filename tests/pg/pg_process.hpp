// Running the PostgreSQL server's programs for the test fixtures (pg_server.cpp, the shared
// server; pg_private_server.cpp, servers of one's own): who runs them, where the binaries are,
// fork+exec with a log, and the initdb of a throwaway data dir. Blocking; no GoogleTest (the
// bench programs link it too). Failures are std::runtime_error starting with "weft pg server:".
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace weft_pg_test::process {

// Who runs the server: this process's user, or, as root (PostgreSQL refuses root), the
// `postgres` system user.
struct runner {
  uid_t uid;
  gid_t gid;
};
runner pick_runner();

// The directory holding initdb and postgres: $WEFT_PG_BIN or Debian's PostgreSQL 15. Throws,
// naming the package to install, when they are missing.
std::filesystem::path server_binaries();

// The last 2000 characters of a log, for error messages.
std::string read_tail(const std::filesystem::path& path);

// fork + exec of arguments as runner, in its own session (a signal to the caller's process
// group must not reach it), output appended to log, working directory directory, pinned to cpus
// if given. Returns the child's pid.
pid_t spawn_as(const runner& as, const std::vector<std::string>& arguments,
               const std::filesystem::path& log, const std::filesystem::path& directory,
               const std::optional<cpu_set_t>& cpus = std::nullopt);
// spawn_as and wait; throws with the log's tail unless it exited 0.
void run_to_end(const runner& as, const std::vector<std::string>& arguments,
                const std::filesystem::path& log, const std::filesystem::path& directory);
// chown to runner when running as root (so the server may write there).
void give_to(const runner& as, const std::filesystem::path& path);

// initdb of base/data (user weft, trust authentication, no TCP) with throwaway settings:
// durability off, small memory, at most max_connections sessions.
void initdb_throwaway(const runner& as, const std::filesystem::path& bin,
                      const std::filesystem::path& base, int max_connections);

}  // namespace weft_pg_test::process
