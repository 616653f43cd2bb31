// Peer: POSIX ucontext (getcontext/makecontext/swapcontext). No scheduler either; glibc's
// swapcontext saves and restores the signal mask, a system call on every switch, which is why
// runtimes moved to hand-written switches.
//
// yield_switch: two contexts swapcontext to each other; each swapcontext is one switch.
//   ns per switch = timed wall time / number of swapcontext calls.
// spawn_run_complete: getcontext + makecontext on one reused stack, swapcontext in, the empty
//   function returns and uc_link resumes main; ns per spawn = wall time / count.
#include <ucontext.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_util.hpp"

namespace {

constexpr std::size_t stack_size = 256 * 1024;

ucontext_t main_context;
ucontext_t context_a;
ucontext_t context_b;
std::uint64_t rounds = 0;  // swaps each side makes

void side_a() {
  for (std::uint64_t round = 0; round < rounds; ++round) {
    swapcontext(&context_a, &context_b);
  }
  // returning resumes uc_link (main); b stays parked in its last swap and is abandoned
}

void side_b() {
  for (std::uint64_t round = 0; round < rounds; ++round) {
    swapcontext(&context_b, &context_a);
  }
  std::abort();  // unreachable: a stops resuming b
}

void make(ucontext_t& context, std::vector<char>& stack, void (*function)()) {
  if (getcontext(&context) != 0) {
    std::perror("getcontext");
    std::exit(1);
  }
  context.uc_stack.ss_sp = stack.data();
  context.uc_stack.ss_size = stack.size();
  context.uc_link = &main_context;
  makecontext(&context, function, 0);
}

double time_ping_pong(std::uint64_t switches) {
  std::vector<char> stack_a(stack_size);
  std::vector<char> stack_b(stack_size);
  rounds = switches / 2;
  make(context_a, stack_a, side_a);
  make(context_b, stack_b, side_b);
  auto start = bench::clock::now();
  swapcontext(&main_context, &context_a);
  auto end = bench::clock::now();
  return bench::nanoseconds_between(start, end);
}

void empty_body() {}

}  // namespace

int main(int argc, char** argv) {
  bench::arguments arguments = bench::parse_arguments(argc, argv);
  bench::sizes sizes = bench::sizes_for(arguments);

  if (arguments.wants("yield_switch")) {
    time_ping_pong(sizes.warmup_switches);
    double elapsed = time_ping_pong(sizes.switches);
    bench::report("yield_switch", "ns", elapsed / static_cast<double>(sizes.switches));
  }

  if (arguments.wants("spawn_run_complete")) {
    std::vector<char> stack(stack_size);
    ucontext_t fresh;
    std::uint64_t count = sizes.spawn_batches * sizes.spawn_batch;
    auto start = bench::clock::now();
    for (std::uint64_t index = 0; index < count; ++index) {
      make(fresh, stack, empty_body);
      swapcontext(&main_context, &fresh);
    }
    auto end = bench::clock::now();
    bench::report("spawn_run_complete", "ns",
                  bench::nanoseconds_between(start, end) / static_cast<double>(count));
  }
  return 0;
}
