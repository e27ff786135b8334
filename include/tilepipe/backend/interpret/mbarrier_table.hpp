// The mbarriers of a simulated cluster, and the TMA loads in flight towards them: counts,
// transaction bytes and phases (mbarrier.hpp), and the barrier protocol checks: too many
// arrivals, transaction bytes that do not match the bytes delivered, a phase completing
// twice while a waiter still waits for the first (parity aliasing), barriers left
// part-way through a phase, loads nobody waited for.
//
// A TMA load lands when somebody waits on its barrier and needs it (copy_mode::eager: at
// issue), so a kernel that forgets a wait reads poison. Every arrival, delivery and wait
// also feeds the race detector.
#pragma once

#include "../../core/error.cuh"
#include "mbarrier.hpp"
#include "options.hpp"
#include "pending_copy.hpp"
#include "race_detector.hpp"
#include "scheduler.hpp"
#include "shared_memory.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace tilepipe::interpret {

class mbarrier_table {
 public:
  /// `thread_base`: the cluster's warpgroup 0 among sched's threads; det may be null.
  mbarrier_table(int warpgroups, shared_memory& smem, race_detector* det, scheduler& sched, int thread_base,
                 const options& opt, event_log log)
      : smem_(smem), det_(det), sched_(sched), thread_base_(thread_base), copies_(opt.copies), rng_(opt.seed),
        log_(log), vacuous_waits_(warpgroups), last_wait_(warpgroups, ~0u) {}

  barrier_state& at(const void* p, const char* what) {
    auto it = barriers_.find(smem_.offset(p, 8, what));
    if (it == barriers_.end()) detail::throw_formatted("%s on an mbarrier that was never initialised", what);
    return it->second;
  }

  void init(const void* p, std::uint32_t count) {
    if (count == 0) detail::throw_formatted("mbarrier initialised with an arrival count of 0");
    const std::uint32_t off = smem_.offset(p, 8, "mbarrier init");
    if (auto it = barriers_.find(off); it != barriers_.end()) retire(off, it->second, "re-initialised");
    barrier_state b;
    b.count = count;
    if (det_) b.actor = det_->new_actor();
    barriers_[off] = std::move(b);
  }

  /// mbarrier.inval: the barrier's memory may be reused; it must be idle.
  void inval(const void* p) {
    const std::uint32_t off = smem_.offset(p, 8, "mbarrier inval");
    auto it = barriers_.find(off);
    if (it == barriers_.end()) detail::throw_formatted("mbarrier inval on an mbarrier that was never initialised");
    retire(off, it->second, "invalidated");
    barriers_.erase(it);
  }

  void name(const void* p, std::string name, int slot) {
    auto& b = at(p, "naming");
    b.name = std::move(name);
    b.slot = slot;
  }

  void arrive(int wg, const void* p, std::uint32_t n, long long expect_tx) {
    auto& b = at(p, "arrive");
    b.tx += expect_tx;
    b.arrived += n;
    if (b.arrived > b.count)
      detail::throw_formatted("barrier protocol [too many arrivals]: warpgroup %d arrives on mbarrier %s: more arrivals "
                              "than its count",
                              wg, b.describe().c_str());
    b.arrivers_now |= 1u << wg;
    if (det_) det_->release(wg, b.phase_clock);
    if (b.arrived == b.count && b.tx < 0) expect_tx_mismatch(b, "the last arrival");
    maybe_complete(b);
  }

  /// Blocks warpgroup wg until the phase with the given parity of barrier p completed.
  void wait(int wg, const void* p, std::uint32_t parity, wait_where where = {}) {
    const std::uint32_t off = smem_.offset(p, 8, "mbarrier wait");
    at(p, "wait");
    if (parity > 1) detail::throw_formatted("mbarrier wait for parity %u: a parity is 0 or 1", parity);
    log_.record({event::barrier_wait, 0, wg, 0, off, parity, {}});
    // Pending loads land only if the wait needs them: a wait that passes without them
    // (parity 1 before the first phase) leaves them in flight, as they may be on the GPU.
    auto ready = [this, off, parity] {
      if ((barriers_.at(off).completed & 1u) != parity) return true;
      deliver_loads(off);
      return (barriers_.at(off).completed & 1u) != parity;
    };
    if (!ready()) {
      auto& b = barriers_.at(off);
      if (b.completed >= b.seen_by(wg) + 2) parity_behind(b, wg, parity, where);
      b.waiters.push_back({wg, b.completed, parity, where});
      sched_.block_until(thread_base_ + wg, ready, [this, off, parity, where] {
        const auto& b = barriers_.at(off);
        std::string s = "mbarrier " + b.describe() + " for phase parity " + std::to_string(parity);
        if (where.step >= 0) s += " at pipeline step " + std::to_string(where.step);
        return s;
      });
      auto& w = barriers_.at(off).waiters;
      std::erase_if(w, [wg](const barrier_waiter& x) { return x.wg == wg; });
    }
    auto& b = barriers_.at(off);
    b.mark_seen(wg);
    last_wait_[wg] = off;
    if (b.completed == 0) {  // parity 1 before any phase: passes at once (the "buffer starts free" idiom)
      auto& v = vacuous_waits_[wg];
      if (std::find(v.begin(), v.end(), off) == v.end()) v.push_back(off);
      return;
    }
    b.observed = std::max(b.observed, b.completed);
    if (det_) det_->acquire(wg, b.completed_clock);
  }

