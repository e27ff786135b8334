// Happens-before race detection over the memory that simulated devices share: the
// symmetric buffers (tp::symmetric_tensor) that kernels reach on a peer with tp::remote.
//
// The SMEM race detector (race_detector.hpp) orders the warpgroups of one CTA; this one
// orders the CTAs of every device of a multi-device launch. Its actors are CTAs (a CTA's
// warpgroups are one actor, ordered as the interpreter runs them: within a CTA they
// synchronise through SMEM, which the SMEM detector checks), and its only synchronisation is
// the semaphores: a signal (prim::signal_add) releases its CTA's vector clock into the
// semaphore word, and a wait that returns (prim::signal_wait) acquires everything released
// into it. Atomic adds extend release sequences, so a wait that reads a sum acquires every
// signal that contributed to it, as on the GPU.
//
// Accesses are per 16-byte granule of a symmetric buffer: TMA loads (reads, at issue), TMA
// stores (writes, from issue until the issuer's bulk wait retires them) and the ordinary
// accesses library ops report (prim::note_gmem_access). A conflict names its class:
//   [cross-device: missing signal wait]   a read of data whose write no wait orders before it
//   [cross-device: signal before data]    the reader waited for the writer's signal, but the
//                                         signal was sent before the write was complete
//   [cross-device: remote write races a read]  a write to memory another device may still read
//   [cross-device: unordered writes]      two writes nothing orders
// A multi-device launch starts from fresh clocks: the interpreter runs launches one after
// another, so it sees no race between two launches (the GPU does not order them across
// devices; kernels that reuse buffers between launches must hand them over themselves).
#pragma once

#include "../../core/error.cuh"
#include "../../core/tma_desc.cuh"
#include "tma.hpp"
#include "vector_clock.hpp"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace tilepipe::interpret {

class peer_memory {
 public:
  static constexpr std::uint32_t granule = 16;

  /// A symmetric buffer's copy on `device`, named in reports.
  void add_window(int device, const void* base, std::size_t bytes, std::string name) {
    const std::size_t granules = (bytes + granule - 1) / granule;
    windows_.push_back({device, static_cast<const unsigned char*>(base), bytes, std::move(name),
                        std::vector<cell>(granules)});
  }
  void remove_window(const void* base) {
    std::erase_if(windows_, [base](const window& w) { return w.base == base; });
  }

  /// A launch begins: one actor per CTA, named for reports; every earlier access is forgotten.
  void begin_launch(std::vector<std::string> actor_names) {
    names_ = std::move(actor_names);
    clocks_.assign(names_.size(), {});
    for (std::size_t a = 0; a < names_.size(); ++a) clocks_[a].set(static_cast<int>(a), 1);
    sems_.clear();
    ops_.assign(1, {});  // op 0 is "none"
    for (auto& w : windows_) std::fill(w.shadow.begin(), w.shadow.end(), cell{});
  }

  // ---- semaphores ----------------------------------------------------------------------
  void signal(int actor, const unsigned* sem) {
    auto& c = clocks_[static_cast<std::size_t>(actor)];
    sem_clock(sem).join(c);
    c.tick(actor);
  }
  void acquire(int actor, const unsigned* sem) { clocks_[static_cast<std::size_t>(actor)].join(sem_clock(sem)); }

