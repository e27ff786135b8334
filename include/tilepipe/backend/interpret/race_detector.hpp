// Happens-before race detection over the CTA's shared memory.
//
// Every access to shared memory the interpreter sees is an *access operation*:
//   generic reads and writes of a warpgroup (the library's ops report them through
//   prim::note_smem_read / note_smem_write; raw element access through smem_ref is not
//   tracked), and the asynchronous ones: TMA loads (write), TMA stores and wgmma groups
//   (read). A generic access is over the moment it happens; an asynchronous one lasts from
//   its issue until some warpgroup *observes* its completion: a load when a wait returns
//   for the mbarrier phase it completed in, a store when its issuer's bulk wait_group
//   retires it, a wgmma group at its issuer's wgmma_wait. Its completion is then an epoch
//   (actor, clock), and the operation is ordered before an access of warpgroup X exactly
//   when X's vector clock covers that epoch (X synchronised, directly or through other
//   warpgroups, with the observation). An operation still in flight is ordered before
//   nothing.
//
// Shadow memory keeps, per 16-byte granule (every TMA box, swizzle chunk, wgmma operand
// row and library view is made of whole granules), the last writing operation and the
// reading operations since. A new access conflicts with the earlier ones it is not ordered
// after (read-write and write-write; two reads never conflict). One more rule covers the
// two memory proxies: an asynchronous read (TMA store, wgmma) of bytes last written by a
// generic store needs, besides ordering, a fence.proxy.async by the writer between the
// write and the point the reader's issuer synchronised with.
//
// The first conflict aborts the CTA with a report naming the class of bug, the buffer, the
// warpgroups, the pipeline steps and both operations.
#pragma once

#include "../../core/error.cuh"
#include "vector_clock.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tilepipe::interpret {

inline constexpr std::uint32_t granule_bytes = 16;

enum class access_kind : std::uint8_t { read, write, tma_load, tma_store, wgmma };

struct access_op {
  access_kind kind = access_kind::read;
  int wg = 0;             // the warpgroup that performed or issued it
  long long step = -1;    // the issuer's pipeline step, -1 outside pipelines
  const char* what = "";  // generic accesses: the library operation ("tp::map", ...)
  std::string where;      // asynchronous ones: what it completes on, for reports
  std::uint32_t barrier = 0;  // TMA loads: SMEM offset of their mbarrier
  std::string after;          // TMA loads: the barrier their issuer waited for last (a slot's release)
  epoch done;                 // the completion epoch; actor -1 while in flight
  std::uint32_t done_phase = 0;  // TMA loads: the phase (1-based count) they completed in

  bool writes() const { return kind == access_kind::write || kind == access_kind::tma_load; }
  bool is_async() const { return kind == access_kind::tma_load || kind == access_kind::tma_store || kind == access_kind::wgmma; }
  bool is_generic() const { return !is_async(); }
};

class race_detector {
 public:
  race_detector(int num_warpgroups, std::size_t smem_bytes)
      : clocks_(static_cast<std::size_t>(num_warpgroups)),
        fences_(static_cast<std::size_t>(num_warpgroups)),
        actors_(num_warpgroups),
        shadow_((smem_bytes + granule_bytes - 1) / granule_bytes),
        ops_(1) {  // op 0 is "none"
    // Clocks start at 1 so that epoch (actor, 0) never counts as observed.
    for (int w = 0; w < num_warpgroups; ++w) clocks_[static_cast<std::size_t>(w)].set(w, 1);
  }

  /// Extra lines for a report about `earlier` racing with `later` (barrier names, hints).
  std::function<std::string(const access_op& earlier, const access_op& later)> explain;
  /// Names the SMEM byte range [begin, end) (regions the allocator named).
  std::function<std::string(std::uint32_t begin, std::uint32_t end)> describe_bytes;

  // ---- synchronisation ---------------------------------------------------------------
  int new_actor() { return actors_++; }
  const vector_clock& clock(int wg) const { return clocks_[static_cast<std::size_t>(wg)]; }

