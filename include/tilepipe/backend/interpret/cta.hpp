// The simulated CTA: shared memory with the real byte layout and budget, mbarriers with
// counts, transaction bytes and phases, named barriers, the asynchronous copy engine and
// the asynchronous wgmma queue of each warpgroup.
//
// Copies and wgmmas are deferred: a TMA load lands when somebody waits on its barrier, a
// TMA store when its bulk group is waited for, a wgmma group at wgmma_wait. So a kernel
// that forgets a wait reads poison, as it would read stale data on the GPU.
#pragma once

#include "../../core/error.cuh"
#include "scheduler.hpp"

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
  enum kind_t { tma_load, tma_store, barrier_wait, bulk_commit } kind;
  int cta = 0;                // CTA in launch order
  int wg = 0;                 // issuing / waiting warpgroup
  std::uint32_t smem = 0;     // SMEM offset written (load) or read (store)
  std::uint32_t barrier = 0;  // barrier offset (load, wait)
  std::uint32_t parity = 0;   // waited parity
  int coords[5] = {};         // TMA coordinates, innermost first
};

/// How the interpreter runs a launch.
struct options {
  copy_mode copies = copy_mode::at_wait;
  std::uint64_t seed = 1;
  bool shuffle_ctas = false;          // run the CTAs in a random (seeded) order
  std::vector<event>* events = nullptr;  // when set, every TMA copy and barrier wait is appended
};

struct barrier_state {
  std::string name = "barrier";
  int slot = -1;
  std::uint32_t count = 0;      // arrivals per phase
  std::uint32_t arrived = 0;    // arrivals in the current phase
  long long tx = 0;             // expected minus delivered bytes in the current phase
  std::uint32_t completed = 0;  // phases completed so far

  std::string describe() const {
    std::string s = "'" + name + "'";
    if (slot >= 0) s += " slot " + std::to_string(slot);
    s += " (phases completed " + std::to_string(completed) + ", arrivals " + std::to_string(arrived) + "/" +
         std::to_string(count) + ", transaction bytes outstanding " + std::to_string(tx) + ")";
    return s;
  }
};

struct pending_copy {
  std::function<void()> perform;
  std::uint32_t barrier = 0;  // SMEM offset of the barrier a load completes on
  long long bytes = 0;
  std::string what;
};

struct warpgroup_state {
  int index = 0;
  std::vector<pending_copy> stores_uncommitted;
  std::vector<std::vector<pending_copy>> store_groups;  // committed, oldest first
  std::vector<std::function<void()>> wgmma_uncommitted;
  std::vector<std::vector<std::function<void()>>> wgmma_groups;
};

class cta_state {
 public:
  cta_state(int num_warpgroups, std::size_t smem_bytes, const options& opt, std::string kernel, std::string cta,
            int cta_number = 0)
      : sched(num_warpgroups),
        cta_number_(cta_number),
        wgs(num_warpgroups),
        kernel_name(std::move(kernel)),
        cta_name(std::move(cta)),
        smem_size(smem_bytes),
        opt_(opt),
        rng_(opt.seed) {
    smem_ = static_cast<unsigned char*>(std::aligned_alloc(1024, round_up(smem_bytes ? smem_bytes : 1024, 1024)));
    std::memset(smem_, 0xFF, smem_bytes);  // poison: NaN in every float format
    for (int i = 0; i < num_warpgroups; ++i) wgs[i].index = i;
    sched.deadlock_context = [this] { return pending_summary(); };
  }
  ~cta_state() { std::free(smem_); }
  cta_state(const cta_state&) = delete;
  cta_state& operator=(const cta_state&) = delete;

  unsigned char* smem() const { return smem_; }

  std::uint32_t smem_offset(const void* p, std::size_t bytes, const char* what) const {
    const auto* c = static_cast<const unsigned char*>(p);
    if (c < smem_ || c + bytes > smem_ + smem_size)
      detail::throw_formatted("%s: address is not inside this CTA's %zu bytes of shared memory", what, smem_size);
    return static_cast<std::uint32_t>(c - smem_);
  }

  // ---- mbarriers ------------------------------------------------------------------
  barrier_state& barrier(const void* p, const char* what) {
    auto it = barriers_.find(smem_offset(p, 8, what));
    if (it == barriers_.end()) detail::throw_formatted("%s on an mbarrier that was never initialised", what);
    return it->second;
  }

  void barrier_init(const void* p, std::uint32_t count) {
    if (count == 0) detail::throw_formatted("mbarrier initialised with an arrival count of 0");
    barrier_state b;
    b.count = count;
    barriers_[smem_offset(p, 8, "mbarrier init")] = b;
  }

  void barrier_name(const void* p, std::string name, int slot) {
    auto& b = barrier(p, "naming");
    b.name = std::move(name);
    b.slot = slot;
  }

  void barrier_arrive(const void* p, std::uint32_t n, long long expect_tx) {
    auto& b = barrier(p, "arrive");
    b.tx += expect_tx;
    b.arrived += n;
    if (b.arrived > b.count)
      detail::throw_formatted("mbarrier %s: more arrivals than its count", b.describe().c_str());
    maybe_complete(b);
  }

  void barrier_expect_tx(const void* p, long long bytes) { barrier(p, "expect_tx").tx += bytes; }

  void barrier_complete_tx(std::uint32_t off, long long bytes) {
    auto& b = barriers_.at(off);
    b.tx -= bytes;
    maybe_complete(b);
  }

