// The tie between a weft::scope and something it closes when it closes (a channel made with
// channel_options::owner). Not user-facing API; public because channel<T> is a template.
//
// Either side may go first. The link lives inside the owned object and sits in the scope's list
// while both exist: when the scope closes (cancel, failure, destruction) it calls the link's close
// function with its close reason; when the scope is destroyed it also unlinks every link (their
// owner becomes null), and when the owned object is destroyed first its link unlinks itself. So
// neither ever points at the other after it is gone.
//
// Threads: the scope's thread only (attach, detach and the close calls), as for the scope and the
// channel themselves.
#pragma once

#include <string>

#include "weft/sched/detail/coroutine.hpp"

namespace weft {

class scope;

namespace detail {

class scope_link : public list_node {
 public:
  // Called once, when the scope closes (or at attach, if it is closed already). Must not throw.
  using close_function = void (*)(void* context, const std::string& reason) noexcept;

  scope_link(close_function on_close, void* context) noexcept
      : on_close_(on_close), context_(context) {}
  scope_link(const scope_link&) = delete;
  scope_link& operator=(const scope_link&) = delete;
  ~scope_link() { detach(); }

  // Ties the owner of this link to owner. If owner is already closed, the close function runs at
  // once with owner's close reason. std::logic_error if already attached, or from a thread other
  // than the one running owner's coroutines.
  void attach(weft::scope& owner);
  // Unties it (no-op if not attached or if the scope is gone).
  void detach() noexcept;
  weft::scope* owner() const noexcept { return owner_; }

 private:
  friend class weft::scope;
  close_function on_close_;
  void* context_;
  weft::scope* owner_ = nullptr;
};

}  // namespace detail
}  // namespace weft