  /// wg publishes everything it did so far into `sync` (arrive, bar.sync): later accesses
  /// of wg get a later epoch.
  void release(int wg, vector_clock& sync) {
    auto& c = clocks_[static_cast<std::size_t>(wg)];
    sync.join(c);
    c.tick(wg);
  }
  /// wg learns everything published into `sync` (a wait returned, bar.sync completed).
  void acquire(int wg, const vector_clock& sync) { clocks_[static_cast<std::size_t>(wg)].join(sync); }

  /// fence.proxy.async by wg: its generic writes so far become visible to async readers
  /// that synchronise with a later release of wg.
  void fence_proxy_async(int wg) {
    auto& c = clocks_[static_cast<std::size_t>(wg)];
    fences_[static_cast<std::size_t>(wg)].push_back(c[wg]);
    c.tick(wg);
  }

  /// The current epoch of wg (what a completion it observes now is stamped with).
  epoch now(int wg) const { return {wg, clock(wg)[wg]}; }

  // ---- accesses ----------------------------------------------------------------------
  /// A generic access of bytes [begin, end) by wg; checks it and records it.
  void generic(int wg, long long step, std::uint32_t begin, std::uint32_t end, bool write, const char* what) {
    access_op op;
    op.kind = write ? access_kind::write : access_kind::read;
    op.wg = wg;
    op.step = step;
    op.what = what;
    op.done = now(wg);
    const std::uint32_t id = add(std::move(op));
    granules_.clear();
    for (std::uint32_t g = begin / granule_bytes; g < (end + granule_bytes - 1) / granule_bytes; ++g) granules_.push_back(g);
    access(id, granules_);
    // A generic access is over at once; nobody needs its record but the shadow cells.
  }

  /// Starts an asynchronous operation; its accesses follow with access().
  std::uint32_t start(access_kind kind, int wg, long long step, std::string where, std::uint32_t barrier = 0) {
    access_op op;
    op.kind = kind;
    op.wg = wg;
    op.step = step;
    op.where = std::move(where);
    op.barrier = barrier;
    return add(std::move(op));
  }

  /// Records which barrier wait preceded asynchronous operation `id` (for reports).
  void note_after(std::uint32_t id, std::string barrier_label) { ops_[id].after = std::move(barrier_label); }

  /// Operation `id` accesses the given granules now (its issuer's clock orders it).
  void access(std::uint32_t id, const std::vector<std::uint32_t>& granules) {
    const access_op& cur = ops_[id];
    const vector_clock& vc = clock(cur.wg);
    conflict first;
    std::uint32_t lo = ~0u, hi = 0;
    for (std::uint32_t g : granules) {
      if (g >= shadow_.size()) continue;  // the caller checked the range; stay safe
      cell& c = shadow_[g];
      const conflict k = check(c, id, cur, vc);
      if (k.earlier) {
        if (!first.earlier) first = k;
        if (k.earlier == first.earlier && k.why == first.why) {
          lo = std::min(lo, g * granule_bytes);
          hi = std::max(hi, (g + 1) * granule_bytes);
        }
        continue;
      }
      record(c, id, cur, vc);
    }
    if (first.earlier) report(first, id, lo, hi);
  }

  /// Marks an asynchronous operation complete, observed at epoch e.
  void complete(std::uint32_t id, epoch e, std::uint32_t phase = 0) {
    ops_[id].done = e;
    ops_[id].done_phase = phase;
  }

  const access_op& op(std::uint32_t id) const { return ops_[id]; }
  std::uint32_t num_ops() const { return static_cast<std::uint32_t>(ops_.size()); }

  /// Human-readable one-liner for an operation (used in reports and exit checks).
  static std::string describe(const access_op& o) {
    std::string s;
    switch (o.kind) {
      case access_kind::read: s = std::string("read by warpgroup ") + std::to_string(o.wg) + " (" + o.what + ")"; break;
      case access_kind::write: s = std::string("write by warpgroup ") + std::to_string(o.wg) + " (" + o.what + ")"; break;
      case access_kind::tma_load: s = "TMA load issued by warpgroup " + std::to_string(o.wg); break;
      case access_kind::tma_store: s = "TMA store issued by warpgroup " + std::to_string(o.wg); break;
      case access_kind::wgmma: s = "wgmma group issued by warpgroup " + std::to_string(o.wg); break;
    }
    if (o.step >= 0) s += " at pipeline step " + std::to_string(o.step);
    if (!o.where.empty()) s += ", " + o.where;
    return s;
  }

