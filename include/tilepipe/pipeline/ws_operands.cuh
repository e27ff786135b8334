// The operands of emit_pipeline_warp_specialized, across a chain of pipelines: an input
// (full / empty = ready / consumed), an output (full / empty = written / stored), each with
// its two barrier rings, or an operand left in global memory (gmem_spec). The memory
// warpgroup and the compute warpgroups each hold a copy and walk their own cursors.
#pragma once

#include "../ops/copy.cuh"
#include "gmem_operand.cuh"
#include "slots.cuh"

namespace tilepipe::pipeline_detail {

/// The two barrier rings of a warp-specialised operand, `slots` barriers each (CUTLASS's
/// names): `full` completes when a slot holds its block (an input landed, an output was
/// written), `empty` when the slot may be refilled (an input consumed, an output stored).
/// One allocation that every warpgroup makes; the leader initialises them.
struct barrier_rings {
  std::uint64_t* full;
  std::uint64_t* empty;
  int slots;

  TP_HD static barrier_rings allocate(kernel_context& k, int slots, const char* what) {
    auto* bars = reinterpret_cast<std::uint64_t*>(k.allocate(16 * slots, what));
    return {bars, bars + slots, slots};
  }
  /// leader: each barrier with its arrival count and its name in the interpreter's reports.
  TP_HD void init(int operand, std::uint32_t full_count, const char* full_name, std::uint32_t empty_count,
                  const char* empty_name) const {
    for (int s = 0; s < slots; ++s) {
      prim::mbarrier_init(full + s, full_count);
      prim::mbarrier_init(empty + s, empty_count);
      prim::mbarrier_name(full + s, full_name, operand, s);
      prim::mbarrier_name(empty + s, empty_name, operand, s);
    }
  }
};

/// An input of a warp-specialised pipeline, across a chain of pipelines (every warpgroup
/// holds one; the memory side and the compute side use their own cursors).
template <class Spec, class Gmem, class Grid, int MCS, int DefaultDelay, int NumCompute, bool Manual>
struct ws_input : operand_traits<Spec, Gmem, Grid, MCS, DefaultDelay, true> {
  using traits = operand_traits<Spec, Gmem, Grid, MCS, DefaultDelay, true>;
  using typename traits::T, typename traits::tile, typename traits::layout, typename traits::view_type,
      typename traits::block_index, typename traits::cursor;
  using traits::slots, traits::slot_bytes;
  // With manual_consumed_barriers the body arrives itself, possibly `delay` steps late (it
  // keeps the token, e.g. while a wgmma still reads the block); the memory side paces its
  // refills by the delay either way.
  static constexpr int delay = traits::plan::delay;
  // A multicast block is written into each CTA of its group (the cluster, or the cluster's
  // CTAs along one grid axis) by every group member's memory warpgroup, so its slot is free
  // only when the compute warps of all of them released it.
  static constexpr int cluster = Spec::multicast;
  static constexpr int multicast_axis = Spec::multicast_axis;
  static constexpr int arrivals = 4 * NumCompute * cluster;  // one per compute warp of the group
  /// Shared memory it allocates: the slots and the two barrier rings (each allocation aligned).
  static constexpr std::uint32_t allocation_bytes = slots * slot_bytes + round_up(16 * slots, smem_alignment);
  static_assert(cluster == 1 || tma_plan<tile, static_cast<int>(sizeof(T))>::boxes % cluster == 0,
                "tilepipe: the CTAs of a cluster share a multicast<c> block box by box, so it must consist of a "
                "multiple of c TMA boxes (column panels x row boxes): give its tile tp::box_rows<rows / c>");
  static_assert(cluster == 1 || !Manual, "tilepipe: multicast specs release their slots automatically; drop "
                                         "manual_consumed_barriers");
  static_assert(Spec::waited_by < NumCompute, "tilepipe: waited_by<w> names a compute warpgroup the pipeline does not "
                                              "have (w >= num_compute_wgs)");

  unsigned char* smem = nullptr;
  barrier_rings bars{};                   // full: the block landed; empty: the compute warps are done with it
  prim::smem_barrier full_at, empty_at;  // the same barriers, for the compute loop
  // compute side: the slot the step reads and its block, the wait for it, and the slots
  // of the last delay + 1 steps, oldest first, with whether each step was its block's last (shifted
  // every step so that all indices are compile-time constants)
  cursor reader;
  ready_wait<Spec::manual_ready> ready;
  int recent_slots[delay + 1] = {};
  bool recent_ends[delay + 1] = {};
  // memory side: the slot of the last fetch (the phases of its empty barriers, its block),
  // (for no_pipelining) the full barriers' phases, and the next step to fetch for
  cursor filler;
  slot_cursor landing;
  index<Grid::rank> fill_at{};
  long long fill_step = 0;
  int operand = 0;  // position among the pipeline's inputs, for reports
  failure_channel failure{};
  [[no_unique_address]] profile_recorder_ref profiler;  // the profiler's, of the warpgroup that allocated it
  // multicast along a grid axis: this CTA's place in its group, and the group's cluster ranks
  int group_place = 0;
  std::uint16_t group_ranks = 0;
  // whether this compute warpgroup waits for the blocks (all do, but for tp::waited_by<w>)
  bool waiter = true;