  /// A TMA load that completes on the barrier at c.barrier: in flight until a wait needs it.
  void add_load(pending_copy c) {
    if (copies_ == copy_mode::eager) {
      c.perform();
      complete_tx(c.barrier, c.bytes, c.op);
    } else {
      loads_.push_back(std::move(c));
    }
  }

  /// "'name' slot s" of the barrier at SMEM offset off.
  std::string label(std::uint32_t off) const { return barriers_.at(off).label(); }
  /// The barrier (SMEM offset) warpgroup wg waited for last (~0u: none).
  std::uint32_t last_wait(int wg) const { return last_wait_[wg]; }
  /// Whether warpgroup wg passed the barrier at off before the barrier completed any phase.
  bool passed_before_first_phase(int wg, std::uint32_t off) const {
    const auto& v = vacuous_waits_[wg];
    return std::find(v.begin(), v.end(), off) != v.end();
  }
  const std::map<std::uint32_t, barrier_state>& barriers() const { return barriers_; }
  const std::vector<pending_copy>& loads() const { return loads_; }

  /// Checks made when every warpgroup has returned.
  void check_exit(const std::string& kernel, const std::string& cta) const {
    if (!loads_.empty())
      detail::throw_formatted(
          "kernel %s, CTA %s: barrier protocol [load never waited]: %zu TMA load(s) were issued but never waited for "
          "(%s completing on barrier %s)",
          kernel.c_str(), cta.c_str(), loads_.size(), loads_.front().what.c_str(),
          barriers_.count(loads_.front().barrier) ? barriers_.at(loads_.front().barrier).label().c_str() : "?");
    for (const auto& [off, b] : barriers_) {
      if (b.arrived != 0 || b.tx != 0)
        detail::throw_formatted(
            "kernel %s, CTA %s: barrier protocol [pending at exit]: the kernel exits with mbarrier %s part-way through "
            "phase %u: %u of %u arrivals (from %s), %lld transaction bytes outstanding",
            kernel.c_str(), cta.c_str(), b.label().c_str(), b.completed, b.arrived, b.count,
            warpgroup_list(b.arrivers_now).c_str(), b.tx);
      check_loads_observed(b, "exits");
    }
  }

  /// A hint for a race report: the earlier access is a TMA load whose barrier the later
  /// warpgroup passed before it completed any phase.
  std::string race_hint(const access_op& e, const access_op& l) const {
    if (e.kind != access_kind::tma_load || !passed_before_first_phase(l.wg, e.barrier)) return "";
    return "\n  hint: warpgroup " + std::to_string(l.wg) +
           " waited on the load's barrier for parity 1 before the barrier had completed any phase, so that wait "
           "returned at once: wrong initial phase? (the first wait for a barrier that TMA loads complete is for "
           "parity 0)";
  }

 private:
  /// A TMA load delivered its bytes to the barrier at `off`.
  void complete_tx(std::uint32_t off, long long bytes, std::uint32_t op) {
    auto& b = barriers_.at(off);
    b.tx -= bytes;
    b.delivered_bytes += bytes;
    if (op) b.delivered.push_back(op);
    b.loads_delivered = true;
    if (b.tx < 0 && b.arrived == b.count) expect_tx_mismatch(b, "a TMA load");
    maybe_complete(b);
  }

  /// Performs the pending loads that complete on the barrier at barrier_off.
  void deliver_loads(std::uint32_t barrier_off) {
    std::vector<pending_copy> mine;
    for (auto it = loads_.begin(); it != loads_.end();) {
      if (it->barrier == barrier_off) {
        mine.push_back(std::move(*it));
        it = loads_.erase(it);
      } else {
        ++it;
      }
    }
    if (copies_ == copy_mode::shuffled) std::shuffle(mine.begin(), mine.end(), rng_);
    for (auto& c : mine) {
      c.perform();
      complete_tx(c.barrier, c.bytes, c.op);
    }
  }

  [[noreturn]] void expect_tx_mismatch(const barrier_state& b, const char* by) const {
    detail::throw_formatted(
        "barrier protocol [expect_tx mismatch]: mbarrier %s has all %u arrivals of phase %u, and after %s its "
        "transaction count is %lld: the loads deliver %lld bytes more than expect_tx announced. On the GPU the phase "
        "completes while those bytes are still arriving (waiters read a partly written buffer) and the surplus is "
        "counted against the next phase",
        b.label().c_str(), b.count, b.completed, by, b.tx, -b.tx);
  }

