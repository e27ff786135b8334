// The TMA copy engine of a simulated cluster: loads complete on mbarriers
// (mbarrier_table.hpp), stores and bulk reductions in bulk groups per warpgroup, each performed when its group
// is waited for (copy_mode::eager: at issue, still counted in its group). Copies are
// recorded in the launch's event log and tracked by the race detectors (SMEM granules,
// swizzle included; a store to a symmetric buffer also by the devices' peer_memory).
#pragma once

#include "../../core/error.cuh"
#include "../../core/tma_desc.cuh"
#include "mbarrier_table.hpp"
#include "options.hpp"
#include "peer_memory.hpp"
#include "pending_copy.hpp"
#include "race_detector.hpp"

#include <cstdint>
#include <vector>

namespace tilepipe::interpret {

class copy_engine {
 public:
  /// steps: each warpgroup's pipeline step, for reports; det may be null.
  copy_engine(int warpgroups, mbarrier_table& barriers, race_detector* det, const std::vector<long long>& steps,
              const peer_link& peers, const options& opt, event_log log)
      : barriers_(barriers), det_(det), steps_(steps), peers_(peers), eager_(opt.copies == copy_mode::eager),
        log_(log), uncommitted_(warpgroups), groups_(warpgroups) {}

  /// Tells the race detector about a TMA load of box `d` into dst_off by wg; returns its id.
  std::uint32_t track_load(int wg, const tma_desc& d, std::uint32_t dst_off, std::uint32_t bar_off) {
    if (!det_) return 0;
    const std::uint32_t id =
        det_->start(access_kind::tma_load, wg, steps_[wg], "completing on barrier " + barriers_.label(bar_off), bar_off);
    if (auto it = barriers_.barriers().find(barriers_.last_wait(wg)); it != barriers_.barriers().end())
      det_->note_after(id, it->second.label());
    det_->access(id, box_granules(d, dst_off));
    return id;
  }

  /// Tells the race detector about a TMA store of box `d` from src_off by wg.
  std::uint32_t track_store(int wg, const tma_desc& d, std::uint32_t src_off) {
    if (!det_) return 0;
    const std::uint32_t id = det_->start(access_kind::tma_store, wg, steps_[wg], "");
    det_->access(id, box_granules(d, src_off));
    return id;
  }

  /// Tells the race detector about a bulk copy (no tensor map) reading [src_off, src_off + bytes) for wg.
  std::uint32_t track_bulk_read(int wg, std::uint32_t src_off, std::uint32_t bytes, const char* what) {
    if (!det_) return 0;
    const std::uint32_t id = det_->start(access_kind::tma_store, wg, steps_[wg], what);
    granules_.clear();
    for (std::uint32_t g = src_off / granule_bytes; g < (src_off + bytes + granule_bytes - 1) / granule_bytes; ++g)
      granules_.push_back(g);
    det_->access(id, granules_);
    return id;
  }

  void issue_load(pending_copy c) { barriers_.add_load(std::move(c)); }

  void issue_store(int wg, pending_copy c) {
    if (eager_) {
      c.perform();
      c.perform = [] {};  // done; it still belongs to a bulk group until that is waited for
    }
    uncommitted_[wg].push_back(std::move(c));
  }

  void commit_stores(int wg) {
    log_.record({event::bulk_commit, 0, wg, 0, 0, 0, {}});
    groups_[wg].push_back(std::move(uncommitted_[wg]));
    uncommitted_[wg].clear();
  }

  /// cp.async.bulk.wait_group(.read) N: all but the newest n committed groups finish.
  void wait_stores(int wg, int n) {
    log_.record({event::bulk_wait, 0, wg, 0, 0, static_cast<std::uint32_t>(n), {}});
    auto& g = groups_[wg];
    while (static_cast<int>(g.size()) > n) {
      for (auto& c : g.front()) {
        c.perform();
        if (det_ && c.op) det_->complete(c.op, det_->now(wg));
        if (peers_.memory && c.peer_op) peers_.memory->complete(c.peer_op, peers_.actor);
      }
      g.erase(g.begin());
    }
  }

  /// Fails if warpgroup wg returns with stores still reading shared memory.
  void check_exit(int wg) const {
    if (!uncommitted_[wg].empty() || !groups_[wg].empty())
      detail::throw_formatted(
          "warpgroup %d left the kernel with TMA stores still reading shared memory: wait for them "
          "(tp::bulk_wait<0>()) before returning",
          wg);
  }

 private:
  // Granules (16 bytes) a TMA box at smem offset `base` covers, swizzle included.
  const std::vector<std::uint32_t>& box_granules(const tma_desc& d, std::uint32_t base) {
    long long bytes = d.elem_bytes;
    for (int i = 0; i < d.rank; ++i) bytes *= d.box[i];
    granules_.clear();
    for (long long lin = 0; lin < bytes; lin += granule_bytes)
      granules_.push_back(swizzle_address(base + static_cast<std::uint32_t>(lin), d.swizzle) / granule_bytes);
    return granules_;
  }

  mbarrier_table& barriers_;
  race_detector* det_;
  const std::vector<long long>& steps_;
  const peer_link& peers_;
  const bool eager_;
  event_log log_;
  std::vector<std::vector<pending_copy>> uncommitted_;            // per warpgroup: stores not committed yet
  std::vector<std::vector<std::vector<pending_copy>>> groups_;  // per warpgroup: committed groups, oldest first
  std::vector<std::uint32_t> granules_;
};

}  // namespace tilepipe::interpret
