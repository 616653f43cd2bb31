// weft::subprocess: running child processes from coroutines.
#include <sys/types.h>
#include <unistd.h>
#include <uv.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "weft/io/subprocess.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

// The pids of this process's children, zombies included (from /proc/PID/stat's ppid field).
std::vector<int> children_of_this_process() {
  std::vector<int> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    std::ifstream stat_file(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat_file, line)) {
      continue;  // it ended meanwhile
    }
    std::istringstream fields(line.substr(line.rfind(')') + 2));
    char state = 0;
    int parent = 0;
    fields >> state >> parent;
    if (parent == ::getpid()) {
      children.push_back(std::stoi(name));
    }
  }
  return children;
}

TEST(Subprocess, ExecCapturesStdoutStderrAndTheExitCode) {
  run_clean([] {
    auto result = weft::subprocess::exec({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
    EXPECT_EQ(result.exit_status, 3);
    EXPECT_EQ(result.term_signal, 0);
    EXPECT_EQ(result.standard_output, "out\n");
    EXPECT_EQ(result.standard_error, "err\n");
  });
  EXPECT_TRUE(children_of_this_process().empty());
}

volatile std::sig_atomic_t sigchld_seen = 0;
void count_sigchld(int) { sigchld_seen = sigchld_seen + 1; }

// libuv's SIGCHLD watcher stops with the loop's last process handle and left SIGCHLD at
// SIG_DFL: the program's own handler (or its SIG_IGN, to reap children itself) is back instead,
// after each run that spawned.
TEST(Subprocess, TheProgramsSigchldDispositionIsBackAfterItsChildren) {
  for (void (*own)(int) : {&count_sigchld, SIG_IGN}) {
    struct sigaction wanted {};
    struct sigaction before {};
    wanted.sa_handler = own;
    sigemptyset(&wanted.sa_mask);
    sigaction(SIGCHLD, &wanted, &before);
    run_clean([] {
      for (int round = 0; round < 2; ++round) {  // the watcher stops and starts again between
        auto result = weft::subprocess::exec({"/bin/sh", "-c", "exit 7"});
        EXPECT_EQ(result.exit_status, 7);  // libuv reaped it, whatever SIGCHLD was
      }
    });
    struct sigaction now {};
    sigaction(SIGCHLD, nullptr, &now);
    EXPECT_EQ(now.sa_handler, own);
    sigaction(SIGCHLD, &before, nullptr);
  }
}

TEST(Subprocess, ExecFeedsStdinData) {
  run_clean([] {
    weft::subprocess::options options;
    options.stdin_data = "line one\nline two\n";
    auto result = weft::subprocess::exec({"cat"}, options);
    EXPECT_EQ(result.exit_status, 0);
    EXPECT_EQ(result.standard_output, "line one\nline two\n");
    EXPECT_EQ(result.standard_error, "");
  });
}

TEST(Subprocess, ExecPassesEnvironmentAndWorkingDirectory) {
  run_clean([] {
    weft::subprocess::options options;
    options.env = std::vector<std::string>{"WEFT_TEST_VALUE=forty two"};
    options.cwd = "/tmp";
    auto result =
        weft::subprocess::exec({"/bin/sh", "-c", "echo \"$WEFT_TEST_VALUE\"; pwd"}, options);
    EXPECT_EQ(result.standard_output, "forty two\n/tmp\n");
  });
}

TEST(Subprocess, ExecCapturesABigOutputFullyFromBothPipes) {
  // Far more than a pipe holds, on both streams at once: only concurrent reading finishes.
  run_clean([] {
    auto result = weft::subprocess::exec(
        {"/bin/sh", "-c", "head -c 1000000 /dev/zero; head -c 700000 /dev/zero >&2"});
    EXPECT_EQ(result.exit_status, 0);
    EXPECT_EQ(result.standard_output, std::string(1000000, '\0'));
    EXPECT_EQ(result.standard_error.size(), 700000u);
  });
}

TEST(Subprocess, ExecOfABigStdinThroughCat) {
  run_clean([] {
    std::string input;
    for (int index = 0; input.size() < 2'000'000; ++index) {
      input += std::to_string(index) + '\n';
    }
    weft::subprocess::options options;
    options.stdin_data = input;
    auto result = weft::subprocess::exec({"cat"}, options);
    EXPECT_EQ(result.standard_output, input);
  });
}

TEST(Subprocess, ExecPastItsTimeoutKillsAndReapsTheChild) {
  auto started = std::chrono::steady_clock::now();
  run_clean([] {
    weft::subprocess::options options;
    options.limit = weft::timeout(100ms);
    try {
      weft::subprocess::exec({"sleep", "5"}, options);
      ADD_FAILURE() << "exec must time out";
    } catch (const weft::timeout_error& error) {
      EXPECT_NE(std::string(error.what()).find("process sleep (pid "), std::string::npos)
          << error.what();
    }
    EXPECT_TRUE(children_of_this_process().empty()) << "killed and reaped before exec returned";
  });
  EXPECT_LT(std::chrono::steady_clock::now() - started, 4s);
}

TEST(Subprocess, ACancelledExecKillsAndReapsTheChild) {
  run_clean([] {
    auto runner = weft::spawn([] { weft::subprocess::exec({"sleep", "5"}); });
    ASSERT_TRUE(weft_test::yield_until([] { return !children_of_this_process().empty(); }));
    runner.cancel("test over");
    EXPECT_THROW(runner.await(), weft::cancelled_error);
    EXPECT_TRUE(children_of_this_process().empty());
  });
}

TEST(Subprocess, AMissingProgramIsAnIoErrorNamingIt) {
  run_clean([] {
    try {
      weft::subprocess::exec({"nosuch-program"});
      ADD_FAILURE() << "spawning a missing program must fail";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_ENOENT);
      EXPECT_STREQ(error.what(), "spawn nosuch-program: no such file or directory");
    }
    EXPECT_THROW(weft::subprocess::spawn({"nosuch-program"}), weft::io_error);
  });
}

TEST(Subprocess, SpawnAndKillReportsTheTermSignal) {
  run_clean([] {
    weft::child sleeper = weft::subprocess::spawn({"sleep", "5"});
    EXPECT_GT(sleeper.pid(), 0);
    EXPECT_FALSE(sleeper.exited());
    EXPECT_THROW(sleeper.wait(weft::timeout(10ms)), weft::timeout_error);
    sleeper.kill(SIGTERM);
    weft::subprocess::status ended = sleeper.wait(weft::timeout(10s));
    EXPECT_EQ(ended.term_signal, SIGTERM);
    EXPECT_TRUE(sleeper.exited());
    EXPECT_NO_THROW(sleeper.kill(SIGTERM)) << "a reaped child is left alone";
    EXPECT_EQ(sleeper.wait().term_signal, SIGTERM) << "waiting again returns the same";
  });
}

TEST(Subprocess, SpawnTalksToTheChildThroughItsPipes) {
  run_clean([] {
    weft::child cat = weft::subprocess::spawn({"cat"});
    cat.write_stdin("ping\n");
    char buffer[64];
    std::string echoed;
    while (echoed.size() < 5) {
      std::size_t count = cat.read_stdout(buffer, weft::timeout(10s));
      ASSERT_GT(count, 0u);
      echoed.append(buffer, count);
    }
    EXPECT_EQ(echoed, "ping\n");
    cat.close_stdin();
    EXPECT_EQ(cat.read_stdout(buffer, weft::timeout(10s)), 0u) << "end of file";
    EXPECT_EQ(cat.read_stderr(buffer, weft::timeout(10s)), 0u);
    EXPECT_EQ(cat.wait(weft::timeout(10s)).exit_status, 0);
    EXPECT_THROW(cat.write_stdin("late"), std::logic_error);
  });
}

// Higher layers take any weft::stream; a child's pipes are just that.
std::vector<std::string> read_lines(weft::stream& from) {
  std::vector<std::string> lines;
  std::string line;
  while (from.read_until(line, "\n", 1024, weft::timeout(10s)) > 0) {
    line.pop_back();
    lines.push_back(std::move(line));
    line.clear();
  }
  return lines;
}

TEST(Subprocess, SpawnedChildStreamsAreWeftStreams) {
  run_clean([] {
    weft::child sorter = weft::subprocess::spawn({"sort"});
    std::string_view parts[] = {"pear\n", "apple\n", "fig\n"};
    sorter.stdin_pipe().writev(parts, weft::timeout(10s));
    sorter.stdin_pipe().shutdown(weft::timeout(10s));  // flushes, then sort sees end of file
    EXPECT_EQ(read_lines(sorter.stdout_pipe()), (std::vector<std::string>{"apple", "fig", "pear"}));
    EXPECT_EQ(sorter.wait(weft::timeout(10s)).exit_status, 0);
    EXPECT_EQ(sorter.stdout_pipe().subject(), "stdout of sort");
  });
}

TEST(Subprocess, AStreamNotSpawnedAsAPipeIsALogicErrorNamingIt) {
  run_clean([] {
    weft::subprocess::options options;
    options.stdout_mode = weft::subprocess::stdio::ignore;
    weft::child quiet = weft::subprocess::spawn({"true"}, options);
    try {
      quiet.stdout_pipe();
      ADD_FAILURE() << "stdout was not piped";
    } catch (const std::logic_error& error) {
      EXPECT_NE(std::string(error.what()).find("stdout of process true (pid "), std::string::npos)
          << error.what();
    }
    quiet.wait(weft::timeout(10s));
  });
}

TEST(Subprocess, AnEmptyEnvironmentIsPassedAsEmpty) {
  run_clean([] {
    weft::subprocess::options options;
    options.env = std::vector<std::string>{};
    EXPECT_EQ(weft::subprocess::exec({"/usr/bin/env"}, options).standard_output, "");
    // Unset: the child inherits ours.
    ::setenv("WEFT_TEST_INHERITED", "yes", 1);
    auto inherited = weft::subprocess::exec({"/usr/bin/env"});
    ::unsetenv("WEFT_TEST_INHERITED");
    EXPECT_NE(inherited.standard_output.find("WEFT_TEST_INHERITED=yes\n"), std::string::npos);
  });
}

TEST(Subprocess, ExecOfAChildThatIgnoresItsStdinStillEnds) {
  run_clean([] {
    weft::subprocess::options options;
    options.stdin_data = std::string(4 * 1024 * 1024, 'x');  // far more than a socket buffer
    auto result = weft::subprocess::exec({"/bin/sh", "-c", "echo done"}, options);
    EXPECT_EQ(result.exit_status, 0);
    EXPECT_EQ(result.standard_output, "done\n");
  });
}

TEST(Subprocess, SpawnedChildOutputReadByOneCoroutineWhileAnotherWaits) {
  run_clean([] {
    weft::child chatty =
        weft::subprocess::spawn({"/bin/sh", "-c", "head -c 500000 /dev/zero; exit 7"});
    auto reader = weft::spawn([&] {
      std::size_t total = 0;
      char buffer[8192];
      while (std::size_t count = chatty.read_stdout(buffer)) {
        total += count;
      }
      return total;
    });
    EXPECT_EQ(chatty.wait(weft::timeout(10s)).exit_status, 7);
    EXPECT_EQ(reader.await(), 500000u);
  });
}

TEST(Subprocess, AChildThatOutlivesItsHandleIsKilledAndReaped) {
  run_clean([] {
    {
      weft::child sleeper = weft::subprocess::spawn({"sleep", "5"});
      EXPECT_EQ(children_of_this_process(), std::vector<int>{sleeper.pid()});
    }
    // Killed at once; the reaping happens in the background and run() waits for it.
  });
  EXPECT_TRUE(children_of_this_process().empty()) << "no zombie once run() returned";
}

TEST(Subprocess, WritingToAChildThatIsGoneIsAnIoError) {
  run_clean([] {
    weft::subprocess::options options;
    options.stdout_mode = weft::subprocess::stdio::ignore;
    options.stderr_mode = weft::subprocess::stdio::ignore;
    weft::child quitter = weft::subprocess::spawn({"true"}, options);
    quitter.wait(weft::timeout(10s));
    try {
      for (int attempt = 0; attempt < 100; ++attempt) {
        quitter.write_stdin(std::string(65536, 'x'), weft::timeout(10s));
      }
      ADD_FAILURE() << "writing to a gone reader must fail";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_EPIPE);
      EXPECT_STREQ(error.what(), "write stdin of true: broken pipe");
    }
    char buffer[4];
    EXPECT_THROW(quitter.read_stdout(buffer), std::logic_error) << "stdout was not piped";
  });
}

}  // namespace
