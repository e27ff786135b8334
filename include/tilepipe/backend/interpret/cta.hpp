// The simulated CTA: shared memory with the real byte layout and budget, mbarriers with
// counts, transaction bytes and phases, named barriers, the asynchronous copy engine and
// the asynchronous wgmma queue of each warpgroup.
//
// A thread-block cluster is simulated as one cta_state holding all its CTAs: their shared
// memories lie one after the other (smem_stride apart) and their warpgroups are numbered
// across the cluster (CTA rank r's warpgroup w is r * wgs_per_cta + w), so one scheduler,
// one set of barriers and one race detector see every cross-CTA arrival and multicast.
//
// Copies and wgmmas are deferred: a TMA load lands when somebody waits on its barrier, a
// TMA store when its bulk group is waited for, a wgmma group at wgmma_wait. So a kernel
// that forgets a wait reads poison, as it would read stale data on the GPU.
//
// Every synchronisation also feeds the race detector (race_detector.hpp) and the barrier
// protocol checks: too many arrivals, transaction bytes that do not match the bytes
// delivered, a phase completing twice while a waiter still waits for the first (parity
// aliasing), barriers left part-way through a phase, loads nobody waited for.
#pragma once

#include "../../core/error.cuh"
#include "../../core/tma_desc.cuh"
#include "../../core/wgmma_desc.cuh"
#include "mbarrier.hpp"
#include "peer_memory.hpp"
#include "race_detector.hpp"
#include "scheduler.hpp"
#include "smem_regions.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
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

struct pending_copy {
  std::function<void()> perform;
  std::uint32_t barrier = 0;  // SMEM offset of the barrier a load completes on
  long long bytes = 0;
  std::string what;
  std::uint32_t op = 0;  // the race detector's record of it (0 without detection)
  std::uint32_t peer_op = 0;  // a store's record in the launch's peer_memory (0: none)
};

struct wgmma_group {
  std::vector<std::function<void()>> ops;
  std::uint32_t race_op = 0;
};

struct warpgroup_state {
  int index = 0;
  long long step = -1;  // pipeline step, as the pipeline announces it
  std::vector<pending_copy> stores_uncommitted;
  std::vector<std::vector<pending_copy>> store_groups;  // committed, oldest first
  wgmma_group wgmma_uncommitted;
  std::vector<wgmma_group> wgmma_groups;
  std::vector<std::uint32_t> vacuous_waits;  // barriers it passed before they completed any phase
  std::uint32_t last_wait = ~0u;             // the barrier it waited for last (SMEM offset)
  int registers = 0;                         // per thread (setmaxnreg); 0: the launch's share
};

class grid_runner;

class cta_state {
 public:
  /// num_warpgroups and smem_bytes are per CTA; `cluster` CTAs are simulated together.
  /// `shared`: the scheduler of a launch over several simulated devices, whose threads
  /// thread_base .. thread_base + warpgroups - 1 are this CTA's (null: the CTA's own).
  cta_state(int num_warpgroups, std::size_t smem_bytes, const options& opt, std::string kernel, std::string cta,
            int cta_number = 0, int cluster = 1, scheduler* shared = nullptr, int thread_base = 0)
      : own_sched_(shared ? nullptr : std::make_unique<scheduler>(num_warpgroups * cluster)),
        sched(shared ? *shared : *own_sched_),
        thread_base(thread_base),
        wgs(num_warpgroups * cluster),
        kernel_name(std::move(kernel)),
        cta_name(std::move(cta)),
        smem_size(smem_bytes),
        cluster_size(cluster),
        wgs_per_cta(num_warpgroups),
        smem_stride(round_up(smem_bytes ? smem_bytes : 1024, 1024)),
        smem_total_((cluster - 1) * smem_stride + smem_bytes),
        exited_(cluster, 0),
        register_pool_(cluster, 0),
        cta_number_(cta_number),
        opt_(opt),
        rng_(opt.seed) {
    smem_ = static_cast<unsigned char*>(std::aligned_alloc(1024, cluster * smem_stride));
    std::memset(smem_, 0xFF, cluster * smem_stride);  // poison: NaN in every float format
    for (int i = 0; i < num_warpgroups * cluster; ++i) wgs[i].index = i;
    if (!shared) sched.deadlock_context = [this](const std::vector<scheduler::state>& st) { return deadlock_context(st); };
    if (opt.detect_races) {
      det_ = std::make_unique<race_detector>(num_warpgroups * cluster, smem_total_);
      det_->describe_bytes = [this](std::uint32_t lo, std::uint32_t hi) { return regions_.describe(lo, hi); };
      det_->explain = [this](const access_op& e, const access_op& l) { return explain_race(e, l); };
    }
  }
  ~cta_state() { std::free(smem_); }
  cta_state(const cta_state&) = delete;
  cta_state& operator=(const cta_state&) = delete;

