// What every pipelined operand of both pipelines shares (Pallas' BufferedRef): its slot
// plan (slots, release delay), the cursor that walks its ring of slots (slot + phase, and
// the block in the slot: the one test of whether a step's block is new), the wait for a
// new block, the types and checks derived from its spec and GMEM ref, and the check that
// an output's blocks come in runs.
//
// The operand protocol, the same in both pipelines (docs/design.md): an operand is
// allocated once and handed its spec and the call's GMEM ref at every call; inputs
// produce(spec, ref, grid, first_of_call) and consume(spec, at, first_of_call, s), outputs
// begin_run, run_ends / end_run and store.
//
// An operand moves to a new slot only when its block index changes between consecutive
// steps (TPU semantics; at every step for streamed inputs), so a consumer cursor and a
// producer cursor that visit the same steps agree on the slot of every block without
// talking to each other.
#pragma once

#include "../backend/primitives.cuh"
#include "../context.cuh"
#include "../core/block_spec.cuh"
#include "../core/grid.cuh"
#include "../core/refs.cuh"
#include "../core/tma_desc.cuh"
#include "../profile.cuh"
#include "tokens.cuh"

#include <cuda/std/tuple>

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

/// One side's cursor with the block in its slot, and the test both pipelines make at every
/// step: does the step start a new block (then the side moves to the next slot), and does
/// the block end after it? Known at compile time where the spec tells: a streamed input's
/// block is new at every step, a stationary input's only at a call's first step; otherwise
/// the step's block index is compared with the last. Outputs always compare (the stationary
/// shortcut changes their code: it waits for a GPU A/B).
template <class BlockIndex, bool Streamed, bool Stationary>
struct block_cursor : slot_cursor {
  BlockIndex last{};  // the block of the current slot

  /// Whether block b, of the side's next step, starts a new block; if so it becomes the last
  /// (the caller then advances to the next slot).
  TP_HD bool starts_block(const BlockIndex& b, bool first_of_call) {
    if (!Streamed && !first_of_call && (Stationary || b == last)) return false;
    last = b;
    return true;
  }
  /// The same for the step at `at`, whose block `map` gives: computed only where compared.
  template <class Map, int R>
  TP_HD bool starts_block(const Map& map, const index<R>& at, bool first_of_call) {
    if constexpr (Streamed) return true;
    else if constexpr (Stationary) return first_of_call;
    else return starts_block(apply_index_map(map, at), first_of_call);
  }
  /// Whether the current block's last step is the one before `next` (the call's last step
  /// ends every block). A caller that has just computed the current block passes it as
  /// `current`: nvcc cannot tell that `last` equals it, and compares the copy otherwise.
  template <class Map, int R>
  TP_HD bool block_ends(const Map& map, const index<R>& next, bool last_step) const {
    return block_ends(map, next, last_step, last);
  }
  template <class Map, int R>
  TP_HD static bool block_ends(const Map& map, const index<R>& next, bool last_step, const BlockIndex& current) {
    if constexpr (Streamed) return true;
    else if constexpr (Stationary) return last_step;
    else return last_step || !(apply_index_map(map, next) == current);
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
  TP_HD void begin(slot_cursor& reader, prim::smem_barrier bars, int operand, long long s, profile_recorder_ref profiler,
                   bool waiter = true) {
    const std::uint32_t p = reader.take_phase();
    if constexpr (Manual) {
      parity = p, waits = waiter;
      site = {reader.slot, s};
    } else if (waiter) {
      profiler.wait(profile_kind::wait_ready, operand, s, [&] { prim::mbarrier_wait(bars + reader.slot, p, {reader.slot, s}); });
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
  /// The cursor of each side of the operand.
  using cursor = block_cursor<block_index, streamed, IsInput && stationary>;

  static_assert(Gmem::template has_tile<tile>,
                "tilepipe: the gmem_ref passed for this spec has no tensor map for the spec's tile: list the tile "
                "in the kernel parameter's type, tp::gmem<T, R, tile...>");
  static_assert(block_index::rank == Gmem::rank,
                "tilepipe: the index map returns a different number of indices than the operand has dimensions");
  static_assert(IsInput || !Spec::manual_ready,
                "tilepipe: tp::manual_ready is an input's option: an output block has no ready barrier to wait for");
  static_assert(IsInput || !Spec::gathered,
                "tilepipe: tp::gathered_spec is an input's: an output block is stored as one block");
  static_assert(!Spec::gathered || tma_plan<tile, static_cast<int>(sizeof(T))>::rank < 2 ||
                    tile::block_type::kind_at(tma_plan<tile, static_cast<int>(sizeof(T))>::row_dim) == dim_kind::element,
                "tilepipe: a gathered block's rows are a tp::element dimension: box_source returns the row where "
                "each box starts, at any row");
  static_assert(IsInput || (!Spec::streamed_option && Spec::waited_by < 0),
                "tilepipe: tp::streamed and tp::waited_by are input options: an output block is kept while its "
                "index stays the same, and no warpgroup waits for it");
};

}  // namespace tilepipe::pipeline_detail