  /// Blocks warpgroup wg until the phase with the given parity of barrier p completed.
  void barrier_wait(int wg, const void* p, std::uint32_t parity) {
    const std::uint32_t off = smem_offset(p, 8, "mbarrier wait");
    barrier(p, "wait");
    record({event::barrier_wait, 0, wg, 0, off, parity, {}});
    auto ready = [this, off, parity] {
      flush_loads(off);
      return (barriers_.at(off).completed & 1u) != parity;
    };
    sched.block_until(wg, ready, [this, off, parity] {
      return "mbarrier " + barriers_.at(off).describe() + " for phase parity " + std::to_string(parity);
    });
  }

  // ---- named barriers (bar.sync) ---------------------------------------------------
  void named_barrier_sync(int wg, int id, int threads) {
    auto& nb = named_[id];
    if (nb.arrived == 0) nb.threads = threads;
    if (nb.threads != threads)
      detail::throw_formatted("named barrier %d used with %d and %d threads at once", id, nb.threads, threads);
    nb.arrived += 128;
    if (nb.arrived == threads) {
      nb.arrived = 0;
      ++nb.generation;
      return;
    }
    const std::uint64_t gen = nb.generation;
    sched.block_until(wg, [this, id, gen] { return named_[id].generation != gen; },
                      [this, id, threads] {
                        return "named barrier " + std::to_string(id) + " (" + std::to_string(named_[id].arrived) +
                               " of " + std::to_string(threads) + " threads arrived)";
                      });
  }

  // ---- the copy engine -------------------------------------------------------------
  /// Appends to the launch's event log, if it keeps one.
  void record(event e) {
    if (!opt_.events) return;
    e.cta = cta_number_;
    opt_.events->push_back(e);
  }

  void issue_load(pending_copy c) {
    if (opt_.copies == copy_mode::eager) {
      c.perform();
      barrier_complete_tx(c.barrier, c.bytes);
    } else {
      loads_.push_back(std::move(c));
    }
  }

  void issue_store(int wg, pending_copy c) {
    if (opt_.copies == copy_mode::eager) c.perform();
    else wgs[wg].stores_uncommitted.push_back(std::move(c));
  }

  void commit_stores(int wg) {
    record({event::bulk_commit, 0, wg, 0, 0, 0, {}});
    auto& w = wgs[wg];
    w.store_groups.push_back(std::move(w.stores_uncommitted));
    w.stores_uncommitted.clear();
  }

  /// cp.async.bulk.wait_group(.read) N: all but the newest n committed groups finish.
  void wait_stores(int wg, int n) {
    auto& g = wgs[wg].store_groups;
    while (static_cast<int>(g.size()) > n) {
      for (auto& c : g.front()) c.perform();
      g.erase(g.begin());
    }
  }

  // ---- asynchronous wgmma ----------------------------------------------------------
  void issue_wgmma(int wg, std::function<void()> op) { wgs[wg].wgmma_uncommitted.push_back(std::move(op)); }
  void commit_wgmma(int wg) {
    auto& w = wgs[wg];
    w.wgmma_groups.push_back(std::move(w.wgmma_uncommitted));
    w.wgmma_uncommitted.clear();
  }
  void wait_wgmma(int wg, int n) {
    auto& g = wgs[wg].wgmma_groups;
    while (static_cast<int>(g.size()) > n) {
      for (auto& op : g.front()) op();
      g.erase(g.begin());
    }
  }

  /// Checks made when a warpgroup returns from the kernel.
  void on_warpgroup_exit(int wg) {
    auto& w = wgs[wg];
    if (!w.stores_uncommitted.empty() || !w.store_groups.empty())
      detail::throw_formatted(
          "warpgroup %d left the kernel with TMA stores still reading shared memory: wait for them "
          "(tp::bulk_wait<0>()) before returning",
          wg);
    if (!w.wgmma_uncommitted.empty() || !w.wgmma_groups.empty())
      detail::throw_formatted("warpgroup %d left the kernel with wgmma groups in flight: tp::wgmma_wait<0>() first", wg);
  }

  /// Checks made when every warpgroup has returned.
  void check_exit() const {
    if (!loads_.empty())
      detail::throw_formatted("kernel %s, CTA %s: %zu TMA load(s) were issued but never waited for (%s)", kernel_name.c_str(),
                              cta_name.c_str(), loads_.size(), loads_.front().what.c_str());
  }

  scheduler sched;
  std::vector<warpgroup_state> wgs;
  const std::string kernel_name;
  const std::string cta_name;
  const std::size_t smem_size;

 private:
  static std::size_t round_up(std::size_t x, std::size_t a) { return (x + a - 1) / a * a; }

  void maybe_complete(barrier_state& b) {
    if (b.arrived == b.count && b.tx == 0) {
      b.arrived = 0;
      ++b.completed;
    }
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
      barrier_complete_tx(c.barrier, c.bytes);
    }
  }

  std::string pending_summary() const {
    std::string s;
    if (!loads_.empty()) s += "\n  " + std::to_string(loads_.size()) + " TMA load(s) pending on other barriers";
    for (auto& [off, b] : barriers_)
      if (b.arrived != 0 || b.tx != 0) s += "\n  barrier " + b.describe() + " is part-way through a phase";
    return s;
  }

  struct named_state {
    int threads = 0;
    int arrived = 0;
    std::uint64_t generation = 0;
  };

  int cta_number_ = 0;
  unsigned char* smem_ = nullptr;
  options opt_;
  std::mt19937_64 rng_;
  std::map<std::uint32_t, barrier_state> barriers_;
  std::map<int, named_state> named_;
  std::vector<pending_copy> loads_;
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