  TP_HD unsigned char* slot_ptr(int s) const { return smem + s * slot_bytes; }

  /// The CTAs a multicast block goes to (cluster ranks), and this CTA's place among them:
  /// constants for the whole cluster, found at allocation for the CTAs along a grid axis.
  TP_HD std::uint16_t group_mask() const {
    if constexpr (multicast_axis < 0) return static_cast<std::uint16_t>((1u << cluster) - 1);
    else return group_ranks;
  }
  TP_HD int group_position() const {
    if constexpr (multicast_axis < 0) return prim::cluster_rank();
    else return group_place;
  }

  /// compute_index: the calling warpgroup's index among the compute warpgroups (any value
  /// in the memory warpgroup).
  TP_HD void allocate(kernel_context& k, bool leader, int position, int compute_index) {
    operand = position;
    waiter = Spec::waited_by < 0 || compute_index == Spec::waited_by;
    if constexpr (debug_checks) failure = k.failure();  // read only by the debug checks
    profiler = k.profiler();
    if constexpr (cluster > 1 && multicast_axis < 0) {
      TP_REQUIRE(prim::cluster_size() == cluster,
                 "the pipeline has multicast<%d> specs but the launch's clusters have %d CTAs (launch option cluster)",
                 cluster, prim::cluster_size());
    } else if constexpr (cluster > 1) {
      TP_REQUIRE(k.cluster_extent(multicast_axis) == cluster,
                 "input %d is multicast<%d, %d> but the launch's clusters span %d CTAs along grid axis %d (launch "
                 "option cluster_shape)",
                 position, cluster, multicast_axis, k.cluster_extent(multicast_axis), multicast_axis);
      group_place = k.cluster_index(multicast_axis);
      group_ranks = k.cluster_mask_along(multicast_axis);
    }
    smem = k.allocate(slots * slot_bytes, "warp-specialised input slots");
    for (int s = 0; s < slots; ++s) prim::name_smem(slot_ptr(s), layout::bytes, "warp-specialised input", position, s);
    bars = barrier_rings::allocate(k, slots, "warp-specialised input barriers");
    full_at = prim::barrier_at(bars.full);
    empty_at = prim::barrier_at(bars.empty);
    if (leader)
      bars.init(position, 1, Spec::manual_ready ? "ready (manual)" : "ready", arrivals, Manual ? "consumed (manual)" : "consumed");
  }

  // ---- memory warpgroup ----

  /// A call of the pipeline starts its own sequence of blocks from its first step.
  TP_HD void restart() { fill_at = {}, fill_step = 0; }

  /// Fetches the block of the next step in order, if it changed; waits until the slot it
  /// goes to was released by the compute warpgroups. With no_pipelining the memory
  /// warpgroup waits for the block to land before it goes on.
  TP_HD void produce(const Spec& spec, const Gmem& g, const Grid& grid, bool first_of_call) {
    const block_index b = apply_index_map(spec.index_map, fill_at);
    if (filler.starts_block(b, first_of_call)) {
      filler.advance(slots);
      const int f = filler.slot;
      // A gathered block's boxes are looked up before the wait for its slot: the lookups'
      // loads (a page table) then run while the compute warpgroups still read the slot.
      [[maybe_unused]] std::conditional_t<Spec::gathered, box_sources<tile, Gmem>, bool> sources{};
      if constexpr (Spec::gathered)
        if (prim::leader()) sources = look_up_boxes<tile, Gmem>(b, spec.box_source);
      if (filler.reused()) {
        profiler.wait(profile_kind::wait_consumed, operand, fill_step, [&] {
          prim::mbarrier_wait(bars.empty + f, filler.take_phase());
        });
      }
      if (prim::leader()) {
        prim::mbarrier_arrive_expect_tx(bars.full + f, layout::bytes);  // the whole block lands here
        const block_site site{"input", operand, fill_step, failure};
        if constexpr (cluster > 1)
          issue_block_load_multicast<tile>(g, b, slot_ptr(f), bars.full + f, group_position(), cluster, group_mask(), site);
        else if constexpr (Spec::gathered) issue_gathered_boxes<tile>(g, sources, slot_ptr(f), bars.full + f, site);
        else issue_block_load<tile>(g, b, slot_ptr(f), bars.full + f, site);
      }
      profiler.mark(profile_kind::fetch, profile_phase::instant, operand, fill_step);
      const std::uint32_t landed = landing.take_phase(f);
      if (prim::no_pipelining()) prim::mbarrier_wait(bars.full + f, landed, {f, fill_step});
    }
    grid.increment(fill_at);
    ++fill_step;
  }

