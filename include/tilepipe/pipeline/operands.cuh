// The per-operand state of a pipeline (Pallas' BufferedRef): the SMEM slots of one
// operand, its ready barriers, and the cursors that decide which slot each step uses.
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

namespace tilepipe::pipeline_detail {

TP_HD constexpr std::uint32_t round_up(std::uint32_t x, std::uint32_t a) { return (x + a - 1) / a * a; }

/// The slot after s in a ring of n (a compare, not a signed modulo: it runs every step).
TP_HD constexpr int next_slot(int s, int n) { return s + 1 == n ? 0 : s + 1; }

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
  static constexpr int wanted = invariant ? 1 : (Spec::buffers ? Spec::buffers : MCS);
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

/// A pipelined operand in SMEM. Input operands also own one ready barrier per slot.
template <class Spec, class Gmem, class Grid, int MCS, int DefaultDelay, bool IsInput>
struct smem_operand {
  using T = typename Gmem::value_type;
  using tile = typename Spec::tile_type;
  using layout = tile_layout<tile, static_cast<int>(sizeof(T))>;
  using view_type = smem_ref<T, layout>;
  using plan = slot_plan<Spec, Grid, MCS, DefaultDelay, IsInput>;
  static_assert(Spec::multicast == 1, "tilepipe: multicast specs need emit_pipeline_warp_specialized");
  static constexpr int slots = plan::slots;
  static constexpr int delay = plan::delay;
  static constexpr std::uint32_t slot_bytes = round_up(layout::bytes, static_cast<std::uint32_t>(smem_alignment));
  static constexpr std::uint32_t smem_bytes = slots * slot_bytes;
  static constexpr std::uint32_t barrier_bytes = IsInput ? 8 * slots : 0;
  using block_index = decltype(apply_index_map(std::declval<typename Spec::map_type>(), index<Grid::rank>{}));

  static_assert(Gmem::template has_tile<tile>,
                "tilepipe: the gmem_ref passed for this spec has no tensor map for the spec's tile: list the tile "
                "in the kernel parameter's type, tp::gmem<T, R, tile...>");
  static_assert(block_index::rank == Gmem::rank,
                "tilepipe: the index map returns a different number of indices than the operand has dimensions");

  const Spec* spec;
  const Gmem* gmem;
  int operand = 0;  // position among the pipeline's inputs or outputs, for reports
  failure_channel failure{};
  unsigned char* smem = nullptr;
  std::uint64_t* bars = nullptr;
  prim::smem_barrier bars_at;  // the same barriers, for the per-step waits

  // Consumer cursor: the slot the current step reads, the ready-barrier parity of each
  // slot, the block index of the last step.
  int slot = -1;
  std::uint32_t parity = 0;
  block_index last{};
  // Producer cursor (inputs): the next step to fetch for, its grid index, the slot and
  // block index of the last fetch, and (for no_pipelining) the parity of each slot's
  // next fill.
  index<Grid::rank> fill_at{};
  long long fill_step = 0;
  int fill_slot = -1;
  block_index fill_last{};
  std::uint32_t fill_parity = 0;

  TP_HD unsigned char* slot_ptr(int s) const { return smem + s * slot_bytes; }
  TP_HD std::uint64_t* bar(int s) const { return bars + s; }
  TP_HD view_type view() const { return {reinterpret_cast<T*>(slot_ptr(slot)), 0}; }
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
        prim::mbarrier_name(bar(s), "pipeline ready", position, s);
      }
    }
  }
  TP_HD void inval_barriers() const {
    if constexpr (IsInput)
      for (int s = 0; s < slots; ++s) prim::mbarrier_inval(bar(s));
  }

  // ---- inputs ----

  /// All threads: before the body of step s at `at`, wait for its block if it is new.
  TP_HD void consume(const index<Grid::rank>& at, long long s) {
    const block_index b = block_at(at);
    if (slot >= 0 && b == last) return;
    last = b;
    slot = next_slot(slot, slots);
    prim::mbarrier_wait(bars_at + slot, (parity >> slot) & 1u, {slot, s});
    parity ^= 1u << slot;
  }

  /// leader: the fetch for the next step in order (fetches only a block that changed).
  /// With no_pipelining the leader waits for it at once (the consumers' wait for the same
  /// phase then returns immediately).
  TP_HD void produce(const Grid& grid) {
    const block_index b = block_at(fill_at);
    if (fill_slot < 0 || !(b == fill_last)) {
      fill_last = b;
      fill_slot = next_slot(fill_slot, slots);
      prim::mbarrier_arrive_expect_tx(bar(fill_slot), layout::bytes);
      issue_block_load<tile>(*gmem, b, slot_ptr(fill_slot), bar(fill_slot), {"input", operand, fill_step, failure});
      if (prim::no_pipelining()) prim::mbarrier_wait(bar(fill_slot), (fill_parity >> fill_slot) & 1u, {fill_slot, fill_step});
      fill_parity ^= 1u << fill_slot;
    }
    grid.increment(fill_at);
    ++fill_step;
  }

  /// Whether the body of step s is followed by the fetch for step s + slots - delay.
  TP_HD bool refills_after(long long s, long long steps) const { return s >= delay && s + slots - delay < steps; }

  // ---- outputs ----

  /// Before the body of step s: a step whose block differs from the last one starts a new
  /// run in the next slot; the leader first waits until that slot's last store has read it.
  TP_HD bool begin_run(const Grid& grid, const index<Grid::rank>& at, long long s, bool leader) {
    const block_index b = block_at(at);
    if (slot >= 0 && b == last) return false;
    last = b;
    slot = next_slot(slot, slots);
    if (leader) {
      check_output_run(failure, spec->index_map, grid, b, s, operand);
      prim::bulk_wait_read<slots - 1>();
      prim::poison(slot_ptr(slot), layout::bytes);
    }
    prim::note_block(slot_ptr(slot), b.v);
    return true;
  }

  /// After the body: the run ends at the last step or when the next block differs.
  TP_HD bool run_ends(const index<Grid::rank>& next, bool last_step) const { return last_step || !(block_at(next) == last); }

  /// leader: stores the current slot to the current block (after step s).
  TP_HD void store(long long s) const {
    issue_block_store<tile>(*gmem, last, slot_ptr(slot), {"output", operand, s, failure});
  }
};

/// An operand left in global memory: the body gets the GMEM ref; nothing is copied.
template <class Gmem>
struct gmem_operand {
  const Gmem* gmem;
  static constexpr int slots = 0;
  static constexpr int delay = 0;
  TP_HD const Gmem& view() const { return *gmem; }
  TP_HD void allocate(kernel_context&, int) {}
  TP_HD void init_barriers(int) const {}
  TP_HD void inval_barriers() const {}
  template <class I>
  TP_HD void consume(const I&, long long) {}
  template <class G>
  TP_HD void produce(const G&) {}
  TP_HD bool refills_after(long long, long long) const { return false; }
  template <class G, class I>
  TP_HD bool begin_run(const G&, const I&, long long, bool) {
    return false;
  }
  template <class I>
  TP_HD bool run_ends(const I&, bool) const {
    return false;
  }
  TP_HD void store(long long) const {}
};

template <class Spec, class Gmem, class Grid, int MCS, int DefaultDelay, bool IsInput>
TP_HD auto make_operand(const Spec& spec, const Gmem& gmem) {
  if constexpr (Spec::in_smem) return smem_operand<Spec, Gmem, Grid, MCS, DefaultDelay, IsInput>{&spec, &gmem};
  else return gmem_operand<Gmem>{&gmem};
}

}  // namespace tilepipe::pipeline_detail
