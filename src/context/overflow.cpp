#include "context/overflow.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "context/stack_pool.hpp"

namespace weft::detail {
namespace {

// Who to ask what runs on this thread (set by the overflow_guard that the thread's run holds).
thread_local const void* running_owner = nullptr;
thread_local running_on_stack_function running_function = nullptr;

struct sigaction previous_segv_action;
struct sigaction previous_bus_action;

// Async-signal-safe output: no stdio, no allocation.
void write_text(const char* text) { (void)!::write(STDERR_FILENO, text, std::strlen(text)); }

void write_number(std::uint64_t value) {
  char digits[24];
  char* end = digits + sizeof(digits);
  char* cursor = end;
  do {
    *--cursor = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  (void)!::write(STDERR_FILENO, cursor, static_cast<std::size_t>(end - cursor));
}

void chain(int signal_number, siginfo_t* info, void* context) {
  const struct sigaction& previous =
      signal_number == SIGSEGV ? previous_segv_action : previous_bus_action;
  if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != nullptr) {
    previous.sa_sigaction(signal_number, info, context);
    return;
  }
  if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN &&
      previous.sa_handler != nullptr) {
    previous.sa_handler(signal_number);
    return;
  }
  // Default action: restore it and return, so the faulting instruction faults again and the
  // process dies with the usual signal (and core dump).
  ::signal(signal_number, SIG_DFL);
}

void on_fault(int signal_number, siginfo_t* info, void* context) {
  running_on_stack running;
  if (running_function != nullptr) {
    running = running_function(running_owner);
  }
  if (running.on != nullptr && running.on->guarded) {
    auto fault = reinterpret_cast<std::uintptr_t>(info->si_addr);
    auto base = reinterpret_cast<std::uintptr_t>(running.on->base);
    std::uintptr_t guard_size = stack_pool::page_size();
    if (fault < base && fault + guard_size >= base) {
      write_text("weft: coroutine ");
      write_number(running.id);
      write_text(" (");
      write_text(running.name[0] == '\0' ? "unnamed" : running.name);
      write_text(") overflowed its ");
      write_number(running.on->size);
      write_text("-byte stack; give it a bigger stack (run_options.stacks.size) or recurse less\n");
      ::signal(SIGABRT, SIG_DFL);
      std::abort();
    }
  }
  chain(signal_number, info, context);
}

void install_handlers() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_sigaction = &on_fault;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGSEGV, &action, &previous_segv_action);
  ::sigaction(SIGBUS, &action, &previous_bus_action);
}

}  // namespace

overflow_guard::overflow_guard(const void* owner, running_on_stack_function running)
    : previous_owner_(running_owner), previous_function_(running_function) {
  static std::once_flag once;
  std::call_once(once, install_handlers);
  running_owner = owner;
  running_function = running;

  stack_t current;
  if (::sigaltstack(nullptr, &current) == 0 && (current.ss_flags & SS_DISABLE) == 0) {
    return;  // this thread already has an alternate stack (ours from an outer run, or the app's)
  }
  alternate_size_ = 64 * 1024;
  void* memory =
      ::mmap(nullptr, alternate_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) {
    return;  // overflow reports degrade to a plain crash; running is still possible
  }
  stack_t alternate{};
  alternate.ss_sp = memory;
  alternate.ss_size = alternate_size_;
  alternate.ss_flags = 0;
  if (::sigaltstack(&alternate, nullptr) == 0) {
    alternate_stack_ = memory;
    installed_ = true;
  } else {
    ::munmap(memory, alternate_size_);
  }
}

overflow_guard::~overflow_guard() {
  running_owner = previous_owner_;
  running_function = previous_function_;
  if (!installed_) {
    return;
  }
  stack_t disable{};
  disable.ss_flags = SS_DISABLE;
  ::sigaltstack(&disable, nullptr);
  ::munmap(alternate_stack_, alternate_size_);
}

}  // namespace weft::detail
