// The weft program of suite `pool` as bench/run.py sees it (one weft program per suite): it
// runs the program that implements each benchmark asked for, both built next to it:
//   bench_pool_weft     weft::pool acquire/release (bench/pool/weft_pool.cpp), no server;
//   bench_pool_weft_pg  pg_select1 and pg_select1_params (bench/pool/weft_pg_select1.cpp),
//                       which starts a PostgreSQL server of its own.
// Same flags as every bench program (--smoke, --only a,b); the children inherit stdout and
// stderr, so their RESULT lines are this program's. Exit status: the first failing child's.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.hpp"

namespace {

const std::vector<std::string> pg_benchmarks = {"pg_select1", "pg_select1_params",
                                                "pg_select1_leased"};

bool is_pg(const std::string& name) {
  for (const std::string& pg : pg_benchmarks) {
    if (pg == name) {
      return true;
    }
  }
  return false;
}

// Runs program with --only names (all its benchmarks when names is empty); its exit status.
int run_child(const std::filesystem::path& program, const std::vector<std::string>& names,
              bool smoke) {
  std::vector<std::string> arguments = {program.string()};
  if (!names.empty()) {
    std::string list;
    for (const std::string& name : names) {
      list += (list.empty() ? "" : ",") + name;
    }
    arguments.insert(arguments.end(), {"--only", list});
  }
  if (smoke) {
    arguments.emplace_back("--smoke");
  }
  std::vector<char*> argv;
  for (std::string& argument : arguments) {
    argv.push_back(argument.data());
  }
  argv.push_back(nullptr);
  std::fflush(stdout);
  pid_t child = ::fork();
  if (child == 0) {
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "bench_pool_weft_suite: cannot run %s\n", argv[0]);
    ::_exit(127);
  }
  if (child < 0) {
    std::perror("bench_pool_weft_suite: fork");
    return 1;
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  if (WIFEXITED(status)) {
    return WEXITSTATUS(status);
  }
  std::fprintf(stderr, "bench_pool_weft_suite: %s killed by signal %d\n", argv[0],
               WTERMSIG(status));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  bench::arguments arguments = bench::parse_arguments(argc, argv);
  std::filesystem::path directory = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  std::vector<std::string> pool_names;
  std::vector<std::string> pg_names;
  for (const std::string& name : arguments.only) {
    (is_pg(name) ? pg_names : pool_names).push_back(name);
  }
  bool everything = arguments.only.empty();
  int status = 0;
  if (everything || !pool_names.empty()) {
    status = run_child(directory / "bench_pool_weft", pool_names, arguments.smoke);
  }
  if (everything || !pg_names.empty()) {
    int pg_status = run_child(directory / "bench_pool_weft_pg", pg_names, arguments.smoke);
    status = status != 0 ? status : pg_status;
  }
  return status;
}
