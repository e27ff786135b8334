// The per-operand state of both pipelines (Pallas' BufferedRef): the SMEM slots of one
// operand, its barriers, and the cursors that decide which slot each step uses.
//   smem_operand   an operand of emit_pipeline (all warpgroups run the schedule)
//   ws_input       an input of emit_pipeline_warp_specialized (full/empty = ready/consumed)
//   ws_output      an output of it (full/empty = written/stored)
// All three share operand_traits (types, slot plan, checks) and slot_cursor (slot + phase).
//
// An operand moves to a new slot only when its block index changes between consecutive
// steps (TPU semantics), so a consumer cursor and a producer cursor that visit the same
// steps agree on the slot of every block without talking to each other.
#pragma once

#include "../backend/primitives.cuh"
#include "../context.cuh"
#include "../core/block_spec.cuh"
#include "../core/grid.cuh"
#include "../core/refs.cuh"
#include "../ops/copy.cuh"
#include "../profile.cuh"

namespace tilepipe {

/// What the body gets per input with manual_consumed_barriers: arrive() once per step from
/// every compute warpgroup, when done with the block. It releases the slot on the block's
/// last step and is a no-op on the others (the block stays for the next step).
struct consumed_token {
  prim::smem_barrier bar{};
  bool releases = false;
  TP_HD void arrive() const {
    if (releases) prim::mbarrier_arrive_per_warp(bar);
  }
};

/// What the body gets for an input whose spec has tp::manual_ready: the slot its block lands
/// in, and the wait for it. The slot's address may be used at once (a wgmma descriptor, a
/// view of its rows); its bytes only after wait(), which returns the view. Every warpgroup
/// that reads the block waits; waiting again (a later step of the same block) returns at once.
/// For an input with tp::waited_by<w>, wait() waits only in compute warpgroup w and returns
/// the view at once in the others (which read it behind w, in a turn order).
template <class View>
struct pending_block {
  View view;
  prim::smem_barrier ready;
  std::uint32_t parity;
  prim::wait_site site;
  bool waits = true;  // false in the warpgroups a tp::waited_by input leaves out
  TP_HD View wait() const {
    if (waits) prim::mbarrier_wait(ready, parity, site);
    return view;
  }
};

}  // namespace tilepipe

