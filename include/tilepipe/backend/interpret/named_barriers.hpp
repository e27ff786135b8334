// The named barriers of a simulated cluster (bar.sync / bar.arrive: 16 per CTA) and the
// cluster barrier (barrier.cluster). The arrivals publish what their warpgroups did before;
// the waiters see all of it (race detector).
#pragma once

#include "../../core/error.cuh"
#include "cluster_layout.hpp"
#include "mbarrier.hpp"
#include "race_detector.hpp"
#include "scheduler.hpp"
#include "vector_clock.hpp"

#include <cstdint>
#include <map>
#include <string>

namespace tilepipe::interpret {

class named_barriers {
 public:
  /// `thread_base`: the cluster's warpgroup 0 among sched's threads; det may be null.
  named_barriers(cluster_layout cluster, race_detector* det, scheduler& sched, int thread_base)
      : cluster_(cluster), det_(det), sched_(sched), thread_base_(thread_base) {}

  /// bar.sync (wait = true) or bar.arrive (wait = false) of warpgroup wg's 128 threads.
  void sync(int wg, int id, int threads, bool wait = true) {
    if (id != cluster_barrier_key) id += ids_per_cta * cluster_.rank_of(wg);  // each CTA has its own 16 barriers
    auto& nb = named_[id];
    if (nb.arrived == 0) nb.threads = threads;
    if (nb.threads != threads)
      detail::throw_formatted("named barrier %d used with %d and %d threads at once", id, nb.threads, threads);
    if (nb.who & (1u << wg))
      detail::throw_formatted("named barrier %d: warpgroup %d arrived twice in one phase (%d of %d threads arrived): "
                              "on the GPU its threads would count as others'",
                              id % ids_per_cta, wg, nb.arrived, threads);
    nb.arrived += 128;
    nb.who |= 1u << wg;
    if (wait) ++nb.waiting;
    if (det_) det_->release(wg, nb.gathering);
    if (nb.arrived == threads) {
      const int others = nb.waiting - (wait ? 1 : 0);  // blocked waiters, woken below
      if (det_) {
        if (wait) det_->acquire(wg, nb.gathering);
        if (others > 0) nb.released[nb.generation] = {nb.gathering, others};
        nb.gathering.clear();
      }
      nb.arrived = 0;
      nb.who = 0;
      nb.waiting = 0;
      ++nb.generation;
      sched_.yield(thread_base_ + wg);  // the others resume first if their index is lower
      return;
    }
    if (!wait) return;
    const std::uint64_t gen = nb.generation;
    sched_.block_until(thread_base_ + wg, [this, id, gen] { return named_[id].generation != gen; },
                       [this, id, threads] {
                         return (id == cluster_barrier_key ? std::string("the cluster barrier")
                                                           : "named barrier " + std::to_string(id % ids_per_cta)) +
                                " (" + std::to_string(named_[id].arrived) + " of " + std::to_string(threads) +
                                " threads arrived: " + warpgroup_list(named_[id].who) + ")";
                       });
    if (det_) {
      auto& nb2 = named_[id];
      auto it = nb2.released.find(gen);
      det_->acquire(wg, it->second.clock);
      if (--it->second.to_wake == 0) nb2.released.erase(it);
    }
  }

  /// barrier.cluster: every warpgroup of every CTA of the cluster.
  void cluster_sync(int wg) { sync(wg, cluster_barrier_key, cluster_.warpgroups() * 128); }

 private:
  struct state {
    int threads = 0;
    int arrived = 0;
    int waiting = 0;   // warpgroups of this generation that wait (bar.sync), not only arrive
    unsigned who = 0;  // warpgroups arrived in this generation
    std::uint64_t generation = 0;
    vector_clock gathering;  // what the arrivals of this generation published
    struct released_t {
      vector_clock clock;
      int to_wake;
    };
    std::map<std::uint64_t, released_t> released;  // completed generations not yet acquired by all
  };

  static constexpr int ids_per_cta = 16;          // bar.sync ids
  static constexpr int cluster_barrier_key = -1;  // barrier.cluster among the named barriers

  cluster_layout cluster_;
  race_detector* det_;
  scheduler& sched_;
  const int thread_base_;
  std::map<int, state> named_;
};

}  // namespace tilepipe::interpret
