// The asynchronous wgmma queue of each warpgroup of a simulated cluster: wgmma
// instructions are queued in groups (wgmma.commit_group) and run when their group is
// waited for (wgmma.wait_group), so a kernel that reads its accumulator too early reads
// the old values, as on the GPU. Each group is one access of the SMEM granules its
// operands read, for the race detector.
#pragma once

#include "../../core/error.cuh"
#include "race_detector.hpp"
#include "shared_memory.hpp"

#include <cstdint>
#include <functional>
#include <vector>

namespace tilepipe::interpret {

class wgmma_queue {
 public:
  /// steps: each warpgroup's pipeline step, for reports; det may be null.
  wgmma_queue(int warpgroups, const shared_memory& smem, race_detector* det, const std::vector<long long>& steps)
      : smem_(smem), det_(det), steps_(steps), uncommitted_(warpgroups), groups_(warpgroups) {}

  /// Queues one wgmma instruction of wg reading the given SMEM granules.
  void issue(int wg, std::function<void()> op, const std::vector<std::uint32_t>& granules) {
    for (std::uint32_t gr : granules)
      smem_.check_written(wg, gr * granule_bytes, (gr + 1) * granule_bytes, "wgmma operand", steps_[wg]);
    auto& g = uncommitted_[wg];
    if (det_) {
      if (!g.race_op) g.race_op = det_->start(access_kind::wgmma, wg, steps_[wg], "");
      det_->access(g.race_op, granules);
    }
    g.ops.push_back(std::move(op));
  }
  void commit(int wg) {
    groups_[wg].push_back(std::move(uncommitted_[wg]));
    uncommitted_[wg] = {};
  }
  /// wgmma.wait_group n: all but the newest n committed groups run.
  void wait(int wg, int n) {
    auto& g = groups_[wg];
    while (static_cast<int>(g.size()) > n) {
      for (auto& op : g.front().ops) op();
      if (det_ && g.front().race_op) det_->complete(g.front().race_op, det_->now(wg));
      g.erase(g.begin());
    }
  }

  /// Fails if warpgroup wg returns with wgmma groups in flight.
  void check_exit(int wg) const {
    if (!uncommitted_[wg].ops.empty() || !groups_[wg].empty())
      detail::throw_formatted("warpgroup %d left the kernel with wgmma groups in flight: tp::wgmma_wait<0>() first", wg);
  }

 private:
  struct group {
    std::vector<std::function<void()>> ops;
    std::uint32_t race_op = 0;
  };

  const shared_memory& smem_;
  race_detector* det_;
  const std::vector<long long>& steps_;
  std::vector<group> uncommitted_;           // per warpgroup
  std::vector<std::vector<group>> groups_;  // per warpgroup: committed, oldest first
};

}  // namespace tilepipe::interpret