namespace tilepipe::pipeline_detail {

TP_HD constexpr std::uint32_t round_up(std::uint32_t x, std::size_t a) {
  return static_cast<std::uint32_t>((x + a - 1) / a * a);
}

/// The slot after s in a ring of n (a compare, not a signed modulo: it runs every step).
TP_HD constexpr int next_slot(int s, int n) { return s + 1 == n ? 0 : s + 1; }

/// The shared memory a tuple of operands allocates.
template <class Tuple>
struct allocation_sum;
template <class... Ops>
struct allocation_sum<cuda::std::tuple<Ops...>> {
  static constexpr std::uint32_t value = (0u + ... + Ops::allocation_bytes);
};

/// The most slots and the longest release delay among a pipeline's input operands.
template <class Tuple>
struct input_maxima;
template <class... Ops>
struct input_maxima<cuda::std::tuple<Ops...>> {
  static constexpr int slots = detail::largest({0, Ops::slots...});
  static constexpr int delay = detail::largest({0, Ops::delay...});
};

#define TP_REVISIT_MESSAGE(block)                                                                            \
  "output %d: its index map returns block " block " at step %lld, which step %lld visited before, with other "  \
  "blocks in between: the steps that visit an output block must be consecutive (TPU semantics: a block is "     \
  "stored when its run of steps ends, and a later visit starts from a fresh buffer, so what it accumulated "     \
  "would be lost); order the grid so that the axes the output's index map ignores come last"

/// Fails: output `operand`'s block b, visited at step `earlier`, comes back at step s.
template <int R>
TP_HD void fail_output_revisit(const failure_channel& f, const index<R>& b, int operand, long long earlier,
                               long long s) {
  if constexpr (R == 1) prim::fail(f, TP_REVISIT_MESSAGE("(%d)"), operand, b.v[0], s, earlier);
  else if constexpr (R == 2) prim::fail(f, TP_REVISIT_MESSAGE("(%d, %d)"), operand, b.v[0], b.v[1], s, earlier);
  else if constexpr (R == 3)
    prim::fail(f, TP_REVISIT_MESSAGE("(%d, %d, %d)"), operand, b.v[0], b.v[1], b.v[2], s, earlier);
  else prim::fail(f, TP_REVISIT_MESSAGE("(%d, %d, %d, %d, ...)"), operand, b.v[0], b.v[1], b.v[2], b.v[3], s, earlier);
}
#undef TP_REVISIT_MESSAGE

/// A run of output block b starts at step s: no step before s - 1 may have visited b (the
/// rule above). O(steps) per run, so made only where debug checks are (the interpreter,
/// TILEPIPE_DEBUG builds).
template <class Map, class Grid, class B>
TP_HD void check_output_run(const failure_channel& f, const Map& map, const Grid& grid, const B& b, long long s,
                            int operand) {
  if constexpr (debug_checks) {
    index<Grid::rank> at{};
    for (long long t = 0; t + 1 < s; ++t, grid.increment(at))
      if (apply_index_map(map, at) == b) fail_output_revisit(f, b, operand, t, s);
  }
}

/// Slots and release delay of an SMEM operand, from the spec, the pipeline options and,
/// for static grids, the step count (no more slots than steps). Outputs are never refilled:
/// they have no release delay.
template <class Spec, class Grid, int MCS, int DefaultDelay, bool IsInput = true>
struct slot_plan {
  static constexpr unsigned axes = Spec::template axes<Grid::rank>();
  static constexpr bool invariant = axes == 0;
  // An invariant operand needs one slot; with buffered<n> it gets n, so that a chain of
  // warp-specialised pipelines fetches the next pipeline's block while this one's is in use.
  static constexpr int wanted = invariant ? (Spec::buffers ? Spec::buffers : 1) : (Spec::buffers ? Spec::buffers : MCS);
  static constexpr long long static_steps = [] {
    long long n = 1;
    for (int a = 0; a < Grid::rank; ++a) n *= Grid::static_extents[a];
    return n;
  }();
  static constexpr bool clamped = Grid::is_static && static_steps < wanted;
  static constexpr int slots = clamped ? (static_steps > 0 ? static_cast<int>(static_steps) : 1) : wanted;
  static constexpr int requested_delay = !IsInput ? 0 : Spec::delay >= 0 ? Spec::delay : DefaultDelay;
  // An invariant operand is fetched once, and with no more steps than slots nothing is
  // ever refilled: no delay is needed in either case.
  static constexpr int delay = (invariant || clamped) ? 0 : requested_delay;
  static_assert(invariant || clamped || requested_delay < wanted,
                "tilepipe: delay_release must be smaller than the operand's slot count "
                "(max_concurrent_steps, or buffered<n>): a slot cannot be refilled while it is still reserved");
};

/// Where one side of an operand stands in its ring of slots (CUTLASS's PipelineState): the
/// current slot and the phase of each slot's barrier. Slots are taken in ring order, but an
/// operand moves on only when its block changes, so each slot keeps its own phase bit.
struct slot_cursor {
  int slot = -1;             // the current slot; -1 before the first
  std::uint32_t phase = 0;   // bit s: the parity of slot s's next barrier phase
  std::uint32_t used = 0;    // bit s: slot s was taken before (its "free" barrier has a phase to wait for)

  /// Moves to the next slot in the ring of n.
  TP_HD void advance(int n) { slot = next_slot(slot, n); }
  /// The parity to wait for on slot s's barrier; the next wait on it waits for the phase after.
  TP_HD std::uint32_t take_phase(int s) {
    const std::uint32_t p = (phase >> s) & 1u;
    phase ^= 1u << s;
    return p;
  }
  TP_HD std::uint32_t take_phase() { return take_phase(slot); }
  /// The parity slot s's last taken phase had (its latest block).
  TP_HD std::uint32_t last_phase(int s) const { return ((phase >> s) & 1u) ^ 1u; }
  /// Whether the current slot was taken before; marks it taken.
  TP_HD bool reused() {
    const bool u = (used >> slot) & 1u;
    used |= 1u << slot;
    return u;
  }
};

/// The wait for an input's new block (both pipelines): made before the body, or with
/// tp::manual_ready (Manual) kept, its parity and place, for the body's pending_block.
template <bool Manual>
struct ready_wait {
  std::uint32_t parity = 0;
  prim::wait_site site;

