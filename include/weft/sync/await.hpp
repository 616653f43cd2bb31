// Await combinators: wait on several tasks and futures at once.
//
//   await_all(...)           every input's outcome (value or error); never throws for theirs
//   await_all_or_fail(...)   every value; the first error (in completion order) is thrown
//   await_any_or_fail(...)   the first input to finish: its value, or its error thrown
//   await_first_success(...) the first value; all_failed_error when every input failed
//   await_any_of(n, ...)     the first n values; all_failed_error once fewer than n can succeed
//
// Inputs: a range of task<T> or future<T> (a std::vector, say), or task<A>, future<B>, ...
// given one by one. A weft::timeout or an await_options may follow as the last argument. Ranges
// report which input won (indexed_result::index); one-by-one calls return a std::tuple or a
// std::variant whose index() is the input's position. Values of reference type come back as
// std::reference_wrapper, of void as std::monostate. Inputs passed as rvalues have their values
// moved out; lvalues are copied from.
//
// Contract:
// - May suspend the calling coroutine (only when some input it needs has not finished yet); it
//   suspends on one wait source per pending input and is woken by each completion, then waits
//   again until it has what it needs (no polling). Each wake costs O(pending inputs).
// - Losers are cancelled, not awaited: once a combinator knows its result (a winner, enough
//   successes, the first error for await_all_or_fail) it cancels the inputs still pending (task
//   cancel, or future cancel) and returns at once; their cleanup runs when they next get the
//   CPU. await_all never cancels anything.
// - A time limit is a cancellation token for the wait: when it passes first the combinator throws
//   timeout_error and the inputs keep running, unless await_options::cancel_rest_on_timeout.
//   Cancelling the awaiting coroutine interrupts the wait with cancelled_error, likewise leaving
//   the inputs alone unless await_options::cancel_rest_on_cancel.
// - Inputs already finished when it is called count in input order; later ones in the order they
//   finish. Empty input returns at once: await_all/await_all_or_fail return nothing,
//   await_first_success throws all_failed_error with no errors, await_any_or_fail throws
//   std::invalid_argument (nothing could ever finish first), as does asking await_any_of for
//   more successes than there are inputs.
// - Threads: every input must belong to the calling thread's scheduler (std::logic_error
//   otherwise, as for an empty handle or a task awaiting itself).
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <exception>
#include <functional>
#include <optional>
#include <ranges>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "weft/error.hpp"
#include "weft/sched/task.hpp"
#include "weft/sched/timeout.hpp"
#include "weft/sync/future.hpp"

namespace weft {

// The limit of a combinator's wait and what happens to the pending inputs when it ends early.
struct await_options {
  timeout limit = timeout::never();  // how long to wait (see weft::timeout)
  // When the limit passes first, cancel the inputs still pending (default: they keep running).
  bool cancel_rest_on_timeout = false;
  // When the awaiting coroutine is cancelled mid-wait, cancel the inputs still pending too.
  bool cancel_rest_on_cancel = false;
};

// The value or the error one input ended with.
template <class T>
class outcome {
 public:
  // An outcome: failure(error) or success(value).
  static outcome failure(std::exception_ptr error) {
    outcome result;
    result.error_ = std::move(error);
    return result;
  }
  template <class... Args>
  static outcome success(Args&&... args) {
    outcome result;
    result.slot_.emplace(std::forward<Args>(args)...);
    return result;
  }

  // has_value() (and operator bool): whether it is a value rather than an error.
  bool has_value() const noexcept { return !error_; }
  explicit operator bool() const noexcept { return has_value(); }
  // The value, or the error rethrown.
  decltype(auto) value() & {
    rethrow_if_failed();
    if constexpr (!std::is_void_v<T>) {
      return static_cast<std::add_lvalue_reference_t<T>>(slot_.get());
    }
  }
  decltype(auto) value() const& {
    rethrow_if_failed();
    if constexpr (!std::is_void_v<T>) {
      return slot_.get();
    }
  }
  T value() && {
    rethrow_if_failed();
    if constexpr (std::is_reference_v<T>) {
      return slot_.get();
    } else if constexpr (!std::is_void_v<T>) {
      return std::move(slot_.get());
    }
  }
  // The error (null when it has a value).
  const std::exception_ptr& error() const noexcept { return error_; }

 private:
  outcome() = default;
  void rethrow_if_failed() const {
    if (error_) {
      std::rethrow_exception(error_);
    }
  }