  /// The shared memory of all CTAs; offsets (smem_offset) are relative to it.
  unsigned char* smem() const { return smem_; }
  /// The shared memory of the CTA of cluster rank `rank`.
  unsigned char* smem_of(int rank) const { return smem_ + rank * smem_stride; }
  const options& opts() const { return opt_; }
  /// The cluster's place in the order the grid's clusters ran.
  int number() const { return cta_number_; }
  race_detector* detector() const { return det_.get(); }

  /// Cluster rank of the CTA warpgroup wg (numbered across the cluster) belongs to, and
  /// its index within that CTA.
  int rank_of(int wg) const { return wg / wgs_per_cta; }
  int local_wg(int wg) const { return wg % wgs_per_cta; }

  std::uint32_t smem_offset(const void* p, std::size_t bytes, const char* what) const {
    const auto* c = static_cast<const unsigned char*>(p);
    if (c < smem_ || c + bytes > smem_ + smem_total_)
      detail::throw_formatted("%s: address is not inside this CTA's %zu bytes of shared memory", what, smem_size);
    return static_cast<std::uint32_t>(c - smem_);
  }

  /// The shared-window address of p as warpgroup wg's CTA sees it (what the GPU puts in
  /// wgmma descriptors): the offset from that CTA's shared memory.
  std::uint32_t local_address(int wg, const void* p) const {
    const std::uint32_t off = smem_offset(p, 0, "shared address");
    const std::uint32_t base = static_cast<std::uint32_t>(rank_of(wg) * smem_stride);
    if (off < base || off > base + smem_size)
      detail::throw_formatted("warpgroup %d uses an address in the shared memory of another CTA of its cluster", wg);
    return off - base;
  }

  /// The same SMEM location as p (in warpgroup wg's CTA) in the CTA of rank `rank` (mapa).
  unsigned char* peer(int wg, const void* p, int rank, const char* what) const {
    if (rank < 0 || rank >= cluster_size)
      detail::throw_formatted("%s: CTA rank %d is outside the cluster of %d CTAs", what, rank, cluster_size);
    if (exited_[rank] == wgs_per_cta && rank != rank_of(wg))
      detail::throw_formatted("%s: CTA rank %d of the cluster has exited; a CTA must not exit while others still "
                              "arrive on its barriers or write its shared memory (end with a cluster sync)",
                              what, rank);
    return smem_of(rank) + local_address(wg, p);
  }

  /// barrier.cluster: every warpgroup of every CTA of the cluster.
  /// setmaxnreg: a warpgroup's registers per thread move to and from its CTA's pool. The
  /// launch gives each thread 64K / (128 x warpgroups) registers, rounded down to 8; a
  /// decrease returns the difference to the pool, an increase waits until the pool holds it
  /// (on the GPU it retries forever: a pool that never fills is a hang, reported here).
  void set_registers(int wg, int regs, bool increase) {
    const int launch = 65536 / (128 * wgs_per_cta) / 8 * 8;
    int& mine = wgs[wg].registers;
    if (mine == 0) mine = launch;
    if (increase ? regs < mine : regs > mine)
      detail::throw_formatted("setmaxnreg.%s to %d registers in warpgroup %d, which holds %d: an increase cannot lower "
                              "the count, nor a decrease raise it",
                              increase ? "inc" : "dec", regs, wg % wgs_per_cta, mine);
    int& pool = register_pool_[wg / wgs_per_cta];
    const int delta = (regs - mine) * 128;
    if (delta > 0 && pool < delta)
      sched.block_until(thread_base + wg, [&pool, delta] { return pool >= delta; }, [this, &pool, delta, regs, wg] {
        return "setmaxnreg.inc to " + std::to_string(regs) + " registers per thread (needs " + std::to_string(delta) +
               " from the CTA's pool, which holds " + std::to_string(pool) + "; warpgroup " +
               std::to_string(wg % wgs_per_cta) + ")";
      });
    pool -= delta;
    mine = regs;
  }