  bool waits = true;

  /// The block of step s is new in the reader's current slot, whose barrier is bars + slot;
  /// `waits` is false in a warpgroup that a tp::waited_by input leaves out (it takes the
  /// phase but does not poll the barrier).
  TP_HD void begin(slot_cursor& reader, prim::smem_barrier bars, int operand, long long s, const kernel_context& k,
                   bool waiter = true) {
    const std::uint32_t p = reader.take_phase();
    if constexpr (Manual) {
      parity = p, waits = waiter;
      site = {reader.slot, s};
    } else if (waiter) {
      k.profile_wait(profile_kind::wait_ready, operand, s, [&] { prim::mbarrier_wait(bars + reader.slot, p, {reader.slot, s}); });
    }
  }
  /// What the body gets for the block in `slot`: its view, or the view with the wait.
  template <class View>
  TP_HD auto body_view(View v, prim::smem_barrier bars, int slot) const {
    if constexpr (Manual) return pending_block<View>{v, bars + slot, parity, site, waits};
    else return v;
  }
};

/// What every SMEM operand derives from its spec, its GMEM ref and the pipeline: element
/// type, tile, layout and view, slot plan, block index type, slot bytes, and the checks.
template <class Spec, class Gmem, class Grid, int MCS, int DefaultDelay, bool IsInput>
struct operand_traits {
  using T = typename Gmem::value_type;
  using tile = typename Spec::tile_type;
  using layout = tile_layout<tile, static_cast<int>(sizeof(T))>;
  using view_type = smem_ref<T, layout>;
  using plan = slot_plan<Spec, Grid, MCS, DefaultDelay, IsInput>;
  using block_index = decltype(apply_index_map(std::declval<typename Spec::map_type>(), index<Grid::rank>{}));
  static constexpr int slots = plan::slots;
  static constexpr std::uint32_t slot_bytes = round_up(layout::bytes, static_cast<std::uint32_t>(smem_alignment));
  // How a step's block is known to be new, fixed at compile time where the map tells:
  // at every step (streamed: tp::streamed, or a map affine in a one-axis grid), only at the
  // first step of a call (stationary: the map ignores the grid), or else by comparing the
  // block index with the previous step's.
  static constexpr bool streamed = IsInput && Spec::template streams<Grid::rank>();
  static constexpr bool stationary = !streamed && plan::invariant;

  static_assert(Gmem::template has_tile<tile>,
                "tilepipe: the gmem_ref passed for this spec has no tensor map for the spec's tile: list the tile "
                "in the kernel parameter's type, tp::gmem<T, R, tile...>");
  static_assert(block_index::rank == Gmem::rank,
                "tilepipe: the index map returns a different number of indices than the operand has dimensions");
  static_assert(IsInput || !Spec::manual_ready,
                "tilepipe: tp::manual_ready is an input's option: an output block has no ready barrier to wait for");
  static_assert(IsInput || (!Spec::streamed_option && Spec::waited_by < 0),
                "tilepipe: tp::streamed and tp::waited_by are input options: an output block is kept while its "
                "index stays the same, and no warpgroup waits for it");
};

/// A pipelined operand of emit_pipeline in SMEM. Inputs also own one ready barrier per slot.
template <class Spec, class Gmem, class Grid, int MCS, int DefaultDelay, bool IsInput>
struct smem_operand : operand_traits<Spec, Gmem, Grid, MCS, DefaultDelay, IsInput> {
  using traits = operand_traits<Spec, Gmem, Grid, MCS, DefaultDelay, IsInput>;
  using typename traits::T, typename traits::tile, typename traits::layout, typename traits::view_type,
      typename traits::block_index;
  using traits::slots, traits::slot_bytes;
  static_assert(Spec::multicast == 1, "tilepipe: multicast specs need emit_pipeline_warp_specialized");
  static_assert(Spec::waited_by < 0, "tilepipe: tp::waited_by is an option of emit_pipeline_warp_specialized's inputs: "
                                     "in emit_pipeline every warpgroup waits for its blocks");
  static constexpr int delay = traits::plan::delay;
  static constexpr std::uint32_t smem_bytes = slots * slot_bytes;
  static constexpr std::uint32_t barrier_bytes = IsInput ? 8 * slots : 0;
  /// Shared memory it allocates: the slots, and the barriers of an input (each allocation aligned).
  static constexpr std::uint32_t allocation_bytes = smem_bytes + round_up(barrier_bytes, smem_alignment);