  // ---- accesses ------------------------------------------------------------------------
  /// An ordinary access of [p, p + bytes) by `actor`, over at once.
  void access(int actor, const void* p, std::size_t bytes, bool write, const char* what) {
    granules_.clear();
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t o = 0; o < bytes; o += granule) add_granule(b + o);
    if (bytes) add_granule(b + bytes - 1);
    const std::uint32_t id = start(actor, write, what);
    ops_[id].done = ops_[id].issued;
    check_and_record(id);
  }

  /// A TMA copy of the box at coords by `actor` (a store: a write until complete() retires
  /// it; a load: a read, at issue). Returns its id (0 when it touches no symmetric buffer).
  std::uint32_t tma(int actor, const tma_desc& d, const int* coords, bool write) {
    granules_.clear();
    const auto* g = static_cast<const unsigned char*>(d.global);
    for_each_box_element(d, coords, write ? store_extent(d) : d.dims[0], [&](bool in, long long goff, long long) {
      if (in) add_granule(g + goff);
    });
    if (granules_.empty()) return 0;
    const std::uint32_t id = start(actor, write, write ? "TMA store" : "TMA load");
    if (!write) ops_[id].done = ops_[id].issued;
    check_and_record(id);
    return id;
  }

  /// The issuer of asynchronous write `id` waited for it (bulk wait_group).
  void complete(std::uint32_t id, int actor) { ops_[id].done = now(actor); }

 private:
  struct cell {
    std::uint32_t write = 0;
    std::vector<std::uint32_t> reads;
  };
  struct window {
    int device;
    const unsigned char* base;
    std::size_t bytes;
    std::string name;
    std::vector<cell> shadow;
  };
  struct op {
    bool write = false;
    int actor = -1;
    const char* what = "";
    epoch issued, done;  // done.actor is -1 while the write is in flight
  };
  struct place {  // a granule of a window
    std::uint32_t window, index;
    bool operator<(const place& o) const { return window != o.window ? window < o.window : index < o.index; }
    bool operator==(const place& o) const = default;
  };
  enum class cause { missing_wait, signal_before_data, overwritten_read, unordered_writes };

  epoch now(int actor) const { return {actor, clocks_[static_cast<std::size_t>(actor)][actor]}; }

  vector_clock& sem_clock(const unsigned* sem) {
    for (auto& [s, c] : sems_)
      if (s == sem) return c;
    sems_.push_back({sem, {}});
    return sems_.back().second;
  }

  void add_granule(const unsigned char* p) {
    for (std::uint32_t w = 0; w < windows_.size(); ++w) {
      const auto& win = windows_[w];
      if (p >= win.base && p < win.base + win.bytes) {
        granules_.push_back({w, static_cast<std::uint32_t>((p - win.base) / granule)});
        return;
      }
    }
  }

  std::uint32_t start(int actor, bool write, const char* what) {
    op o;
    o.write = write, o.actor = actor, o.what = what, o.issued = now(actor);
    ops_.push_back(o);
    return static_cast<std::uint32_t>(ops_.size() - 1);
  }

  void check_and_record(std::uint32_t id) {
    std::sort(granules_.begin(), granules_.end());
    granules_.erase(std::unique(granules_.begin(), granules_.end()), granules_.end());
    const op& cur = ops_[id];
    const vector_clock& vc = clocks_[static_cast<std::size_t>(cur.actor)];
    for (const place& g : granules_) {
      cell& c = windows_[g.window].shadow[g.index];
      if (c.write && c.write != id && !vc.covers(ops_[c.write].done)) {
        const cause why = cur.write                         ? cause::unordered_writes
                          : vc.covers(ops_[c.write].issued) ? cause::signal_before_data
                                                            : cause::missing_wait;
        report(why, c.write, id, g);
      }
      if (cur.write)
        for (std::uint32_t r : c.reads)
          if (r != id && !vc.covers(ops_[r].done)) report(cause::overwritten_read, r, id, g);
      if (cur.write) {
        c.write = id;
        c.reads.clear();
      } else {
        std::erase_if(c.reads, [&](std::uint32_t r) { return vc.covers(ops_[r].done); });
        c.reads.push_back(id);
      }
    }
  }

  std::string describe(const op& o) const {
    return names_[static_cast<std::size_t>(o.actor)] + " (" + (o.write ? "writes: " : "reads: ") + o.what + ")";
  }

  [[noreturn]] void report(cause why, std::uint32_t earlier, std::uint32_t later, const place& g) const {
    const op& e = ops_[earlier];
    const op& l = ops_[later];
    std::string s;
    switch (why) {
      case cause::missing_wait:
        s = "race [cross-device: missing signal wait]: " + names_[l.actor] + " reads data that " + names_[e.actor] +
            " wrote, and no semaphore wait orders that write before the read: wait for the signal that guards the "
            "data (tp::semaphore_wait) before reading it";
        break;
      case cause::signal_before_data:
        s = "race [cross-device: signal before data]: " + names_[l.actor] + " waited for a signal of " + names_[e.actor] +
            ", but that signal was sent before the write it guards was complete: wait for the write "
            "(tp::wait_smem_to_gmem<0>() after TMA stores) before tp::semaphore_signal";
        break;
      case cause::overwritten_read:
        s = "race [cross-device: remote write races a read]: " + names_[l.actor] + " writes data that " +
            names_[e.actor] + " reads, and nothing orders the read before the write: the reader must signal that "
            "it is done with the buffer, and the writer wait for that signal, before the buffer is written again";
        break;
      case cause::unordered_writes:
        s = "race [cross-device: unordered writes]: " + names_[l.actor] + " and " + names_[e.actor] +
            " write the same data and no semaphore orders the writes";
        break;
    }
    const window& w = windows_[g.window];
    s += "\n  buffer:  " + w.name + " on device " + std::to_string(w.device) + ", bytes [" +
         std::to_string(g.index * granule) + ", " + std::to_string((g.index + 1) * granule) + ")";
    s += "\n  earlier: " + describe(e) + (e.write && e.done.actor < 0 ? ", still in flight" : "");
    s += "\n  later:   " + describe(l);
    throw error(s);
  }

  std::vector<window> windows_;
  std::vector<std::string> names_;
  std::vector<vector_clock> clocks_;
  std::vector<std::pair<const unsigned*, vector_clock>> sems_;
  std::vector<op> ops_;
  std::vector<place> granules_;
};

/// Where a CTA of a launch over several simulated devices reaches the memory they share
/// (null for a launch on one device), and the CTA's actor there.
struct peer_link {
  peer_memory* memory = nullptr;
  int actor = 0;
};

}  // namespace tilepipe::interpret