  void cluster_sync(int wg) { named_barrier_sync(wg, cluster_barrier_key, cluster_size * wgs_per_cta * 128); }

  // ---- annotations -------------------------------------------------------------------
  void name_region(const void* p, std::size_t bytes, const char* what, int index, int slot) {
    regions_.name(smem_offset(p, bytes, "naming shared memory"), static_cast<std::uint32_t>(bytes), what, index, slot);
  }

  /// The pipeline step warpgroup wg runs (for reports); returns the previous one.
  long long set_step(int wg, long long step) {
    const long long old = wgs[wg].step;
    wgs[wg].step = step;
    return old;
  }

  /// A generic (non-TMA, non-wgmma) access of [p, p + bytes) by warpgroup wg.
  void note_access(int wg, const void* p, std::size_t bytes, bool write, const char* what) {
    const std::uint32_t off = smem_offset(p, bytes, what);
    const std::uint32_t end = off + static_cast<std::uint32_t>(bytes);
    if (write) std::fill(unwritten_.begin() + off, unwritten_.begin() + end, false);
    else check_written(wg, off, end, what);
    if (det_) det_->generic(wg, wgs[wg].step, off, end, write, what);
  }

  /// Fills [p, p + bytes) with NaN and remembers that nothing wrote it yet: a pipeline's
  /// output slot at the start of a block's run. Reading it before writing is reported.
  void poison(int wg, void* p, std::size_t bytes) {
    const std::uint32_t off = smem_offset(p, bytes, "poisoning");
    if (det_) det_->generic(wg, wgs[wg].step, off, off + static_cast<std::uint32_t>(bytes), true, "poisoning");
    std::memset(p, 0xFF, bytes);
    std::fill(unwritten_.begin() + off, unwritten_.begin() + off + bytes, true);
  }

  /// Names what the region starting at p holds now (an output block), for reports.
  void note_contents(const void* p, std::string contents) {
    regions_.note_contents(smem_offset(p, 0, "naming shared memory"), std::move(contents));
  }

  void fence_proxy_async(int wg) {
    if (det_) det_->fence_proxy_async(wg);
  }

  // ---- mbarriers ------------------------------------------------------------------
  barrier_state& barrier(const void* p, const char* what) {
    auto it = barriers_.find(smem_offset(p, 8, what));
    if (it == barriers_.end()) detail::throw_formatted("%s on an mbarrier that was never initialised", what);
    return it->second;
  }

  void barrier_init(const void* p, std::uint32_t count) {
    if (count == 0) detail::throw_formatted("mbarrier initialised with an arrival count of 0");
    const std::uint32_t off = smem_offset(p, 8, "mbarrier init");
    if (auto it = barriers_.find(off); it != barriers_.end()) retire_barrier(off, it->second, "re-initialised");
    barrier_state b;
    b.count = count;
    if (det_) b.actor = det_->new_actor();
    barriers_[off] = std::move(b);
  }

  /// mbarrier.inval: the barrier's memory may be reused; it must be idle.
  void barrier_inval(const void* p) {
    const std::uint32_t off = smem_offset(p, 8, "mbarrier inval");
    auto it = barriers_.find(off);
    if (it == barriers_.end()) detail::throw_formatted("mbarrier inval on an mbarrier that was never initialised");
    retire_barrier(off, it->second, "invalidated");
    barriers_.erase(it);
  }

  void barrier_name(const void* p, std::string name, int slot) {
    auto& b = barrier(p, "naming");
    b.name = std::move(name);
    b.slot = slot;
  }