  const Spec* spec;
  const Gmem* gmem;
  int operand = 0;  // position among the pipeline's inputs or outputs, for reports
  failure_channel failure{};
  unsigned char* smem = nullptr;
  std::uint64_t* bars = nullptr;
  prim::smem_barrier bars_at;  // the same barriers, for the per-step waits

  // Consumer: the slot the current step reads (and its ready phases), the last block, and
  // the wait for it.
  slot_cursor reader;
  block_index last{};
  ready_wait<Spec::manual_ready> ready;
  // Producer (inputs): the next step to fetch for and its grid index, the slot of the last
  // fetch (and, for no_pipelining, the phase each slot's fill completes), the last block.
  index<Grid::rank> fill_at{};
  long long fill_step = 0;
  slot_cursor filler;
  block_index fill_last{};

  TP_HD unsigned char* slot_ptr(int s) const { return smem + s * slot_bytes; }
  TP_HD std::uint64_t* bar(int s) const { return bars + s; }
  TP_HD view_type view() const { return {reinterpret_cast<T*>(slot_ptr(reader.slot)), 0}; }
  /// What the body gets: the view, or (tp::manual_ready) the view and the wait for its block.
  TP_HD auto body_view() const { return ready.body_view(view(), bars_at, reader.slot); }
  TP_HD block_index block_at(const index<Grid::rank>& at) const { return apply_index_map(spec->index_map, at); }

  /// Allocates the slots (and barriers) of operand `operand` (its position among the
  /// pipeline's inputs or outputs).
  TP_HD void allocate(kernel_context& k, int position) {
    operand = position;
    if constexpr (debug_checks) failure = k.failure();  // read only by the debug checks
    smem = k.allocate(smem_bytes, IsInput ? "pipeline input slots" : "pipeline output slots");
    for (int s = 0; s < slots; ++s)
      prim::name_smem(slot_ptr(s), layout::bytes, IsInput ? "pipeline input" : "pipeline output", position, s);
    if constexpr (IsInput) {
      bars = reinterpret_cast<std::uint64_t*>(k.allocate(barrier_bytes, "pipeline barriers"));
      bars_at = prim::barrier_at(bars);
    }
  }

  /// leader: creates the ready barriers (one arrival: the leader's arrive.expect_tx).
  TP_HD void init_barriers(int position) const {
    if constexpr (IsInput) {
      for (int s = 0; s < slots; ++s) {
        prim::mbarrier_init(bar(s), 1);
        prim::mbarrier_name(bar(s), Spec::manual_ready ? "pipeline ready (manual)" : "pipeline ready", position, s);
      }
    }
  }
  /// leader: invalidates the ready barriers. A tp::manual_ready block the body never
  /// waited for may still be landing: its fill is waited for first.
  TP_HD void inval_barriers() const {
    if constexpr (IsInput)
      for (int s = 0; s < slots; ++s) {
        if constexpr (Spec::manual_ready)
          if ((filler.used >> s) & 1u) prim::mbarrier_wait(bar(s), filler.last_phase(s));
        prim::mbarrier_inval(bar(s));
      }
  }

  // ---- inputs ----

  /// All threads: before the body of step s at `at`, wait for its block if it is new
  /// (with tp::manual_ready the body waits).
  TP_HD void consume(const index<Grid::rank>& at, long long s, const kernel_context& k) {
    if constexpr (!traits::streamed) {
      if (reader.slot >= 0 && traits::stationary) return;
      const block_index b = block_at(at);
      if (reader.slot >= 0 && b == last) return;
      last = b;
    }
    reader.advance(slots);
    ready.begin(reader, bars_at, operand, s, k);
  }