  detail::value_slot<T> slot_;
  std::exception_ptr error_;
};

namespace detail {
template <class T>
struct result_value {
  using type = T;
};
template <class T>
struct result_value<T&> {
  using type = std::reference_wrapper<T>;
};
template <>
struct result_value<void> {
  using type = std::monostate;
};
}  // namespace detail

// How a value of type T is returned by the combinators (T&: reference_wrapper, void: monostate).
template <class T>
using result_value_t = typename detail::result_value<T>::type;

// A range combinator's winner: which input (its position in the range) and its value.
template <class T>
struct indexed_result {
  std::size_t index;        // the input's position in the range
  result_value_t<T> value;  // its value
};

namespace detail {

// One input as the waiting machinery sees it: exactly one of the two is set.
struct await_input {
  coroutine* task = nullptr;
  future_state_base* future = nullptr;
};

// The policies (src/sync/await.cpp). Each waits as its combinator needs, cancels the losers,
// and returns the positions of the inputs whose values the caller takes, or throws.
void wait_for_all(std::span<const await_input> inputs, const await_options& options);
void wait_for_all_or_fail(std::span<const await_input> inputs, const await_options& options);
std::size_t wait_for_any(std::span<const await_input> inputs, const await_options& options);
std::size_t wait_for_first_success(std::span<const await_input> inputs,
                                   const await_options& options);
std::vector<std::size_t> wait_for_successes(std::size_t count, std::span<const await_input> inputs,
                                            const await_options& options);

template <class Handle>
struct handle_traits {
  static constexpr bool is_handle = false;
};
template <class T>
struct handle_traits<task<T>> {
  static constexpr bool is_handle = true;
  using value_type = T;
  static await_input input(const task<T>& handle) { return {handle.control_block(), nullptr}; }
};
template <class T>
struct handle_traits<future<T>> {
  static constexpr bool is_handle = true;
  using value_type = T;
  static await_input input(const future<T>& handle) {
    return {nullptr, future_access::state(handle)};
  }
};

template <class Handle>
using handle_value_t = typename handle_traits<std::remove_cvref_t<Handle>>::value_type;

inline await_options to_options() { return {}; }
inline await_options to_options(const timeout& limit) { return {.limit = limit}; }
inline await_options to_options(const await_options& options) { return options; }

// The value of a finished, successful input; moved out when the caller gave the handle up.
template <bool Move, class Handle>
result_value_t<handle_value_t<Handle>> take_value(Handle& handle) {
  using T = handle_value_t<Handle>;
  if constexpr (std::is_void_v<T>) {
    handle.await();
    return std::monostate{};
  } else if constexpr (std::is_reference_v<T>) {
    return std::ref(handle.await());
  } else if constexpr (Move) {
    return std::move(handle).await();
  } else {
    return handle.await();
  }
}

template <bool Move, class Handle>
outcome<handle_value_t<Handle>> take_outcome(Handle& handle) {
  using T = handle_value_t<Handle>;
  if (std::exception_ptr error = handle.exception()) {
    return outcome<T>::failure(std::move(error));
  }
  if constexpr (std::is_void_v<T>) {
    return outcome<T>::success();
  } else if constexpr (std::is_reference_v<T> || !Move) {
    return outcome<T>::success(handle.await());
  } else {
    return outcome<T>::success(std::move(handle).await());
  }
}

// The handles of a range, copied (cheap: a reference count each), and their inputs.
template <class Range>
struct range_inputs {
  using handle_type = std::remove_cvref_t<std::ranges::range_reference_t<Range>>;
  using value_type = typename handle_traits<handle_type>::value_type;
  static constexpr bool move = !std::is_lvalue_reference_v<Range>;

  explicit range_inputs(Range& range) {
    if constexpr (std::ranges::sized_range<Range>) {
      handles.reserve(std::ranges::size(range));
      inputs.reserve(std::ranges::size(range));
    }
    for (const handle_type& handle : range) {
      handles.push_back(handle);
      inputs.push_back(handle_traits<handle_type>::input(handle));
    }
  }
  result_value_t<value_type> value(std::size_t index) { return take_value<move>(handles[index]); }
  indexed_result<value_type> indexed(std::size_t index) { return {index, value(index)}; }

