// The simulated CTA: its parts, each a file of its own, and the operations that touch
// several of them.
//   shared_memory    the bytes with the real layout and budget, addresses, region names,
//                    output blocks poisoned until written
//   mbarrier_table   mbarriers (counts, transaction bytes, phases), the TMA loads in flight
//                    towards them, and the barrier protocol checks
//   named_barriers   bar.sync / bar.arrive and barrier.cluster
//   copy_engine      TMA stores in bulk groups; the copies' event log and race tracking
//   wgmma_queue      each warpgroup's asynchronous wgmma groups
//   register_pool    setmaxnreg's registers, moved between a CTA's warpgroups
//   deadlock_report  what the barriers say when no warpgroup can run
// A thread-block cluster is simulated as one cta_state holding all its CTAs
// (cluster_layout.hpp), so one scheduler, one set of barriers and one race detector see
// every cross-CTA arrival and multicast.
//
// Copies and wgmmas are deferred: a TMA load lands when somebody waits on its barrier, a
// TMA store when its bulk group is waited for, a wgmma group at wgmma_wait. So a kernel
// that forgets a wait reads poison, as it would read stale data on the GPU. Every
// synchronisation also feeds the race detector (race_detector.hpp).
#pragma once

#include "../../core/error.cuh"
#include "cluster_layout.hpp"
#include "copy_engine.hpp"
#include "deadlock_report.hpp"
#include "mbarrier_table.hpp"
#include "named_barriers.hpp"
#include "options.hpp"
#include "peer_memory.hpp"
#include "race_detector.hpp"
#include "register_pool.hpp"
#include "scheduler.hpp"
#include "shared_memory.hpp"
#include "wgmma_queue.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tilepipe::interpret {

class grid_runner;

class cta_state {
  std::unique_ptr<scheduler> own_sched_;  // declared before sched, which may refer to it
  options opt_;
  int cta_number_;
  std::vector<long long> steps_;  // each warpgroup's pipeline step, as the pipeline announces it

 public:
  /// num_warpgroups and smem_bytes are per CTA; `cluster` CTAs are simulated together.
  /// `shared`: the scheduler of a launch over several simulated devices, whose threads
  /// thread_base .. thread_base + warpgroups - 1 are this CTA's (null: the CTA's own).
  cta_state(int num_warpgroups, std::size_t smem_bytes, const options& opt, std::string kernel, std::string cta,
            int cta_number = 0, int cluster = 1, scheduler* shared = nullptr, int thread_base = 0)
      : own_sched_(shared ? nullptr : std::make_unique<scheduler>(num_warpgroups * cluster)),
        opt_(opt),
        cta_number_(cta_number),
        steps_(num_warpgroups * cluster, -1),
        sched(shared ? *shared : *own_sched_),
        thread_base(thread_base),
        layout{cluster, num_warpgroups},
        kernel_name(std::move(kernel)),
        cta_name(std::move(cta)),
        log{opt.events, cta_number},
        memory(smem_bytes, layout),
        det_(opt.detect_races ? std::make_unique<race_detector>(layout.warpgroups(), memory.total) : nullptr),
        barriers(layout.warpgroups(), memory, det_.get(), sched, thread_base, opt_, log),
        copies(layout.warpgroups(), barriers, det_.get(), steps_, peers, opt_, log),
        named(layout, det_.get(), sched, thread_base),
        wgmma(layout.warpgroups(), memory, det_.get(), steps_),
        registers(layout, sched, thread_base) {
    if (!shared) sched.deadlock_context = [this](const std::vector<scheduler::state>& st) { return deadlock_context(st); };
    if (det_) {
      det_->describe_bytes = [this](std::uint32_t lo, std::uint32_t hi) { return memory.describe(lo, hi); };
      det_->explain = [this](const access_op& e, const access_op& l) { return barriers.race_hint(e, l); };
    }
  }
  cta_state(const cta_state&) = delete;
  cta_state& operator=(const cta_state&) = delete;

  scheduler& sched;
  const int thread_base;  // this CTA's warpgroup 0 among sched's threads
  const cluster_layout layout;
  const std::string kernel_name;
  const std::string cta_name;
  const event_log log;
  /// In a launch over several simulated devices: the memory the devices share with its
  /// race detector, and this CTA's actor there.
  peer_link peers;
  shared_memory memory;

 private:
  std::unique_ptr<race_detector> det_;  // null without race detection

 public:
  mbarrier_table barriers;
  copy_engine copies;
  named_barriers named;
  wgmma_queue wgmma;
  register_pool registers;
  std::uint64_t profile_tick = 0;  // the profiler's logical clock (prim::profile_clock)
  /// The launch's CTAs that have not run yet (a CTA waiting for another's flag runs them).
  grid_runner* grid = nullptr;

  const options& opts() const { return opt_; }
  /// The cluster's place in the order the grid's clusters ran.
  int number() const { return cta_number_; }
  race_detector* detector() const { return det_.get(); }

  /// The pipeline step warpgroup wg runs (for reports); returns the previous one.
  long long set_step(int wg, long long step) {
    const long long old = steps_[wg];
    steps_[wg] = step;
    return old;
  }

  /// A generic (non-TMA, non-wgmma) access of [p, p + bytes) by warpgroup wg.
  void note_access(int wg, const void* p, std::size_t bytes, bool write, const char* what) {
    const std::uint32_t off = memory.offset(p, bytes, what);
    const std::uint32_t end = off + static_cast<std::uint32_t>(bytes);
    if (write) memory.mark_written(off, bytes);
    else memory.check_written(wg, off, end, what, steps_[wg]);
    if (det_) det_->generic(wg, steps_[wg], off, end, write, what);
  }

  /// Fills [p, p + bytes) with NaN and remembers that nothing wrote it yet: a pipeline's
  /// output slot at the start of a block's run. Reading it before writing is reported.
  void poison(int wg, void* p, std::size_t bytes) {
    const std::uint32_t off = memory.offset(p, bytes, "poisoning");
    if (det_) det_->generic(wg, steps_[wg], off, off + static_cast<std::uint32_t>(bytes), true, "poisoning");
    memory.poison(off, bytes);
  }

  void fence_proxy_async(int wg) {
    if (det_) det_->fence_proxy_async(wg);
  }

  /// Checks made when a warpgroup returns from the kernel.
  void on_warpgroup_exit(int wg) {
    memory.warpgroup_exited(wg);
    copies.check_exit(wg);
    wgmma.check_exit(wg);
  }

  /// Checks made when every warpgroup has returned.
  void check_exit() const { barriers.check_exit(kernel_name, cta_name); }

  /// Who could still arrive on the barriers the blocked warpgroups wait for; st holds the
  /// state of this CTA's warpgroups.
  std::string deadlock_context(const std::vector<scheduler::state>& st) const { return deadlock_report(barriers, st); }
};

/// The warpgroup the calling host thread simulates.
struct current_thread {
  cta_state* cta = nullptr;
  int wg = 0;
};

inline current_thread& current() {
  thread_local current_thread t;
  return t;
}

inline cta_state& cta() {
  auto& c = current();
  if (!c.cta) throw error("tilepipe: a device operation was called outside a kernel launched by tilepipe");
  return *c.cta;
}

}  // namespace tilepipe::interpret