  /// leader: the fetch for the next step in order (fetches only a block that changed).
  /// With no_pipelining the leader waits for it at once (the consumers' wait for the same
  /// phase then returns immediately).
  TP_HD void produce(const Grid& grid, const kernel_context& k) {
    const block_index b = block_at(fill_at);
    if (traits::streamed || filler.slot < 0 || (!traits::stationary && !(b == fill_last))) {
      fill_last = b;
      filler.advance(slots);
      const int f = filler.slot;
      // A tp::manual_ready block the body never waited for may still be landing in the slot.
      if constexpr (Spec::manual_ready)
        if (filler.reused()) prim::mbarrier_wait(bar(f), filler.last_phase(f));
      prim::mbarrier_arrive_expect_tx(bar(f), layout::bytes);
      issue_block_load<tile>(*gmem, b, slot_ptr(f), bar(f), {"input", operand, fill_step, failure});
      k.profile(profile_kind::fetch, profile_phase::instant, operand, fill_step);
      const std::uint32_t phase = filler.take_phase();
      if (prim::no_pipelining()) prim::mbarrier_wait(bar(f), phase, {f, fill_step});
    }
    grid.increment(fill_at);
    ++fill_step;
  }

  /// Whether the body of step s is followed by the fetch for step s + slots - delay.
  TP_HD bool refills_after(long long s, long long steps) const { return s >= delay && s + slots - delay < steps; }

  // ---- outputs ----

  /// Before the body of step s: a step whose block differs from the last one starts a new
  /// run in the next slot; the leader first waits until that slot's last store has read it.
  TP_HD bool begin_run(const Grid& grid, const index<Grid::rank>& at, long long s, bool leader,
                       const kernel_context& k) {
    const block_index b = block_at(at);
    if (reader.slot >= 0 && b == last) return false;
    last = b;
    reader.advance(slots);
    if (leader) {
      check_output_run(failure, spec->index_map, grid, b, s, operand);
      k.profile_wait(profile_kind::wait_output, operand, s, [&] { prim::bulk_wait_read<slots - 1>(); });
      prim::poison(slot_ptr(reader.slot), layout::bytes);
    }
    prim::note_block(slot_ptr(reader.slot), b.v);
    return true;
  }

  /// After the body: the run ends at the last step or when the next block differs.
  TP_HD bool run_ends(const index<Grid::rank>& next, bool last_step) const { return last_step || !(block_at(next) == last); }

  /// leader: stores the current slot to the current block (after step s).
  TP_HD void store(long long s, const kernel_context& k) const {
    issue_block_store<tile>(*gmem, last, slot_ptr(reader.slot), {"output", operand, s, failure});
    k.profile(profile_kind::store, profile_phase::instant, operand, s);
  }
};

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
      typename traits::block_index;
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
  // compute side: the slot the step reads, its last block, the wait for it, and the slots
  // of the last delay + 1 steps, oldest first, with whether each step was its block's last (shifted
  // every step so that all indices are compile-time constants)
  slot_cursor reader;
  block_index last{};
  ready_wait<Spec::manual_ready> ready;
  int recent_slots[delay + 1] = {};
  bool recent_ends[delay + 1] = {};
  // memory side: the slot of the last fetch (and the phases of its empty barriers), its
  // block, the next step to fetch for, and (for no_pipelining) the full barriers' phases
  slot_cursor filler;
  slot_cursor landing;
  block_index fill_last{};
  index<Grid::rank> fill_at{};
  long long fill_step = 0;
  int operand = 0;  // position among the pipeline's inputs, for reports
  failure_channel failure{};
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

