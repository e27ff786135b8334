// How the interpreter runs a launch (interpret::options, the launch option of a device
// opened on the interpreter), and the log of asynchronous operations and waits it keeps
// for tests.
#pragma once

#include <cstdint>
#include <vector>

namespace tilepipe::interpret {

/// When deferred copies complete.
enum class copy_mode {
  at_wait,   // when a barrier or bulk group that covers them is waited for (default)
  eager,     // at issue
  shuffled,  // at the wait, pending copies of one barrier in a random order (seeded)
};

/// One asynchronous operation or wait, as recorded for tests and reports.
struct event {
  enum kind_t { tma_load, tma_store, barrier_wait, bulk_commit, bulk_wait } kind;
  int cta = 0;                // CTA in launch order
  int wg = 0;                 // issuing / waiting warpgroup
  std::uint32_t smem = 0;     // SMEM offset written (load) or read (store)
  std::uint32_t barrier = 0;  // barrier offset (load, wait)
  std::uint32_t parity = 0;   // waited parity; bulk_wait: the groups it lets stay pending
  int coords[5] = {};         // TMA coordinates, innermost first
};

/// How the interpreter runs a launch.
struct options {
  copy_mode copies = copy_mode::at_wait;
  std::uint64_t seed = 1;
  bool shuffle_ctas = false;             // run the CTAs in a random (seeded) order
  std::vector<event>* events = nullptr;  // when set, every TMA copy and barrier wait is appended
  /// Happens-before race detection over shared memory (race_detector.hpp). The barrier
  /// protocol checks and deadlock reports do not depend on it.
  bool detect_races = true;
  /// Pipelines make every copy synchronous (each fetch is waited for right after it is
  /// issued, each store right after it is committed): for bisecting pipelining bugs.
  /// The GPU counterpart is the macro TILEPIPE_NO_PIPELINING.
  bool no_pipelining = false;
};

/// Where one simulated cluster appends its events: the launch's log, if it keeps one.
struct event_log {
  std::vector<event>* events = nullptr;
  int cta = 0;  // the cluster's place in the order the grid's clusters ran

  void record(event e) const {
    if (!events) return;
    e.cta = cta;
    events->push_back(e);
  }
};

}  // namespace tilepipe::interpret