  std::vector<handle_type> handles;
  std::vector<await_input> inputs;
};

// Handles given one by one, optionally followed by a timeout or await_options.
template <class Argument>
concept limit_argument = std::same_as<std::remove_cvref_t<Argument>, timeout> ||
    std::same_as<std::remove_cvref_t<Argument>, await_options>;

template <class... Arguments>
consteval bool handles_then_limit() {
  constexpr std::size_t count = sizeof...(Arguments);
  if constexpr (count == 0) {
    return true;
  } else {
    constexpr bool is_handle[] = {handle_traits<std::remove_cvref_t<Arguments>>::is_handle...};
    constexpr bool is_limit[] = {limit_argument<Arguments>...};
    for (std::size_t index = 0; index + 1 < count; ++index) {
      if (!is_handle[index]) {
        return false;
      }
    }
    return is_handle[count - 1] || is_limit[count - 1];
  }
}

template <class... Arguments>
consteval std::size_t handle_count() {
  if constexpr (sizeof...(Arguments) == 0) {
    return 0;
  } else {
    constexpr bool is_limit[] = {limit_argument<Arguments>...};
    return sizeof...(Arguments) - (is_limit[sizeof...(Arguments) - 1] ? 1 : 0);
  }
}

template <class Sequence, class... Arguments>
struct handles_of;
template <std::size_t... Index, class... Arguments>
struct handles_of<std::index_sequence<Index...>, Arguments...> {
  using type =
      std::tuple<std::remove_cvref_t<std::tuple_element_t<Index, std::tuple<Arguments...>>>...>;
};

template <class Handles, class Sequence>
struct variant_of;
template <class Handles, std::size_t... Index>
struct variant_of<Handles, std::index_sequence<Index...>> {
  using type =
      std::variant<result_value_t<handle_value_t<std::tuple_element_t<Index, Handles>>>...>;
};

template <class... Arguments>
class variadic_inputs {
 public:
  static constexpr std::size_t size = handle_count<Arguments...>();
  using sequence = std::make_index_sequence<size>;
  using handles_type = typename handles_of<sequence, Arguments...>::type;
  template <std::size_t Index>
  using value_type = handle_value_t<std::tuple_element_t<Index, handles_type>>;
  template <std::size_t Index>
  static constexpr bool move =
      !std::is_lvalue_reference_v<std::tuple_element_t<Index, std::tuple<Arguments...>>>;
  using variant_type = typename variant_of<handles_type, sequence>::type;

  explicit variadic_inputs(Arguments&... arguments)
      : variadic_inputs(std::forward_as_tuple(arguments...), sequence{}) {}

  std::span<const await_input> inputs() const noexcept { return inputs_; }
  const await_options& options() const noexcept { return options_; }

  auto outcomes() {
    return [this]<std::size_t... Index>(std::index_sequence<Index...>) {
      return std::tuple<outcome<value_type<Index>>...>(
          take_outcome<move<Index>>(std::get<Index>(handles_))...);
    }
    (sequence{});
  }
  auto values() {
    return [this]<std::size_t... Index>(std::index_sequence<Index...>) {
      return std::tuple<result_value_t<value_type<Index>>...>(
          take_value<move<Index>>(std::get<Index>(handles_))...);
    }
    (sequence{});
  }
  // The value of input `position`, as the alternative of that index.
  variant_type variant_at(std::size_t position) {
    return [&]<std::size_t... Index>(std::index_sequence<Index...>) {
      std::optional<variant_type> result;
      ((position == Index ? (void)result.emplace(std::in_place_index<Index>,
                                                 take_value<move<Index>>(std::get<Index>(handles_)))
                          : void()),
       ...);
      return std::move(*result);
    }
    (sequence{});
  }

 private:
  template <std::size_t... Index>
  variadic_inputs(std::tuple<Arguments&...> all, std::index_sequence<Index...>)
      : handles_(std::get<Index>(all)...),
        inputs_{handle_traits<std::tuple_element_t<Index, handles_type>>::input(
            std::get<Index>(handles_))...},
        options_(limit_of(all)) {}

  static await_options limit_of(std::tuple<Arguments&...>& all) {
    if constexpr (size < sizeof...(Arguments)) {
      return to_options(std::get<sizeof...(Arguments) - 1>(all));
    } else {
      return {};
    }
  }