  /// Fetches the block of the next step in order, if it changed; waits until the slot it
  /// goes to was released by the compute warpgroups. With no_pipelining the memory
  /// warpgroup waits for the block to land before it goes on.
  TP_HD void produce(const Spec& spec, const Gmem& g, const Grid& grid, bool first_of_call, const kernel_context& k) {
    const block_index b = apply_index_map(spec.index_map, fill_at);
    if (first_of_call || traits::streamed || (!traits::stationary && !(b == fill_last))) {
      fill_last = b;
      filler.advance(slots);
      const int f = filler.slot;
      if (filler.reused()) {
        k.profile_wait(profile_kind::wait_consumed, operand, fill_step, [&] {
          prim::mbarrier_wait(bars.empty + f, filler.take_phase());
        });
      }
      if (prim::leader()) {
        prim::mbarrier_arrive_expect_tx(bars.full + f, layout::bytes);  // the whole block lands here
        const block_site site{"input", operand, fill_step, failure};
        if constexpr (cluster > 1)
          issue_block_load_multicast<tile>(g, b, slot_ptr(f), bars.full + f, group_position(), cluster, group_mask(), site);
        else issue_block_load<tile>(g, b, slot_ptr(f), bars.full + f, site);
      }
      k.profile(profile_kind::fetch, profile_phase::instant, operand, fill_step);
      const std::uint32_t landed = landing.take_phase(f);
      if (prim::no_pipelining()) prim::mbarrier_wait(bars.full + f, landed, {f, fill_step});
    }
    grid.increment(fill_at);
    ++fill_step;
  }

  /// At the end of a chain: waits until every slot this warpgroup filled was released.
  TP_HD void drain(const kernel_context& k) {
    for (int s = 0; s < slots; ++s)
      if ((filler.used >> s) & 1u) {
        k.profile_wait(profile_kind::wait_consumed, operand, -1, [&] {
          prim::mbarrier_wait(bars.empty + s, filler.take_phase(s));
        });
        filler.used &= ~(1u << s);
      }
  }

  // ---- compute warpgroups ----

  /// Before the body of step s: waits for the block if it is new; with tp::manual_ready
  /// returns the view with the wait for the body to make.
  TP_HD auto consume(const Spec& spec, const index<Grid::rank>& at, bool first_of_call, long long s,
                     const kernel_context& k) {
    if (starts_block(spec, at, first_of_call)) {
      reader.advance(slots);
      ready.begin(reader, full_at, operand, s, k, waiter);
    }
    return ready.body_view(view_type{reinterpret_cast<T*>(slot_ptr(reader.slot)), 0}, full_at, reader.slot);
  }

  /// Whether step `at` reads a new block: every step of a streamed input, the first of a
  /// call of a stationary one, and otherwise when its index differs from the last.
  TP_HD bool starts_block(const Spec& spec, const index<Grid::rank>& at, bool first_of_call) {
    if constexpr (traits::streamed) return true;
    else if constexpr (traits::stationary) return first_of_call;
    else {
      const block_index b = apply_index_map(spec.index_map, at);
      if (!first_of_call && b == last) return false;
      last = b;
      return true;
    }
  }
  /// Whether the current block's last step is the one before `next` (the call's last step
  /// ends every block).
  TP_HD bool ends_block(const Spec& spec, const index<Grid::rank>& next, bool last_step) const {
    if constexpr (traits::streamed) return true;
    else if constexpr (traits::stationary) return last_step;
    else return last_step || !(apply_index_map(spec.index_map, next) == last);
  }
  /// What the body gets with manual_consumed_barriers for the current block.
  TP_HD consumed_token token(const Spec& spec, const index<Grid::rank>& next, bool last_step) const {
    return {empty_at + reader.slot, ends_block(spec, next, last_step)};
  }

  /// After the body of step s: records whether s was the block's last step, and releases
  /// the block of step s - delay if that was its last step.
  TP_HD void release_after(const Spec& spec, const index<Grid::rank>& next, bool last_step, long long s,
                           const kernel_context& k) {
#pragma unroll
    for (int h = 0; h < delay; ++h) recent_slots[h] = recent_slots[h + 1], recent_ends[h] = recent_ends[h + 1];
    recent_slots[delay] = reader.slot;
    recent_ends[delay] = ends_block(spec, next, last_step);
    if constexpr (!Manual)
      if (s >= delay && recent_ends[0]) release(recent_slots[0], s - delay, k);
  }

  /// The compute warps are done with slot s, last read at `step`: in every CTA of the
  /// group for a multicast block. A tp::manual_ready block the body never waited for must
  /// have landed before its slot is refilled: the release waits for it (at once if the
  /// body did).
  TP_HD void release(int s, long long step, const kernel_context& k) const {
    if constexpr (Spec::manual_ready)
      if (waiter) prim::mbarrier_wait(full_at + s, reader.last_phase(s));
    if constexpr (cluster > 1) prim::mbarrier_arrive_per_warp_cluster(empty_at + s, group_mask());
    else prim::mbarrier_arrive_per_warp(empty_at + s);
    k.profile(profile_kind::release, profile_phase::instant, operand, step);
  }

