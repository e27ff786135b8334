// The operands of emit_pipeline, where every warpgroup runs the schedule: an operand in SMEM
// (slots, and one ready barrier per slot of an input), or left in global memory (gmem_spec).
#pragma once

#include "../ops/copy.cuh"
#include "gmem_operand.cuh"
#include "slots.cuh"

namespace tilepipe::pipeline_detail {

/// A pipelined operand of emit_pipeline in SMEM. Inputs also own one ready barrier per slot.
template <class Spec, class Gmem, class Grid, int MCS, int DefaultDelay, bool IsInput>
struct smem_operand : operand_traits<Spec, Gmem, Grid, MCS, DefaultDelay, IsInput> {
  using traits = operand_traits<Spec, Gmem, Grid, MCS, DefaultDelay, IsInput>;
  using typename traits::T, typename traits::tile, typename traits::layout, typename traits::view_type,
      typename traits::block_index, typename traits::cursor;
  using traits::slots, traits::slot_bytes;
  static_assert(Spec::multicast == 1, "tilepipe: multicast specs need emit_pipeline_warp_specialized");
  static_assert(Spec::waited_by < 0, "tilepipe: tp::waited_by is an option of emit_pipeline_warp_specialized's inputs: "
                                     "in emit_pipeline every warpgroup waits for its blocks");
  static constexpr int delay = traits::plan::delay;
  static constexpr std::uint32_t smem_bytes = slots * slot_bytes;
  static constexpr std::uint32_t barrier_bytes = IsInput ? 8 * slots : 0;
  /// Shared memory it allocates: the slots, and the barriers of an input (each allocation aligned).
  static constexpr std::uint32_t allocation_bytes = smem_bytes + round_up(barrier_bytes, smem_alignment);

  int operand = 0;  // position among the pipeline's inputs or outputs, for reports
  failure_channel failure{};
  [[no_unique_address]] profile_recorder_ref profiler;  // the profiler's, of the warpgroup that allocated it
  unsigned char* smem = nullptr;
  std::uint64_t* bars = nullptr;
  prim::smem_barrier bars_at;  // the same barriers, for the per-step waits

  // Consumer: the slot the current step reads (its ready phases, its block), and the wait
  // for it.
  cursor reader;
  ready_wait<Spec::manual_ready> ready;
  // Producer (inputs): the next step to fetch for and its grid index, the slot of the last
  // fetch (for no_pipelining, the phase each slot's fill completes) and its block.
  index<Grid::rank> fill_at{};
  long long fill_step = 0;
  cursor filler;

  TP_HD unsigned char* slot_ptr(int s) const { return smem + s * slot_bytes; }
  TP_HD std::uint64_t* bar(int s) const { return bars + s; }
  TP_HD view_type view() const { return {reinterpret_cast<T*>(slot_ptr(reader.slot)), 0}; }
  /// What the body gets: the view, or (tp::manual_ready) the view and the wait for its block.
  TP_HD auto body_view() const { return ready.body_view(view(), bars_at, reader.slot); }

  /// Allocates the slots (and barriers) of operand `operand` (its position among the
  /// pipeline's inputs or outputs).
  TP_HD void allocate(kernel_context& k, int position) {
    operand = position;
    if constexpr (debug_checks) failure = k.failure();  // read only by the debug checks
    profiler = k.profiler();
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
  TP_HD void consume(const Spec& spec, const index<Grid::rank>& at, bool first_of_call, long long s) {
    if (reader.starts_block(spec.index_map, at, first_of_call)) {
      reader.advance(slots);
      ready.begin(reader, bars_at, operand, s, profiler);
    }
  }

  /// leader: the fetch for the next step in order (fetches only a block that changed).
  /// With no_pipelining the leader waits for it at once (the consumers' wait for the same
  /// phase then returns immediately).
  TP_HD void produce(const Spec& spec, const Gmem& g, const Grid& grid, bool first_of_call) {
    const block_index b = apply_index_map(spec.index_map, fill_at);
    if (filler.starts_block(b, first_of_call)) {
      filler.advance(slots);
      const int f = filler.slot;
      // A tp::manual_ready block the body never waited for may still be landing in the slot.
      if constexpr (Spec::manual_ready)
        if (filler.reused()) prim::mbarrier_wait(bar(f), filler.last_phase(f));
      prim::mbarrier_arrive_expect_tx(bar(f), layout::bytes);
      const block_site site{"input", operand, fill_step, failure};
      if constexpr (Spec::gathered) issue_gathered_load<tile>(g, b, spec.box_source, slot_ptr(f), bar(f), site);
      else issue_block_load<tile>(g, b, slot_ptr(f), bar(f), site);
      profiler.mark(profile_kind::fetch, profile_phase::instant, operand, fill_step);
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
  TP_HD bool begin_run(const Spec& spec, const index<Grid::rank>& at, bool first_of_call, const Grid& grid, long long s,
                       bool leader) {
    const block_index b = apply_index_map(spec.index_map, at);
    if (!reader.starts_block(b, first_of_call)) return false;
    reader.advance(slots);
    if (leader) {
      check_output_run(failure, spec.index_map, grid, b, s, operand);
      profiler.wait(profile_kind::wait_output, operand, s, [&] { prim::bulk_wait_read<slots - 1>(); });
      prim::poison(slot_ptr(reader.slot), layout::bytes);
    }
    prim::note_block(slot_ptr(reader.slot), b.v);
    return true;
  }

  /// After the body: the run ends at the last step or when the next block differs.
  TP_HD bool run_ends(const Spec& spec, const index<Grid::rank>& next, bool last_step) const {
    return reader.block_ends(spec.index_map, next, last_step);
  }

  /// leader: stores the current slot to the current block (after step s).
  TP_HD void store(const Gmem& g, long long s) const {
    issue_block_store<tile>(g, reader.last, slot_ptr(reader.slot), {"output", operand, s, failure});
    profiler.mark(profile_kind::store, profile_phase::instant, operand, s);
  }
};

/// The operand of emit_pipeline that a spec makes: SMEM slots, or (gmem_spec) nothing.
template <class Spec, class Gmem, class Grid, int MCS, int DefaultDelay, bool IsInput>
using operand_for =
    std::conditional_t<Spec::in_smem, smem_operand<Spec, Gmem, Grid, MCS, DefaultDelay, IsInput>, gmem_operand>;

}  // namespace tilepipe::pipeline_detail