  // A wait blocks although its barrier completed two or more phases since this warpgroup
  // last saw it: the phase it meant to wait for is gone and it now waits for a later one
  // of the same parity.
  [[noreturn]] void parity_behind(const barrier_state& b, int wg, std::uint32_t parity, wait_where where) const {
    const std::uint32_t seen = b.seen_by(wg);
    const std::string at = where.step >= 0 ? " at pipeline step " + std::to_string(where.step) : "";
    const std::string since = seen ? "since warpgroup " + std::to_string(wg) + " last observed it"
                                   : "and warpgroup " + std::to_string(wg) + " has observed none of them";
    detail::throw_formatted(
        "barrier protocol [parity aliasing]: warpgroup %d waits on mbarrier %s for parity %u%s, but the barrier has "
        "completed %u phase(s) %s, so the wait now blocks for phase %u: with parity waits, phases k and k + 2 look "
        "the same. The side that arrives on this barrier ran ahead of the waiter (is a wait missing on the way "
        "back, e.g. the consumer's wait on its ready barrier?)",
        wg, b.label().c_str(), parity, at.c_str(), b.completed - seen, since.c_str(), b.completed);
  }

  void maybe_complete(barrier_state& b) {
    if (b.arrived != b.count || b.tx != 0) return;
    b.arrived = 0;
    b.delivered_bytes = 0;
    ++b.completed;
    b.arrivers_ever |= b.arrivers_now;
    b.arrivers_now = 0;
    if (b.loads_delivered) b.last_load_phase = b.completed;
    b.loads_delivered = false;
    if (det_) {
      b.phase_clock.set(b.actor, b.completed);
      b.completed_clock = b.phase_clock;
      b.phase_clock.clear();
      for (std::uint32_t op : b.delivered) det_->complete(op, {b.actor, b.completed}, b.completed);
    }
    b.delivered.clear();
    for (const auto& w : b.waiters)
      if (w.phase + 1 < b.completed)
        detail::throw_formatted(
            "barrier protocol [parity aliasing]: mbarrier %s completed phase %u while warpgroup %d was still waiting "
            "for phase %u (parity %u): the phase it waits for completed and the barrier moved on twice before the "
            "waiter saw it, so on the GPU it may miss its phase and hang. The side that arrives runs two phases ahead: "
            "it must wait for the waiter (e.g. on a consumed barrier) before arriving again",
            b.label().c_str(), b.completed - 1, w.wg, w.phase, w.parity);
  }

  // A barrier leaves service (inval or re-init): nobody may still use it.
  void retire(std::uint32_t off, const barrier_state& b, const char* how) const {
    if (!b.waiters.empty())
      detail::throw_formatted("barrier protocol [barrier in use]: mbarrier %s %s while warpgroup %d waits on it",
                              b.label().c_str(), how, b.waiters.front().wg);
    for (const auto& c : loads_)
      if (c.barrier == off)
        detail::throw_formatted("barrier protocol [load never waited]: mbarrier %s %s while a %s completing on it was "
                                "never waited for",
                                b.label().c_str(), how, c.what.c_str());
    if (b.arrived != 0 || b.tx != 0)
      detail::throw_formatted("barrier protocol [barrier in use]: mbarrier %s %s part-way through phase %u: %u of %u "
                              "arrivals (from %s), %lld transaction bytes outstanding",
                              b.label().c_str(), how, b.completed, b.arrived, b.count,
                              warpgroup_list(b.arrivers_now).c_str(), b.tx);
    check_loads_observed(b, how);
  }

  void check_loads_observed(const barrier_state& b, const char* how) const {
    if (b.last_load_phase > b.observed)
      detail::throw_formatted(
          "barrier protocol [load never waited]: TMA loads completed phase %u of mbarrier %s, but no wait returned for "
          "that phase before the barrier %s: the loaded data was never waited for",
          b.last_load_phase - 1, b.label().c_str(), how);
  }

  shared_memory& smem_;
  race_detector* det_;
  scheduler& sched_;
  const int thread_base_;
  const copy_mode copies_;
  std::mt19937_64 rng_;  // copy_mode::shuffled
  event_log log_;
  std::map<std::uint32_t, barrier_state> barriers_;  // by SMEM offset
  std::vector<pending_copy> loads_;
  std::vector<std::vector<std::uint32_t>> vacuous_waits_;  // per warpgroup: barriers it passed before they completed any phase
  std::vector<std::uint32_t> last_wait_;                   // per warpgroup: the barrier it waited for last
};

}  // namespace tilepipe::interpret