  /// After the last step: releases the blocks of the last `delay` steps.
  TP_HD void release_tail(long long steps, const kernel_context& k) {
    if constexpr (!Manual)
#pragma unroll
      for (int h = 1; h <= delay; ++h)
        if (steps - (delay + 1 - h) >= 0 && recent_ends[h]) release(recent_slots[h], steps - (delay + 1 - h), k);
  }
};

/// An output of a warp-specialised pipeline, across a chain of pipelines.
template <class Spec, class Gmem, class Grid, int MCS, int NumCompute>
struct ws_output : operand_traits<Spec, Gmem, Grid, MCS, 0, false> {
  using traits = operand_traits<Spec, Gmem, Grid, MCS, 0, false>;
  using typename traits::T, typename traits::tile, typename traits::layout, typename traits::view_type,
      typename traits::block_index;
  using traits::slots, traits::slot_bytes;
  static constexpr int arrivals = 4 * NumCompute;
  /// Shared memory it allocates: the slots and the two barrier rings (each allocation aligned).
  static constexpr std::uint32_t allocation_bytes = slots * slot_bytes + round_up(16 * slots, smem_alignment);

  unsigned char* smem = nullptr;
  barrier_rings bars{};  // full: the compute warps wrote the block; empty: its store has read it
  // compute side: the slot the steps write, its block
  slot_cursor writer;
  block_index last{};
  // memory side: the slot of the last store, its block, and the slot whose store is still
  // reading it (-1: none)
  slot_cursor storer;
  block_index store_last{};
  int pending = -1;
  int operand = 0;  // position among the pipeline's outputs, for reports
  failure_channel failure{};

  TP_HD unsigned char* slot_ptr(int s) const { return smem + s * slot_bytes; }

  TP_HD void allocate(kernel_context& k, bool leader, int position, int barrier_operand) {
    operand = position;
    if constexpr (debug_checks) failure = k.failure();  // read only by the debug checks
    smem = k.allocate(slots * slot_bytes, "warp-specialised output slots");
    for (int s = 0; s < slots; ++s) prim::name_smem(slot_ptr(s), layout::bytes, "warp-specialised output", position, s);
    bars = barrier_rings::allocate(k, slots, "warp-specialised output barriers");
    if (leader) {
      bars.init(barrier_operand, arrivals, "output full", 1, "output free");
      for (int s = 0; s < slots; ++s) prim::poison(slot_ptr(s), layout::bytes);  // no block written yet
    }
  }

  // ---- compute warpgroups ----

  TP_HD view_type begin(const Spec& spec, const index<Grid::rank>& at, bool first_of_call, const kernel_context& k) {
    const block_index b = apply_index_map(spec.index_map, at);
    if (first_of_call || !(b == last)) {
      last = b;
      writer.advance(slots);
      if (writer.reused()) {
        k.profile_wait(profile_kind::wait_output, operand, -1, [&] {
          prim::mbarrier_wait(bars.empty + writer.slot, writer.take_phase());
        });
      }
      prim::note_block(slot_ptr(writer.slot), b.v);
    }
    return {reinterpret_cast<T*>(slot_ptr(writer.slot)), 0};
  }

  TP_HD void end(const Spec& spec, const index<Grid::rank>& next, bool last_step, const kernel_context& k) {
    if (last_step || !(apply_index_map(spec.index_map, next) == last)) {
      prim::fence_proxy_async();  // the body's SMEM writes, before the TMA store reads them
      prim::mbarrier_arrive_per_warp(bars.full + writer.slot);
      k.profile(profile_kind::written, profile_phase::instant, operand);
    }
  }

  // ---- memory warpgroup ----

