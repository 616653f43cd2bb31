// Stack overflow: a coroutine that runs off the end of a guarded stack hits the guard page, and
// the SIGSEGV handler (on an alternate signal stack) reports which coroutine overflowed which
// stack before the process dies, instead of a bare segfault.
#include <cstddef>
#include <cstdint>
#include <utility>

#include <gtest/gtest.h>

#include "weft/weft.hpp"

namespace {

volatile int never = -1;

// Unbounded recursion the compiler cannot turn into a loop or prove infinite.
[[gnu::noinline]] int recurse(int depth) {
  volatile char frame[512];
  frame[0] = static_cast<char>(depth);
  if (depth == never) {
    return frame[0];
  }
  return recurse(depth + 1) + frame[0];
}

void overflow_a_named_coroutine(weft::guard_policy guards) {
  weft::run_options options;
  options.stacks.size = 64 * 1024;
  options.stacks.guards = guards;
  weft::run([] { weft::spawn([] { return recurse(0); }, {.name = "recurser"}).await(); },
            std::move(options));
}

// Also under ASan and TSan: weft's handler is installed over the sanitizer's and reports the
// overflow itself (checked in both builds).

TEST(StackOverflowDeathTest, GuardedStackOverflowIsReportedByName) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(overflow_a_named_coroutine(weft::guard_policy::always),
               "coroutine [0-9]+ \\(recurser\\) overflowed its [0-9]+-byte stack");
}

TEST(StackOverflowDeathTest, ReportNamesTheConfiguredStackSize) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(overflow_a_named_coroutine(weft::guard_policy::budget),
               "coroutine [0-9]+ \\(recurser\\) overflowed its 65536-byte stack");
}

}  // namespace