 private:
  enum class cause : std::uint8_t { none, unordered, unfenced };
  struct conflict {
    std::uint32_t earlier = 0;
    cause why = cause::none;
  };
  struct cell {
    std::uint32_t write = 0;
    std::vector<std::uint32_t> reads;
  };

  std::uint32_t add(access_op op) {
    ops_.push_back(std::move(op));
    return static_cast<std::uint32_t>(ops_.size() - 1);
  }

  bool ordered(std::uint32_t earlier, const vector_clock& vc) const { return vc.covers(ops_[earlier].done); }

  // A fence by `writer` after its write at `clock`, that the reader's clock has seen.
  bool fenced(int writer, std::uint32_t write_clock, const vector_clock& vc) const {
    const auto& f = fences_[static_cast<std::size_t>(writer)];
    const auto it = std::lower_bound(f.begin(), f.end(), write_clock);
    return it != f.end() && *it <= vc[writer];
  }

  conflict check(const cell& c, std::uint32_t id, const access_op& cur, const vector_clock& vc) const {
    if (c.write && c.write != id) {
      if (!ordered(c.write, vc)) return {c.write, cause::unordered};
      const access_op& w = ops_[c.write];
      const bool async_read = cur.kind == access_kind::tma_store || cur.kind == access_kind::wgmma;
      if (async_read && w.kind == access_kind::write && !fenced(w.wg, w.done.clock, vc)) return {c.write, cause::unfenced};
    }
    if (cur.writes())
      for (std::uint32_t r : c.reads)
        if (r != id && !ordered(r, vc)) return {r, cause::unordered};
    return {};
  }

  void record(cell& c, std::uint32_t id, const access_op& cur, const vector_clock& vc) {
    if (cur.writes()) {
      c.write = id;
      c.reads.clear();
      return;
    }
    // Reads ordered before this one are implied by it: a later write ordered after this
    // read is ordered after them too.
    std::erase_if(c.reads, [&](std::uint32_t r) { return r != id && ordered(r, vc); });
    if (std::find(c.reads.begin(), c.reads.end(), id) == c.reads.end()) c.reads.push_back(id);
  }

  static const char* verb(const access_op& o) { return o.writes() ? "writes" : "reads"; }