  handles_type handles_;
  std::array<await_input, size> inputs_;
  await_options options_;
};

}  // namespace detail

// A range of task<T> or future<T>.
template <class Range>
concept await_range = std::ranges::input_range<Range> &&
    detail::handle_traits<std::remove_cvref_t<std::ranges::range_reference_t<Range>>>::is_handle;

// Handles one by one, then optionally a timeout or await_options.
template <class... Arguments>
concept await_arguments = (detail::handles_then_limit<Arguments...>());

// --- await_all: every outcome --------------------------------------------------------------

// await_all over a range, or over handles given one by one: every input's outcome, never throwing
// for theirs.
template <await_range Range, detail::limit_argument... Limit>
requires(sizeof...(Limit) <= 1) auto await_all(Range&& inputs, const Limit&... limit) {
  detail::range_inputs<Range> set(inputs);
  detail::wait_for_all(set.inputs, detail::to_options(limit...));
  std::vector<outcome<typename decltype(set)::value_type>> results;
  results.reserve(set.handles.size());
  for (auto& handle : set.handles) {
    results.push_back(detail::take_outcome<decltype(set)::move>(handle));
  }
  return results;
}

// await_all over handles given one by one, then optionally a limit.
template <class... Arguments>
requires await_arguments<Arguments...>
auto await_all(Arguments&&... arguments) {
  detail::variadic_inputs<Arguments...> set(arguments...);
  detail::wait_for_all(set.inputs(), set.options());
  return set.outcomes();
}

// --- await_all_or_fail: every value, or the first error ------------------------------------

// await_all_or_fail over a range, or over handles given one by one: every value, or the first error
// thrown.
template <await_range Range, detail::limit_argument... Limit>
requires(sizeof...(Limit) <= 1) auto await_all_or_fail(Range&& inputs, const Limit&... limit) {
  detail::range_inputs<Range> set(inputs);
  detail::wait_for_all_or_fail(set.inputs, detail::to_options(limit...));
  std::vector<result_value_t<typename decltype(set)::value_type>> results;
  results.reserve(set.handles.size());
  for (std::size_t index = 0; index < set.handles.size(); ++index) {
    results.push_back(set.value(index));
  }
  return results;
}

// await_all_or_fail over handles given one by one, then optionally a limit.
template <class... Arguments>
requires await_arguments<Arguments...>
auto await_all_or_fail(Arguments&&... arguments) {
  detail::variadic_inputs<Arguments...> set(arguments...);
  detail::wait_for_all_or_fail(set.inputs(), set.options());
  return set.values();
}

// --- await_any_or_fail: the first to finish ------------------------------------------------

// await_any_or_fail over a range, or over handles given one by one: the first input to finish, its
// value or its error.
template <await_range Range, detail::limit_argument... Limit>
requires(sizeof...(Limit) <= 1) auto await_any_or_fail(Range&& inputs, const Limit&... limit) {
  detail::range_inputs<Range> set(inputs);
  return set.indexed(detail::wait_for_any(set.inputs, detail::to_options(limit...)));
}

// await_any_or_fail over handles given one by one, then optionally a limit.
template <class... Arguments>
requires await_arguments<Arguments...>
auto await_any_or_fail(Arguments&&... arguments) {
  detail::variadic_inputs<Arguments...> set(arguments...);
  return set.variant_at(detail::wait_for_any(set.inputs(), set.options()));
}

// --- await_first_success: the first value --------------------------------------------------

// await_first_success over a range, or over handles given one by one: the first value;
// all_failed_error when every input failed.
template <await_range Range, detail::limit_argument... Limit>
requires(sizeof...(Limit) <= 1) auto await_first_success(Range&& inputs, const Limit&... limit) {
  detail::range_inputs<Range> set(inputs);
  return set.indexed(detail::wait_for_first_success(set.inputs, detail::to_options(limit...)));
}

// await_first_success over handles given one by one, then optionally a limit.
template <class... Arguments>
requires await_arguments<Arguments...>
auto await_first_success(Arguments&&... arguments) {
  detail::variadic_inputs<Arguments...> set(arguments...);
  return set.variant_at(detail::wait_for_first_success(set.inputs(), set.options()));
}

// --- await_any_of: the first count values, in the order they came --------------------------

// await_any_of over a range, or over handles given one by one: the first count values;
// all_failed_error once fewer can succeed.
template <await_range Range, detail::limit_argument... Limit>
requires(sizeof...(Limit) <= 1) auto await_any_of(std::size_t count, Range&& inputs,
                                                  const Limit&... limit) {
  detail::range_inputs<Range> set(inputs);
  std::vector<indexed_result<typename decltype(set)::value_type>> results;
  for (std::size_t index :
       detail::wait_for_successes(count, set.inputs, detail::to_options(limit...))) {
    results.push_back(set.indexed(index));
  }
  return results;
}

// await_any_of over handles given one by one, then optionally a limit.
template <class... Arguments>
requires await_arguments<Arguments...>
auto await_any_of(std::size_t count, Arguments&&... arguments) {
  detail::variadic_inputs<Arguments...> set(arguments...);
  std::vector<typename decltype(set)::variant_type> results;
  for (std::size_t index : detail::wait_for_successes(count, set.inputs(), set.options())) {
    results.push_back(set.variant_at(index));
  }
  return results;
}

}  // namespace weft