  void barrier_arrive(int wg, const void* p, std::uint32_t n, long long expect_tx) {
    auto& b = barrier(p, "arrive");
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

  /// A TMA load delivered its bytes to the barrier at `off`.
  void barrier_complete_tx(std::uint32_t off, long long bytes, std::uint32_t op) {
    auto& b = barriers_.at(off);
    b.tx -= bytes;
    b.delivered_bytes += bytes;
    if (op) b.delivered.push_back(op);
    b.loads_delivered = true;
    if (b.tx < 0 && b.arrived == b.count) expect_tx_mismatch(b, "a TMA load");
    maybe_complete(b);
  }

  /// Blocks warpgroup wg until the phase with the given parity of barrier p completed.
  void barrier_wait(int wg, const void* p, std::uint32_t parity, wait_where where = {}) {
    const std::uint32_t off = smem_offset(p, 8, "mbarrier wait");
    barrier(p, "wait");
    if (parity > 1) detail::throw_formatted("mbarrier wait for parity %u: a parity is 0 or 1", parity);
    record({event::barrier_wait, 0, wg, 0, off, parity, {}});
    // Pending loads land only if the wait needs them: a wait that passes without them
    // (parity 1 before the first phase) leaves them in flight, as they may be on the GPU.
    auto ready = [this, off, parity] {
      if ((barriers_.at(off).completed & 1u) != parity) return true;
      flush_loads(off);
      return (barriers_.at(off).completed & 1u) != parity;
    };
    if (!ready()) {
      auto& b = barriers_.at(off);
      if (b.completed >= b.seen_by(wg) + 2) parity_behind(b, wg, parity, where);
      b.waiters.push_back({wg, b.completed, parity, where});
      sched.block_until(thread_base + wg, ready, [this, off, parity, where] {
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
    wgs[wg].last_wait = off;
    if (b.completed == 0) {  // parity 1 before any phase: passes at once (the "buffer starts free" idiom)
      auto& v = wgs[wg].vacuous_waits;
      if (std::find(v.begin(), v.end(), off) == v.end()) v.push_back(off);
      return;
    }
    b.observed = std::max(b.observed, b.completed);
    if (det_) det_->acquire(wg, b.completed_clock);
  }

  // ---- named barriers (bar.sync) ---------------------------------------------------
  /// bar.sync (wait = true) or bar.arrive (wait = false) of warpgroup wg's 128 threads.
  /// The arrivals publish what their warpgroups did before; the waiters see all of it.
  void named_barrier_sync(int wg, int id, int threads, bool wait = true) {
    if (id != cluster_barrier_key) id += named_ids * rank_of(wg);  // each CTA has its own 16 barriers
    auto& nb = named_[id];
    if (nb.arrived == 0) nb.threads = threads;
    if (nb.threads != threads)
      detail::throw_formatted("named barrier %d used with %d and %d threads at once", id, nb.threads, threads);
    if (nb.who & (1u << wg))
      detail::throw_formatted("named barrier %d: warpgroup %d arrived twice in one phase (%d of %d threads arrived): "
                              "on the GPU its threads would count as others'",
                              id % named_ids, wg, nb.arrived, threads);
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
      sched.yield(thread_base + wg);  // the others resume first if their index is lower
      return;
    }
    if (!wait) return;
    const std::uint64_t gen = nb.generation;
    sched.block_until(thread_base + wg, [this, id, gen] { return named_[id].generation != gen; },
                      [this, id, threads] {
                        return (id == cluster_barrier_key ? std::string("the cluster barrier")
                                                          : "named barrier " + std::to_string(id % named_ids)) +
                               " (" + std::to_string(named_[id].arrived) +
                               " of " + std::to_string(threads) + " threads arrived: " +
                               warpgroup_list(named_[id].who) + ")";
                      });
    if (det_) {
      auto& nb2 = named_[id];
      auto it = nb2.released.find(gen);
      det_->acquire(wg, it->second.clock);
      if (--it->second.to_wake == 0) nb2.released.erase(it);
    }
  }

  // ---- the copy engine -------------------------------------------------------------
  /// Appends to the launch's event log, if it keeps one.
  void record(event e) {
    if (!opt_.events) return;
    e.cta = cta_number_;
    opt_.events->push_back(e);
  }

  /// Tells the race detector about a TMA load of box `d` into dst_off by wg; returns its id.
  std::uint32_t track_load(int wg, const tma_desc& d, std::uint32_t dst_off, std::uint32_t bar_off) {
    if (!det_) return 0;
    const std::uint32_t id =
        det_->start(access_kind::tma_load, wg, wgs[wg].step, "completing on barrier " + barriers_.at(bar_off).label(), bar_off);
    if (auto it = barriers_.find(wgs[wg].last_wait); it != barriers_.end()) det_->note_after(id, it->second.label());
    det_->access(id, box_granules(d, dst_off));
    return id;
  }

  /// Tells the race detector about a TMA store of box `d` from src_off by wg.
  std::uint32_t track_store(int wg, const tma_desc& d, std::uint32_t src_off) {
    if (!det_) return 0;
    const std::uint32_t id = det_->start(access_kind::tma_store, wg, wgs[wg].step, "");
    det_->access(id, box_granules(d, src_off));
    return id;
  }

  /// TMA load of `bytes` into [off, off + bytes): those bytes are written from now on.
  void mark_written(std::uint32_t off, long long bytes) {
    std::fill(unwritten_.begin() + off, unwritten_.begin() + off + bytes, false);
  }

  void issue_load(pending_copy c) {
    if (opt_.copies == copy_mode::eager) {
      c.perform();
      barrier_complete_tx(c.barrier, c.bytes, c.op);
    } else {
      loads_.push_back(std::move(c));
    }
  }

  void issue_store(int wg, pending_copy c) {
    if (opt_.copies == copy_mode::eager) {
      c.perform();
      c.perform = [] {};  // done; it still belongs to a bulk group until that is waited for
    }
    wgs[wg].stores_uncommitted.push_back(std::move(c));
  }

  void commit_stores(int wg) {
    record({event::bulk_commit, 0, wg, 0, 0, 0, {}});
    auto& w = wgs[wg];
    w.store_groups.push_back(std::move(w.stores_uncommitted));
    w.stores_uncommitted.clear();
  }

  /// cp.async.bulk.wait_group(.read) N: all but the newest n committed groups finish.
  void wait_stores(int wg, int n) {
    record({event::bulk_wait, 0, wg, 0, 0, static_cast<std::uint32_t>(n), {}});
    auto& g = wgs[wg].store_groups;
    while (static_cast<int>(g.size()) > n) {
      for (auto& c : g.front()) {
        c.perform();
        if (det_ && c.op) det_->complete(c.op, det_->now(wg));
        if (peers && c.peer_op) peers->complete(c.peer_op, peer_actor);
      }
      g.erase(g.begin());
    }
  }

  // ---- asynchronous wgmma ----------------------------------------------------------
  /// Queues one wgmma instruction of wg reading the given SMEM granules.
  void issue_wgmma(int wg, std::function<void()> op, const std::vector<std::uint32_t>& granules) {
    for (std::uint32_t gr : granules) check_written(wg, gr * granule_bytes, (gr + 1) * granule_bytes, "wgmma operand");
    auto& g = wgs[wg].wgmma_uncommitted;
    if (det_) {
      if (!g.race_op) g.race_op = det_->start(access_kind::wgmma, wg, wgs[wg].step, "");
      det_->access(g.race_op, granules);
    }
    g.ops.push_back(std::move(op));
  }
  void commit_wgmma(int wg) {
    auto& w = wgs[wg];
    w.wgmma_groups.push_back(std::move(w.wgmma_uncommitted));
    w.wgmma_uncommitted = {};
  }
  void wait_wgmma(int wg, int n) {
    auto& g = wgs[wg].wgmma_groups;
    while (static_cast<int>(g.size()) > n) {
      for (auto& op : g.front().ops) op();
      if (det_ && g.front().race_op) det_->complete(g.front().race_op, det_->now(wg));
      g.erase(g.begin());
    }
  }

  /// Checks made when a warpgroup returns from the kernel.
  void on_warpgroup_exit(int wg) {
    ++exited_[rank_of(wg)];
    auto& w = wgs[wg];
    if (!w.stores_uncommitted.empty() || !w.store_groups.empty())
      detail::throw_formatted(
          "warpgroup %d left the kernel with TMA stores still reading shared memory: wait for them "
          "(tp::bulk_wait<0>()) before returning",
          wg);
    if (!w.wgmma_uncommitted.ops.empty() || !w.wgmma_groups.empty())
      detail::throw_formatted("warpgroup %d left the kernel with wgmma groups in flight: tp::wgmma_wait<0>() first", wg);
  }

  /// Checks made when every warpgroup has returned.
  void check_exit() const {
    if (!loads_.empty())
      detail::throw_formatted(
          "kernel %s, CTA %s: barrier protocol [load never waited]: %zu TMA load(s) were issued but never waited for "
          "(%s completing on barrier %s)",
          kernel_name.c_str(), cta_name.c_str(), loads_.size(), loads_.front().what.c_str(),
          barriers_.count(loads_.front().barrier) ? barriers_.at(loads_.front().barrier).label().c_str() : "?");
    for (const auto& [off, b] : barriers_) {
      if (b.arrived != 0 || b.tx != 0)
        detail::throw_formatted(
            "kernel %s, CTA %s: barrier protocol [pending at exit]: the kernel exits with mbarrier %s part-way through "
            "phase %u: %u of %u arrivals (from %s), %lld transaction bytes outstanding",
            kernel_name.c_str(), cta_name.c_str(), b.label().c_str(), b.completed, b.arrived, b.count,
            warpgroup_list(b.arrivers_now).c_str(), b.tx);
      check_loads_observed(b, "exits");
    }
  }

 private:
  std::unique_ptr<scheduler> own_sched_;  // declared before sched, which may refer to it

 public:
  scheduler& sched;
  const int thread_base;  // this CTA's warpgroup 0 among sched's threads
  std::vector<warpgroup_state> wgs;
  const std::string kernel_name;
  const std::string cta_name;
  const std::size_t smem_size;  // per CTA
  std::uint64_t profile_tick = 0;  // the profiler's logical clock (prim::profile_clock)
  const int cluster_size;
  const int wgs_per_cta;
  const std::size_t smem_stride;
  /// The launch's CTAs that have not run yet (a CTA waiting for another's flag runs them).
  grid_runner* grid = nullptr;
  /// In a launch over several simulated devices: the device this CTA runs on, the memory the
  /// devices share with its race detector, and this CTA's actor there.
  int device = 0;
  peer_memory* peers = nullptr;
  int peer_actor = 0;

 private:
  static std::size_t round_up(std::size_t x, std::size_t a) { return (x + a - 1) / a * a; }

  // Granules (16 bytes) a TMA box at smem offset `base` covers, swizzle included.
  const std::vector<std::uint32_t>& box_granules(const tma_desc& d, std::uint32_t base) {
    long long bytes = d.elem_bytes;
    for (int i = 0; i < d.rank; ++i) bytes *= d.box[i];
    granules_.clear();
    for (long long lin = 0; lin < bytes; lin += granule_bytes)
      granules_.push_back(swizzle_address(base + static_cast<std::uint32_t>(lin), d.swizzle) / granule_bytes);
    return granules_;
  }

  // A read of bytes that were poisoned as a fresh output block and not written since.
  void check_written(int wg, std::uint32_t begin, std::uint32_t end, const char* what) const {
    std::uint32_t lo = begin;
    while (lo < end && !unwritten_[lo]) ++lo;
    if (lo == end) return;
    std::uint32_t hi = lo;
    while (hi < end && unwritten_[hi]) ++hi;
    const long long step = wgs[wg].step;
    detail::throw_formatted(
        "uninitialised read [output block read before written]: warpgroup %d reads (%s) %s%s before anything wrote "
        "it. A pipeline does not load its outputs: an output block starts uninitialised at the first step of its run "
        "(TPU semantics), so the body must write it there first (e.g. initialise an accumulator when the reduction "
        "index is 0) before reading it",
        wg, what, regions_.describe(lo, hi).c_str(), step >= 0 ? (" at pipeline step " + std::to_string(step)).c_str() : "");
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
  void retire_barrier(std::uint32_t off, const barrier_state& b, const char* how) const {
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

  void flush_loads(std::uint32_t barrier_off) {
    std::vector<pending_copy> mine;
    for (auto it = loads_.begin(); it != loads_.end();) {
      if (it->barrier == barrier_off) {
        mine.push_back(std::move(*it));
        it = loads_.erase(it);
      } else {
        ++it;
      }
    }
    if (opt_.copies == copy_mode::shuffled) std::shuffle(mine.begin(), mine.end(), rng_);
    for (auto& c : mine) {
      c.perform();
      barrier_complete_tx(c.barrier, c.bytes, c.op);
    }
  }

  // Hints for race reports: a wait that passed before its barrier ever completed.
  std::string explain_race(const access_op& e, const access_op& l) const {
    if (e.kind != access_kind::tma_load) return "";
    const auto& v = wgs[l.wg].vacuous_waits;
    if (std::find(v.begin(), v.end(), e.barrier) == v.end()) return "";
    return "\n  hint: warpgroup " + std::to_string(l.wg) +
           " waited on the load's barrier for parity 1 before the barrier had completed any phase, so that wait "
           "returned at once: wrong initial phase? (the first wait for a barrier that TMA loads complete is for "
           "parity 0)";
  }

 public:
  /// Who could still arrive on the barriers the blocked warpgroups wait for; st holds the
  /// state of this CTA's warpgroups.
  std::string deadlock_context(const std::vector<scheduler::state>& st) const {
    unsigned returned = 0;
    for (std::size_t w = 0; w < st.size(); ++w)
      if (st[w] == scheduler::state::finished) returned |= 1u << w;
    std::string s;
    for (const auto& [off, b] : barriers_) {
      if (b.waiters.empty()) continue;
      s += "\n  mbarrier " + b.label() + ": ";
      if (b.arrived < b.count) {
        s += "needs " + std::to_string(b.count - b.arrived) + " more arrival(s) to complete phase " +
             std::to_string(b.completed) + " (arrived in this phase: " + warpgroup_list(b.arrivers_now) +
             "; in earlier phases: " + warpgroup_list(b.arrivers_ever) + ")";
        const unsigned blocked = b.arrivers_ever & ~returned & ~b.arrivers_now;
        if (blocked && !(b.arrivers_ever & ~b.arrivers_now & returned))
          s += "\n    the warpgroups that arrive on it are blocked themselves: " + warpgroup_list(blocked) +
               " (a cycle of waits: each side waits for the other to go first)";
        const unsigned skipped = b.arrivers_ever & returned & ~b.arrivers_now;
        if (skipped)
          s += "\n    " + warpgroup_list(skipped) +
               " arrived on it in earlier phases but returned from the kernel without arriving for this one: "
               "[skipped arrive] an early exit that skips an arrive?";
        const bool fresh = b.completed == 0 && b.arrivers_ever == 0 && b.arrivers_now == 0;
        for (const auto& w : b.waiters) {
          const auto& vac = wgs[w.wg].vacuous_waits;
          const bool passed_free = std::find(vac.begin(), vac.end(), off) != vac.end();
          if (fresh && w.parity == 0 && !passed_free) {
            s += "\n    no phase of it has completed and nobody has arrived on it, so warpgroup " + std::to_string(w.wg) +
                 "'s wait for parity 0 waits for its very first phase; if this barrier starts out 'free' (a "
                 "consumed / empty barrier), its first wait is for parity 1: [wrong initial phase?]";
          } else if (w.phase >= 1 && b.seen_by(w.wg) == 0 && !passed_free) {
            s += "\n    warpgroup " + std::to_string(w.wg) + " waits for phase " + std::to_string(w.phase) +
                 " but never observed the phase(s) before it: its first wait on this barrier is for parity " +
                 std::to_string(w.parity) + "; the first wait for a barrier that TMA loads or other warpgroups "
                 "complete is for parity 0: [wrong initial phase?]";
          }
        }
      } else if (b.tx > 0) {
        s += "all " + std::to_string(b.count) + " arrivals are in, but " + std::to_string(b.tx) +
             " transaction bytes are still expected and no TMA load is pending on it (" +
             std::to_string(b.delivered_bytes) +
             " bytes were delivered in this phase): [expect_tx mismatch] expect_tx announced more bytes than the "
             "loads on it deliver";
      }
    }
    if (!loads_.empty()) {
      std::string on;
      for (const auto& c : loads_) {
        const std::string l = barriers_.count(c.barrier) ? barriers_.at(c.barrier).label() : "?";
        if (on.find(l) == std::string::npos) on += (on.empty() ? "" : ", ") + l;
      }
      s += "\n  " + std::to_string(loads_.size()) + " TMA load(s) pending on barriers nobody waits for: " + on;
    }
    for (const auto& [off, b] : barriers_)
      if (b.waiters.empty() && (b.arrived != 0 || b.tx != 0))
        s += "\n  mbarrier " + b.describe() + " is part-way through a phase";
    return s;
  }

 private:
  struct named_state {
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

  static constexpr int named_ids = 16;              // bar.sync ids per CTA
  static constexpr int cluster_barrier_key = -1;   // barrier.cluster among the named barriers
  std::size_t smem_total_ = 0;
  std::vector<int> exited_;  // warpgroups returned, per CTA rank
  std::vector<int> register_pool_;  // registers setmaxnreg.dec gave back, per CTA rank
  int cta_number_ = 0;
  unsigned char* smem_ = nullptr;
  options opt_;
  std::mt19937_64 rng_;
  std::map<std::uint32_t, barrier_state> barriers_;
  std::map<int, named_state> named_;
  std::vector<pending_copy> loads_;
  smem_regions regions_;
  std::unique_ptr<race_detector> det_;
  std::vector<std::uint32_t> granules_;
  std::vector<bool> unwritten_ = std::vector<bool>(smem_total_, false);  // poisoned output bytes not written since
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