  /// At the end of a chain: waits until every slot this warpgroup filled was released.
  TP_HD void drain() {
    for (int s = 0; s < slots; ++s)
      if ((filler.used >> s) & 1u) {
        profiler.wait(profile_kind::wait_consumed, operand, -1, [&] {
          prim::mbarrier_wait(bars.empty + s, filler.take_phase(s));
        });
        filler.used &= ~(1u << s);
      }
  }

  // ---- compute warpgroups ----

  /// Before the body of step s: waits for the block if it is new; with tp::manual_ready
  /// returns the view with the wait for the body to make.
  TP_HD auto consume(const Spec& spec, const index<Grid::rank>& at, bool first_of_call, long long s) {
    if (reader.starts_block(spec.index_map, at, first_of_call)) {
      reader.advance(slots);
      ready.begin(reader, full_at, operand, s, profiler, waiter);
    }
    return ready.body_view(view_type{reinterpret_cast<T*>(slot_ptr(reader.slot)), 0}, full_at, reader.slot);
  }

  /// What the body gets with manual_consumed_barriers for the current block.
  TP_HD consumed_token token(const Spec& spec, const index<Grid::rank>& next, bool last_step) const {
    return {empty_at + reader.slot, reader.block_ends(spec.index_map, next, last_step)};
  }

  /// After the body of step s: records whether s was the block's last step, and releases
  /// the block of step s - delay if that was its last step.
  TP_HD void release_after(const Spec& spec, const index<Grid::rank>& next, bool last_step, long long s) {
#pragma unroll
    for (int h = 0; h < delay; ++h) recent_slots[h] = recent_slots[h + 1], recent_ends[h] = recent_ends[h + 1];
    recent_slots[delay] = reader.slot;
    recent_ends[delay] = reader.block_ends(spec.index_map, next, last_step);
    if constexpr (!Manual)
      if (s >= delay && recent_ends[0]) release(recent_slots[0], s - delay);
  }

  /// The compute warps are done with slot s, last read at `step`: in every CTA of the
  /// group for a multicast block. A tp::manual_ready block the body never waited for must
  /// have landed before its slot is refilled: the release waits for it (at once if the
  /// body did).
  TP_HD void release(int s, long long step) const {
    if constexpr (Spec::manual_ready)
      if (waiter) prim::mbarrier_wait(full_at + s, reader.last_phase(s));
    if constexpr (cluster > 1) prim::mbarrier_arrive_per_warp_cluster(empty_at + s, group_mask());
    else prim::mbarrier_arrive_per_warp(empty_at + s);
    profiler.mark(profile_kind::release, profile_phase::instant, operand, step);
  }

  /// After the last step: releases the blocks of the last `delay` steps.
  TP_HD void release_tail(long long steps) {
    if constexpr (!Manual)
#pragma unroll
      for (int h = 1; h <= delay; ++h)
        if (steps - (delay + 1 - h) >= 0 && recent_ends[h]) release(recent_slots[h], steps - (delay + 1 - h));
  }
};

/// An output of a warp-specialised pipeline, across a chain of pipelines.
template <class Spec, class Gmem, class Grid, int MCS, int NumCompute>
struct ws_output : operand_traits<Spec, Gmem, Grid, MCS, 0, false> {
  using traits = operand_traits<Spec, Gmem, Grid, MCS, 0, false>;
  using typename traits::T, typename traits::tile, typename traits::layout, typename traits::view_type,
      typename traits::block_index, typename traits::cursor;
  using traits::slots, traits::slot_bytes;
  static constexpr int arrivals = 4 * NumCompute;
  /// Shared memory it allocates: the slots and the two barrier rings (each allocation aligned).
  static constexpr std::uint32_t allocation_bytes = slots * slot_bytes + round_up(16 * slots, smem_alignment);

