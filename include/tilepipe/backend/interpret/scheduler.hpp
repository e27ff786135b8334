// Runs the warpgroups of one CTA as host threads, one at a time.
//
// Each warpgroup is a std::thread, but only the holder of the baton runs; it gives the
// baton away only when it blocks (a barrier wait that is not satisfied) or finishes. The
// interleaving is therefore deterministic, the simulated CTA state needs no locks, and a
// deadlock is certain the moment no warpgroup can run: the scheduler then aborts every
// thread with a report instead of hanging.
//
// A readiness test may do work on behalf of the blocked thread (deliver deferred TMA
// loads) and so may find an error (a protocol violation) while another thread holds the
// baton: the error then aborts the CTA with its message, as if the blocked thread threw it.
#pragma once

#include "../../core/error.cuh"

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace tilepipe::interpret {

/// Thrown inside a warpgroup thread to unwind it when the CTA was aborted elsewhere.
struct cta_aborted {};

class scheduler {
 public:
  enum class state { runnable, blocked, finished };

  explicit scheduler(int n) : state_(n, state::runnable), ready_(n), waiting_(n) {}

  /// Called first by thread i: waits for the baton (thread 0 starts).
  void enter(int i) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return current_ == i || aborted_; });
    if (aborted_) throw cta_aborted{};
  }

  /// Blocks thread i until ready() holds. ready() is evaluated only by the baton holder.
  /// describe() explains the wait, for the deadlock report.
  void block_until(int i, const std::function<bool()>& ready, const std::function<std::string()>& describe) {
    if (ready()) return;
    std::unique_lock lock(mu_);
    state_[i] = state::blocked;
    ready_[i] = ready;
    waiting_[i] = describe;
    pass_baton(lock, i);
    cv_.wait(lock, [&] { return current_ == i || aborted_; });
    ready_[i] = nullptr;
    waiting_[i] = nullptr;
    if (aborted_) throw cta_aborted{};
  }

  /// Thread i could go on, but lets the lowest-numbered thread that can run go first (it
  /// gets the baton back later like any runnable thread). Used when a CTA-wide barrier
  /// completes: warpgroups then resume in index order, so the warpgroup that issues the
  /// copies (usually 0) runs before those that consume them, and the copies are in flight
  /// while the consumers act, where the race detector can see a missing wait.
  void yield(int i) {
    std::unique_lock lock(mu_);
    const int n = static_cast<int>(state_.size());
    for (int j = 0; j < i && j < n; ++j) {
      const bool ready = can_run(j);
      if (aborted_) throw cta_aborted{};
      if (!ready) continue;
      state_[j] = state::runnable;
      current_ = j;
      cv_.notify_all();
      cv_.wait(lock, [&] { return current_ == i || aborted_; });
      if (aborted_) throw cta_aborted{};
      return;
    }
  }

  /// Thread i is done (normally or by an exception recorded with abort()).
  void finish(int i) {
    std::unique_lock lock(mu_);
    state_[i] = state::finished;
    if (!aborted_) pass_baton(lock, i);
  }

  /// Stops every thread of the CTA; the first reason is kept.
  void abort(const std::string& why) {
    std::unique_lock lock(mu_);
    abort_locked(why);
  }

  bool aborted() const { return aborted_; }
  const std::string& reason() const { return reason_; }

  /// Extra lines for a deadlock report (who could have arrived), filled by the CTA; gets
  /// the state of every warpgroup.
  std::function<std::string(const std::vector<state>&)> deadlock_context;
  /// Names thread j in deadlock reports ("warpgroup j" unless set).
  std::function<std::string(int)> thread_name;

 private:
  // The launch prefixes the CTA's report with "tilepipe: kernel ..., CTA ...".
  static std::string without_prefix(std::string what) {
    if (what.rfind("tilepipe: ", 0) == 0) what.erase(0, 10);
    return what;
  }

  void abort_locked(const std::string& why) {
    if (!aborted_) {
      aborted_ = true;
      reason_ = why;
    }
    cv_.notify_all();
  }

  // Whether thread j can run now: runnable, or blocked on a condition that now holds. A
  // condition that throws (a protocol error found while evaluating it) aborts the CTA.
  bool can_run(int j) {
    if (state_[j] == state::runnable) return true;
    if (state_[j] != state::blocked) return false;
    try {
      return ready_[j]();
    } catch (const std::exception& e) {
      abort_locked("warpgroup " + std::to_string(j) + ": " + without_prefix(e.what()));
      return false;
    }
  }

  // Picks the next thread that can run, starting after `from`; reports a deadlock when
  // some thread is blocked and none can run.
  void pass_baton(std::unique_lock<std::mutex>&, int from) {
    const int n = static_cast<int>(state_.size());
    for (int k = 1; k <= n; ++k) {
      const int j = (from + k) % n;
      const bool ready = can_run(j);
      if (aborted_) return;
      if (ready) {
        state_[j] = state::runnable;
        current_ = j;
        cv_.notify_all();
        return;
      }
    }
    bool any_blocked = false;
    std::string report = "deadlock: no warpgroup can make progress";
    for (int j = 0; j < n; ++j) {
      const std::string who = thread_name ? thread_name(j) : "warpgroup " + std::to_string(j);
      if (state_[j] == state::blocked) {
        any_blocked = true;
        report += "\n  " + who + " waits on " + waiting_[j]();
      } else {
        report += "\n  " + who + " has returned from the kernel";
      }
    }
    if (any_blocked) {
      if (deadlock_context) report += deadlock_context(state_);
      abort_locked(report);
    } else {
      current_ = -1;  // every thread finished
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  int current_ = 0;
  bool aborted_ = false;
  std::string reason_;
  std::vector<state> state_;
  std::vector<std::function<bool()>> ready_;
  std::vector<std::function<std::string()>> waiting_;
};

}  // namespace tilepipe::interpret