  // Names the bug class from the two operations; the bracketed tag is stable (tests and
  // docs/race-detector.md refer to it).
  static std::string headline(const access_op& e, const access_op& l, cause w) {
    const std::string who = "warpgroup " + std::to_string(l.wg);
    if (w == cause::unfenced)
      return std::string("race [missing proxy fence]: a ") + (l.kind == access_kind::wgmma ? "wgmma" : "TMA store") +
             " reads shared memory that warpgroup " + std::to_string(e.wg) + " wrote with generic stores (" + e.what +
             ") without a fence.proxy.async in between: call tp::commit_smem() after writing and before the " +
             (l.kind == access_kind::wgmma ? "wgmma" : "store");
    switch (e.kind) {
      case access_kind::tma_load:
        if (l.kind == access_kind::tma_load)
          return "race [overlapping TMA loads]: a TMA load overwrites shared memory that an earlier TMA load may still be "
                 "writing (the earlier load's completion was not waited for)";
        return std::string("race [missing wait]: ") +
               (l.is_generic() ? who + " " + verb(l) : std::string("a ") + (l.kind == access_kind::wgmma ? "wgmma" : "TMA store") + " reads") +
               " shared memory that a TMA load may still be writing: the access is not ordered after the load's "
               "completion (wait on the load's barrier for the phase it completes first)";
      case access_kind::tma_store:
        if (l.kind == access_kind::tma_load)
          return "race [slot reused before its store read it]: a TMA load overwrites shared memory that a TMA store may "
                 "still be reading (wait for the store with tp::wait_smem_to_gmem<n>(tp::reads_done) / bulk_wait_read first)";
        return "race [slot reused before its store read it]: " + who + " " + verb(l) +
               " shared memory that a TMA store may still be reading: wait until the store has read it "
               "(tp::wait_smem_to_gmem<n>(tp::reads_done), prim::bulk_wait_read<n>()) before rewriting the buffer";
      case access_kind::wgmma:
        if (l.kind == access_kind::tma_load && l.after.find("consumed (manual)") != std::string::npos)
          return "race [released while a wgmma reads]: a TMA load overwrites shared memory that a wgmma may still be "
                 "reading: the slot was released to the memory warpgroup (an arrive on its manual consumed barrier, " +
                 l.after + ") while the wgmma reading it was still in flight. With manual_consumed_barriers, call "
                 "consumed.arrive() for a block only after tp::wgmma_wait<n>() has retired the wgmma groups that read it";
        if (l.kind == access_kind::tma_load)
          return "race [missing delay_release]: a TMA load overwrites shared memory that a wgmma may still be reading: "
                 "a pipeline body that leaves wgmma groups in flight (tp::wgmma_wait<1>) needs delay_release >= 1 on "
                 "the specs those wgmmas read, and a hand-written loop must tp::wgmma_wait before releasing the buffer";
        return "race [wgmma still reading]: " + who + " " + verb(l) +
               " shared memory that a wgmma may still be reading: tp::wgmma_wait<n>() until that group is done first";
      case access_kind::read:
      case access_kind::write:
        if (l.kind == access_kind::tma_load)
          return "race [buffer released too early]: a TMA load overwrites shared memory that warpgroup " +
                 std::to_string(e.wg) + " " + (e.kind == access_kind::write ? "wrote" : "read") +
                 ", but that access is not ordered before the load: the buffer was released (e.g. a consumed-barrier "
                 "arrive) before the access, or nothing synchronises them";
        if (l.is_async())
          return std::string("race [unsynchronized]: a ") + (l.kind == access_kind::wgmma ? "wgmma" : "TMA store") +
                 " issued by warpgroup " + std::to_string(l.wg) + " reads shared memory that warpgroup " +
                 std::to_string(e.wg) + " wrote, and no barrier orders the write before it";
        return "race [unsynchronized]: warpgroups " + std::to_string(e.wg) + " and " + std::to_string(l.wg) +
               " access the same shared memory (" + (e.kind == access_kind::write ? "write" : "read") + " then " +
               (l.kind == access_kind::write ? "write" : "read") + ") and no barrier orders them";
    }
    return "race";
  }

  static std::string status(const access_op& e, int observer) {
    if (e.is_generic()) return "";
    if (e.done.actor < 0) {
      switch (e.kind) {
        case access_kind::tma_load: return "still in flight: no wait has returned for the phase it completes";
        case access_kind::tma_store: return "still in flight: no bulk wait_group of its issuer has retired it";
        default: return "still in flight: no wgmma_wait of its issuer has retired it";
      }
    }
    return "complete, but warpgroup " + std::to_string(observer) + " has not synchronised with its completion";
  }

  [[noreturn]] void report(const conflict& k, std::uint32_t later, std::uint32_t lo, std::uint32_t hi) const {
    const access_op& e = ops_[k.earlier];
    const access_op& l = ops_[later];
    std::string s = headline(e, l, k.why);
    s += "\n  buffer:  " + (describe_bytes ? describe_bytes(lo, hi) : "SMEM bytes [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
    s += "\n  earlier: " + describe(e);
    const std::string st = k.why == cause::unordered ? status(e, l.wg) : "";
    if (!st.empty()) s += "\n           " + st;
    s += "\n  later:   " + describe(l);
    if (explain) s += explain(e, l);
    throw error(s);
  }

  std::vector<vector_clock> clocks_;
  std::vector<std::vector<std::uint32_t>> fences_;  // per warpgroup, increasing
  int actors_;
  std::vector<cell> shadow_;
  std::vector<access_op> ops_;
  std::vector<std::uint32_t> granules_;
};

}  // namespace tilepipe::interpret