  unsigned char* smem = nullptr;
  barrier_rings bars{};  // full: the compute warps wrote the block; empty: its store has read it
  // compute side: the slot the steps write and its block
  cursor writer;
  // memory side: the slot of the last store and its block, and the slot whose store is
  // still reading it (-1: none)
  cursor storer;
  int pending = -1;
  int operand = 0;  // position among the pipeline's outputs, for reports
  failure_channel failure{};
  [[no_unique_address]] profile_recorder_ref profiler;  // the profiler's, of the warpgroup that allocated it

  TP_HD unsigned char* slot_ptr(int s) const { return smem + s * slot_bytes; }

  TP_HD void allocate(kernel_context& k, bool leader, int position, int barrier_operand) {
    operand = position;
    if constexpr (debug_checks) failure = k.failure();  // read only by the debug checks
    profiler = k.profiler();
    smem = k.allocate(slots * slot_bytes, "warp-specialised output slots");
    for (int s = 0; s < slots; ++s) prim::name_smem(slot_ptr(s), layout::bytes, "warp-specialised output", position, s);
    bars = barrier_rings::allocate(k, slots, "warp-specialised output barriers");
    if (leader) {
      bars.init(barrier_operand, arrivals, "output full", 1, "output free");
      for (int s = 0; s < slots; ++s) prim::poison(slot_ptr(s), layout::bytes);  // no block written yet
    }
  }

  // ---- compute warpgroups ----

  /// Before the body of step `at`: a step whose block differs from the last one starts a
  /// new run in the next slot, after that slot's last store has read it.
  TP_HD view_type begin_run(const Spec& spec, const index<Grid::rank>& at, bool first_of_call) {
    const block_index b = apply_index_map(spec.index_map, at);
    if (writer.starts_block(b, first_of_call)) {
      writer.advance(slots);
      if (writer.reused()) {
        profiler.wait(profile_kind::wait_output, operand, -1, [&] {
          prim::mbarrier_wait(bars.empty + writer.slot, writer.take_phase());
        });
      }
      prim::note_block(slot_ptr(writer.slot), b.v);
    }
    return {reinterpret_cast<T*>(slot_ptr(writer.slot)), 0};
  }

  /// After the body: if the run ends (at the last step or when the next block differs), the
  /// block is written.
  TP_HD void end_run(const Spec& spec, const index<Grid::rank>& next, bool last_step) {
    if (writer.block_ends(spec.index_map, next, last_step)) {
      prim::fence_proxy_async();  // the body's SMEM writes, before the TMA store reads them
      prim::mbarrier_arrive_per_warp(bars.full + writer.slot);
      profiler.mark(profile_kind::written, profile_phase::instant, operand);
    }
  }

  // ---- memory warpgroup ----

  /// If the block's run ends at the step `at` (next is the following step), waits until it
  /// is written and stores it; returns whether it stored.
  TP_HD bool store_if_ended(const Spec& spec, const Gmem& g, const Grid& grid, const index<Grid::rank>& at,
                            const index<Grid::rank>& next, long long s, bool last_step, bool first_of_call) {
    const block_index b = apply_index_map(spec.index_map, at);
    if (storer.starts_block(b, first_of_call)) {
      check_output_run(failure, spec.index_map, grid, b, s, operand);
      storer.advance(slots);
    }
    if (!storer.block_ends(spec.index_map, next, last_step, b)) return false;
    profiler.wait(profile_kind::wait_written, operand, s, [&] {
      prim::mbarrier_wait(bars.full + storer.slot, storer.take_phase());
    });
    if (prim::leader()) issue_block_store<tile>(g, b, slot_ptr(storer.slot), {"output", operand, s, failure});
    profiler.mark(profile_kind::store, profile_phase::instant, operand, s);
    return true;
  }

  /// After the stores of a step were committed: frees the slot of the previous store once
  /// it has been read; with InFlight = 0 (one slot), the new store's own slot.
  template <int InFlight>
  TP_HD void free_stored(bool stored_now) {
    if (!stored_now) return;
    if (InFlight == 0 || pending >= 0) {
      profiler.wait(profile_kind::wait_store, operand, -1, [&] {
        if (prim::leader()) prim::bulk_wait_read<InFlight>();
      });
      const int s = InFlight == 0 ? storer.slot : pending;
      if (prim::leader()) {
        prim::poison(slot_ptr(s), layout::bytes);
        prim::mbarrier_arrive(bars.empty + s);
      }
    }
    pending = InFlight == 0 ? -1 : storer.slot;
  }

  TP_HD void drain() {
    if (pending < 0) return;
    profiler.wait(profile_kind::wait_store, operand, -1, [&] {
      if (prim::leader()) {
        prim::bulk_wait_read<0>();
        prim::mbarrier_arrive(bars.empty + pending);
      }
    });
    pending = -1;
  }
};

}  // namespace tilepipe::pipeline_detail
