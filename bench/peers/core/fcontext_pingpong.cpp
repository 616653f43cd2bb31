// Peer: raw Boost.Context fcontext, the switch weft itself is built on. A lower bound, not a
// runtime: no scheduler, no run queue, no timers.
//
// yield_switch: two contexts made with make_fcontext jump to each other; each jump is one switch.
//   ns per switch = timed wall time / number of jumps.
// spawn_run_complete: make_fcontext on one reused stack, jump in, the function jumps straight
//   back (an fcontext function must never return); ns per spawn = wall time / count.
#include <boost/context/detail/fcontext.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench_util.hpp"

namespace ctx = boost::context::detail;

namespace {

constexpr std::size_t stack_size = 256 * 1024;

struct ping_pong {
  std::uint64_t rounds = 0;  // jumps each side makes
  ctx::fcontext_t main_context = nullptr;
};

ping_pong* current_game = nullptr;

// Both sides run this: jump back to whoever jumped here, rounds times, then return to main.
// The first side's first jump goes to the other (not yet started) side, passed in data.
void player(ctx::transfer_t transfer) {
  ping_pong& game = *current_game;
  if (transfer.data != nullptr) {
    // First side: main jumped here; remember main and start the other side.
    game.main_context = transfer.fctx;
    transfer = ctx::jump_fcontext(*static_cast<ctx::fcontext_t*>(transfer.data), nullptr);
    for (std::uint64_t round = 1; round < game.rounds; ++round) {
      transfer = ctx::jump_fcontext(transfer.fctx, nullptr);
    }
    // The other side is parked in its last jump; it is abandoned with its stack.
    ctx::jump_fcontext(game.main_context, nullptr);
  } else {
    for (std::uint64_t round = 0; round < game.rounds; ++round) {
      transfer = ctx::jump_fcontext(transfer.fctx, nullptr);
    }
    std::abort();  // unreachable: the first side stops resuming this one
  }
  std::abort();
}

double time_ping_pong(std::uint64_t switches) {
  std::vector<char> stack_a(stack_size);
  std::vector<char> stack_b(stack_size);
  ping_pong game;
  game.rounds = switches / 2;
  current_game = &game;
  ctx::fcontext_t a = ctx::make_fcontext(stack_a.data() + stack_size, stack_size, player);
  ctx::fcontext_t b = ctx::make_fcontext(stack_b.data() + stack_size, stack_size, player);
  auto start = bench::clock::now();
  ctx::jump_fcontext(a, &b);
  auto end = bench::clock::now();
  return bench::nanoseconds_between(start, end);
}

void empty_body(ctx::transfer_t transfer) {
  ctx::jump_fcontext(transfer.fctx, nullptr);
  std::abort();
}

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
    std::uint64_t count = sizes.spawn_batches * sizes.spawn_batch;
    auto start = bench::clock::now();
    for (std::uint64_t index = 0; index < count; ++index) {
      ctx::fcontext_t fresh = ctx::make_fcontext(stack.data() + stack_size, stack_size, empty_body);
      ctx::jump_fcontext(fresh, nullptr);
    }
    auto end = bench::clock::now();
    bench::report("spawn_run_complete", "ns",
                  bench::nanoseconds_between(start, end) / static_cast<double>(count));
  }
  return 0;
}
