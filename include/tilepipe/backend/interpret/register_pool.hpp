// setmaxnreg in a simulated cluster: a warpgroup's registers per thread move to and from
// its CTA's pool. The launch gives each thread 64K / (128 x warpgroups) registers, rounded
// down to 8; a decrease returns the difference to the pool, an increase waits until the
// pool holds it (on the GPU it retries forever: a pool that never fills is a hang, reported
// here as a deadlock).
#pragma once

#include "../../core/error.cuh"
#include "cluster_layout.hpp"
#include "scheduler.hpp"

#include <string>
#include <vector>

namespace tilepipe::interpret {

class register_pool {
 public:
  /// `thread_base`: the cluster's warpgroup 0 among sched's threads.
  register_pool(cluster_layout cluster, scheduler& sched, int thread_base)
      : cluster_(cluster), sched_(sched), thread_base_(thread_base), held_(cluster.warpgroups(), 0),
        pool_(cluster.ctas, 0) {}

  /// setmaxnreg.inc (increase) or .dec of warpgroup wg to `regs` registers per thread.
  void set(int wg, int regs, bool increase) {
    const int launch = 65536 / (128 * cluster_.wgs_per_cta) / 8 * 8;
    int& mine = held_[wg];
    if (mine == 0) mine = launch;
    if (increase ? regs < mine : regs > mine)
      detail::throw_formatted("setmaxnreg.%s to %d registers in warpgroup %d, which holds %d: an increase cannot lower "
                              "the count, nor a decrease raise it",
                              increase ? "inc" : "dec", regs, cluster_.local_wg(wg), mine);
    int& pool = pool_[cluster_.rank_of(wg)];
    const int delta = (regs - mine) * 128;
    if (delta > 0 && pool < delta)
      sched_.block_until(thread_base_ + wg, [&pool, delta] { return pool >= delta; }, [this, &pool, delta, regs, wg] {
        return "setmaxnreg.inc to " + std::to_string(regs) + " registers per thread (needs " + std::to_string(delta) +
               " from the CTA's pool, which holds " + std::to_string(pool) + "; warpgroup " +
               std::to_string(cluster_.local_wg(wg)) + ")";
      });
    pool -= delta;
    mine = regs;
  }

 private:
  cluster_layout cluster_;
  scheduler& sched_;
  const int thread_base_;
  std::vector<int> held_;  // per warpgroup: registers per thread; 0: the launch's share
  std::vector<int> pool_;  // per CTA rank: registers setmaxnreg.dec gave back
};

}  // namespace tilepipe::interpret
