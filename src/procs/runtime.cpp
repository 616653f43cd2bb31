// weft::procs::runtime, the facade: each call goes to the engine (engine.hpp).
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "procs/engine.hpp"
#include "weft/procs/runtime.hpp"

namespace weft::procs {

namespace detail {

namespace {

// A plain function run as a process of one step.
class function_process final : public process {
 public:
  explicit function_process(std::function<std::string()> function)
      : function_(std::move(function)) {}
  void init(context&, std::string_view, std::string_view) override {}
  void step(std::span<event>, step_output& out) override { out.done(function_()); }

 private:
  std::function<std::string()> function_;
};

}  // namespace

}  // namespace detail

runtime::runtime(runtime_options options)
    : engine_(std::make_shared<detail::engine>(*this, std::move(options))) {
  engine_->start();
}

runtime::~runtime() { engine_->stop(default_stop_grace); }

void runtime::on_command(std::string type, command_handler handler) {
  engine_->on_command(std::move(type), std::move(handler));
}

process_handle runtime::submit(std::unique_ptr<process> body, std::string_view method,
                               std::string_view input) {
  return engine_->submit(std::move(body), method, input);
}

namespace {

// submit's and spawn's plain-function form: the function as a one-step process.
std::unique_ptr<process> as_process(const std::string& runtime_name, const char* operation,
                                    std::function<std::string()> function) {
  if (!function) {
    throw std::invalid_argument(runtime_name + ": " + operation +
                                " needs a function, got an empty one");
  }
  return std::make_unique<detail::function_process>(std::move(function));
}

}  // namespace

process_handle runtime::submit(std::function<std::string()> function) {
  return engine_->submit(as_process(engine_->name(), "submit", std::move(function)), "main", {});
}

pid runtime::spawn(std::unique_ptr<process> body, std::string_view method, std::string_view input) {
  return engine_->spawn(std::move(body), method, input);
}

pid runtime::spawn(std::function<std::string()> function) {
  return engine_->spawn(as_process(engine_->name(), "spawn", std::move(function)), "main", {});
}

void runtime::send(pid to, std::string message, pid from) {
  if (!engine_->send(to, std::move(message), from)) {
    engine_->refuse_unknown(to, "send to");
  }
}

bool runtime::try_send(pid to, std::string message, pid from) {
  return engine_->send(to, std::move(message), from);
}

void runtime::cancel(pid target) { engine_->cancel(target, true); }
void runtime::terminate(pid target) { engine_->terminate(target); }
bool runtime::stop(std::chrono::steady_clock::duration grace) { return engine_->stop(grace); }
std::size_t runtime::workers() const noexcept { return engine_->worker_count(); }
std::size_t runtime::live() const noexcept { return engine_->live(); }
runtime::counters runtime::stats() const noexcept { return engine_->stats(); }

}  // namespace weft::procs