  /// If the block's run ends at the step `at` (next is the following step), waits until it
  /// is written and stores it; returns whether it stored.
  TP_HD bool store_if_ended(const Spec& spec, const Gmem& g, const Grid& grid, const index<Grid::rank>& at,
                            const index<Grid::rank>& next, long long s, bool last_step, bool first_of_call,
                            const kernel_context& k) {
    const block_index b = apply_index_map(spec.index_map, at);
    if (first_of_call || !(b == store_last)) {
      check_output_run(failure, spec.index_map, grid, b, s, operand);
      store_last = b;
      storer.advance(slots);
    }
    if (!(last_step || !(apply_index_map(spec.index_map, next) == b))) return false;
    k.profile_wait(profile_kind::wait_written, operand, s, [&] {
      prim::mbarrier_wait(bars.full + storer.slot, storer.take_phase());
    });
    if (prim::leader()) issue_block_store<tile>(g, b, slot_ptr(storer.slot), {"output", operand, s, failure});
    k.profile(profile_kind::store, profile_phase::instant, operand, s);
    return true;
  }

  /// After the stores of a step were committed: frees the slot of the previous store once
  /// it has been read; with InFlight = 0 (one slot), the new store's own slot.
  template <int InFlight>
  TP_HD void free_stored(bool stored_now, const kernel_context& k) {
    if (!stored_now) return;
    if (InFlight == 0 || pending >= 0) {
      k.profile_wait(profile_kind::wait_store, operand, -1, [&] {
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

  TP_HD void drain(const kernel_context& k) {
    if (pending < 0) return;
    k.profile_wait(profile_kind::wait_store, operand, -1, [&] {
      if (prim::leader()) {
        prim::bulk_wait_read<0>();
        prim::mbarrier_arrive(bars.empty + pending);
      }
    });
    pending = -1;
  }
};


/// An operand left in global memory: the body gets the GMEM ref; nothing is copied.
template <class Gmem>
struct gmem_operand {
  const Gmem* gmem;
  static constexpr int slots = 0;
  static constexpr int delay = 0;
  static constexpr std::uint32_t allocation_bytes = 0;
  TP_HD const Gmem& view() const { return *gmem; }
  TP_HD const Gmem& body_view() const { return *gmem; }
  TP_HD void allocate(kernel_context&, int) {}
  TP_HD void init_barriers(int) const {}
  TP_HD void inval_barriers() const {}
  template <class I>
  TP_HD void consume(const I&, long long, const kernel_context&) {}
  template <class G>
  TP_HD void produce(const G&, const kernel_context&) {}
  TP_HD bool refills_after(long long, long long) const { return false; }
  template <class G, class I>
  TP_HD bool begin_run(const G&, const I&, long long, bool, const kernel_context&) {
    return false;
  }
  template <class I>
  TP_HD bool run_ends(const I&, bool) const {
    return false;
  }
  TP_HD void store(long long, const kernel_context&) const {}
};

/// An operand of a warp-specialised pipeline left in global memory (gmem_spec): no slots,
/// no barriers, nothing for the memory warpgroup to do; the body gets the call's GMEM ref.
struct ws_gmem_operand {
  static constexpr int slots = 0;
  static constexpr int delay = 0;
  static constexpr std::uint32_t allocation_bytes = 0;
  long long fill_step = 0;   // the memory side resets every input's cursor at a call's start
  struct {
  } fill_at;
  template <class... A>
  TP_HD void allocate(A&&...) {}
  template <class... A>
  TP_HD void produce(A&&...) {}
  template <class... A>
  TP_HD bool store_if_ended(A&&...) {
    return false;
  }
  template <int>
  TP_HD void free_stored(bool, const kernel_context&) {}
  TP_HD void drain(const kernel_context&) {}
  TP_HD void release_tail(long long, const kernel_context&) {}
  template <class... A>
  TP_HD void end(A&&...) {}
  template <class... A>
  TP_HD void release_after(A&&...) {}
};

template <class Spec, class Gmem, class Grid, int MCS, int DefaultDelay, bool IsInput>
TP_HD auto make_operand(const Spec& spec, const Gmem& gmem) {
  if constexpr (Spec::in_smem) return smem_operand<Spec, Gmem, Grid, MCS, DefaultDelay, IsInput>{{}, &spec, &gmem};
  else return gmem_operand<Gmem>{&gmem};
}

}  // namespace tilepipe::pipeline_detail
