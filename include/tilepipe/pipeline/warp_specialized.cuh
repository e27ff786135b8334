// emit_pipeline_warp_specialized: one memory warpgroup moves the data, num_compute_wgs
// compute warpgroups run the body (Pallas' emit_pipeline_warp_specialized, and more).
//
//   auto pipe = tp::emit_pipeline_warp_specialized(body, tp::grid(k_steps),
//                   tp::in_specs(a_spec, b_spec), tp::out_specs(),
//                   tp::num_compute_wgs<2>, tp::memory_registers<40>, tp::max_concurrent_steps<4>);
//   pipe(k, a, b);                                        // scoped: allocates, runs, frees
//   auto alloc = pipe.get_allocations(k, a, b);           // or hoisted, for chains of pipelines:
//   pipe(k, alloc, tp::pipeline_state::start, a, b);      //   start, steady..., stop
//
// Barriers (all derived from the specs, never written by the user):
//   ready[i][slot]     memory -> compute: the block landed (1 arrival + the block's bytes)
//   consumed[i][slot]  compute -> memory: every compute warp is done with the block
//   full[o][slot]      compute -> memory: the output block is written
//   free[o][slot]      memory -> compute: its store has read the slot
// Every operand has its own slots and barriers, and moves to a new slot only when its block
// index changes (TPU semantics): a grid-invariant ("stationary") input is fetched once and
// released once, and an output block that stays the same accumulates.
//
// Schedule of the memory warpgroup (one thread issues):
//   prologue   fetch the first `slots` steps of every input, step by step
//   step s     for each input, fetch step s + slots - delay into its next slot, after
//              that slot's previous block was consumed (released after body(s) at the latest);
//              store every output block whose run ended at s (its `full` barrier completes
//              once the compute warpgroups finished body(s)); free the slots whose stores
//              have been read
//   stop       wait until every slot was consumed and every store read (pipeline_state::stop)
// Schedule of each compute warpgroup:
//   step s     wait `ready` of every new input block; wait `free` before starting an
//              output block in a reused slot; run the body; arrive `full` for output blocks
//              whose run ends; arrive `consumed` for input blocks last used at s - delay
//   end        with a delay, wait for the wgmma groups still in flight, release the rest
#pragma once

#include "../backend/primitives.cuh"
#include "../context.cuh"
#include "../core/block_spec.cuh"
#include "../core/register_budget.cuh"
#include "../core/grid.cuh"
#include "emit_pipeline.cuh"
#include "operands.cuh"

#include <cuda/std/tuple>

namespace tilepipe {

template <int N>
struct num_compute_wgs_t {
  static_assert(N >= 1 && N <= 3, "tilepipe: num_compute_wgs must be 1..3 (plus the memory warpgroup: at most 4)");
  static constexpr int value = N;
};
template <int N>
inline constexpr num_compute_wgs_t<N> num_compute_wgs{};

template <int R>
struct memory_registers_t {
  static constexpr int value = R;
};
/// Registers per thread the memory warpgroup keeps (setmaxnreg.dec); 40 is typical.
template <int R>
inline constexpr memory_registers_t<R> memory_registers{};

template <int I>
struct memory_thread_idx_t {
  static constexpr int value = I;
};
/// Which warpgroup moves the data (default: the last).
template <int I>
inline constexpr memory_thread_idx_t<I> memory_thread_idx{};

struct manual_consumed_barriers_t {};
/// The body receives one consumed token per input and releases blocks itself.
inline constexpr manual_consumed_barriers_t manual_consumed_barriers{};

template <class F>
struct compute_context_t {
  F fn;
};
/// fn(pipeline) runs only on the compute warpgroups and must call pipeline(init_carry)
/// exactly once; it owns the carry (accumulators) and the epilogue.
template <class F>
TP_HD compute_context_t<F> compute_context(F fn) {
  return {fn};
}

/// Where a pipeline stands in a chain of pipelines sharing one allocation: the first is
/// `start` (or `only`, a chain of one), the last `stop`, any others `steady`.
enum class pipeline_state { start, steady, stop, only };

/// Which side of a warp-specialised pipeline a call runs (see warp_specialized_for).
struct memory_role_t {};
struct compute_role_t {};

/// The register split of a warp-specialised CTA, checked at compile time: the compute
/// warpgroups get what Pallas gives them (compute_registers), the per-warpgroup counts
/// must add up (register_budget), and they must agree with the launch bounds
/// (threads, 1): setmaxnreg.dec cannot raise a count and setmaxnreg.inc cannot lower one.
template <int NumCompute, int MemoryRegs>
struct register_split {
  static constexpr int warpgroups = NumCompute + 1;
  static constexpr int launch_cap = (sm_registers / (warpgroup_size * warpgroups)) / 8 * 8;
  static constexpr int compute = compute_registers(MemoryRegs, NumCompute);
  static constexpr int memory = MemoryRegs;
  using budget = std::conditional_t<NumCompute == 1, register_budget<MemoryRegs, compute>,
                                    std::conditional_t<NumCompute == 2, register_budget<MemoryRegs, compute, compute>,
                                                       register_budget<MemoryRegs, compute, compute, compute>>>;
  static_assert(budget::ok);
  static_assert(MemoryRegs <= launch_cap,
                "tilepipe: memory_registers exceeds the registers the launch gives each thread; setmaxnreg.dec "
                "cannot raise the count");
  static_assert(compute >= launch_cap,
                "tilepipe: the compute warpgroups would get fewer registers than the launch gives them; lower "
                "memory_registers");
};

namespace pipeline_detail {

/// Per-slot barrier ring: one bit of phase parity per slot, one bit of "used before".
struct slot_bits {
  std::uint32_t parity = 0;
  std::uint32_t used = 0;
  TP_HD bool flip(int s) {  // returns the parity to wait for, then advances it
    const bool p = (parity >> s) & 1u;
    parity ^= 1u << s;
    return p;
  }
  TP_HD bool mark_used(int s) {  // returns whether the slot was used before
    const bool u = (used >> s) & 1u;
    used |= 1u << s;
    return u;
  }
};

/// The two barrier rings of an operand, `slots` barriers each, in one allocation that every
/// warpgroup makes; the leader then initialises them with their counts and names.
struct barrier_rings {
  std::uint64_t* first;
  std::uint64_t* second;
  int slots;

  TP_HD static barrier_rings allocate(kernel_context& k, int slots, const char* what) {
    auto* bars = reinterpret_cast<std::uint64_t*>(k.allocate(16 * slots, what));
    return {bars, bars + slots, slots};
  }
  TP_HD void init(int operand, std::uint32_t count0, const char* name0, std::uint32_t count1, const char* name1) const {
    for (int s = 0; s < slots; ++s) {
      prim::mbarrier_init(first + s, count0);
      prim::mbarrier_init(second + s, count1);
      prim::mbarrier_name(first + s, name0, operand, s);
      prim::mbarrier_name(second + s, name1, operand, s);
    }
  }
};

/// State of one input across a chain of pipelines (lives in every warpgroup).
template <class Spec, class Gmem, class Grid, int MCS, int DefaultDelay, int NumCompute, bool Manual>
struct ws_input {
  using T = typename Gmem::value_type;
  using tile = typename Spec::tile_type;
  using layout = tile_layout<tile, static_cast<int>(sizeof(T))>;
  using view_type = smem_ref<T, layout>;
  using plan = slot_plan<Spec, Grid, MCS, DefaultDelay>;
  using block_index = decltype(apply_index_map(std::declval<typename Spec::map_type>(), index<Grid::rank>{}));
  static constexpr int slots = plan::slots;
  static constexpr int delay = Manual ? 0 : plan::delay;
  // A multicast block is written into every CTA of the cluster by every CTA's memory
  // warpgroup, so its slot is free only when the compute warps of all CTAs released it.
  static constexpr int cluster = Spec::multicast;
  static constexpr int arrivals = 4 * NumCompute * cluster;  // one per compute warp of the cluster
  static constexpr std::uint32_t slot_bytes = round_up(layout::bytes, static_cast<std::uint32_t>(smem_alignment));
  static_assert(Gmem::template has_tile<tile>,
                "tilepipe: the gmem_ref passed for this spec has no tensor map for the spec's tile");
  static_assert(block_index::rank == Gmem::rank,
                "tilepipe: the index map returns a different number of indices than the operand has dimensions");
  static_assert(!(Manual && Spec::delay > 0),
                "tilepipe: with manual_consumed_barriers the body releases blocks itself; drop delay_release");
  static_assert(cluster == 1 || tma_plan<tile, static_cast<int>(sizeof(T))>::boxes % cluster == 0,
                "tilepipe: the CTAs of a cluster share a multicast<c> block box by box, so it must consist of a "
                "multiple of c TMA boxes (column panels x row boxes): give its tile tp::box_rows<rows / c>");
  static_assert(cluster == 1 || !Manual, "tilepipe: multicast specs release their slots automatically; drop "
                                         "manual_consumed_barriers");

  unsigned char* smem = nullptr;
  std::uint64_t* ready = nullptr;
  std::uint64_t* consumed = nullptr;
  prim::smem_barrier ready_at, consumed_at;  // the same barriers, for the compute loop
  // compute side
  int slot = -1;
  slot_bits ready_bits;
  block_index last{};
  // The slots of the last delay + 1 steps, oldest first, and whether each step was its
  // block's last: shifted every step so that all indices are compile-time constants.
  int hist_slot[delay + 1] = {};
  bool hist_last[delay + 1] = {};
  // memory side
  int fill_slot = -1;
  slot_bits consumed_bits;
  block_index fill_last{};
  index<Grid::rank> fill_at{};
  long long fill_step = 0;
  int operand = 0;  // position among the pipeline's inputs, for reports
  failure_channel failure{};

  TP_HD unsigned char* slot_ptr(int s) const { return smem + s * slot_bytes; }

  TP_HD void allocate(kernel_context& k, bool leader, int position) {
    operand = position;
    if constexpr (debug_checks) failure = k.failure();  // read only by the debug checks
    smem = k.allocate(slots * slot_bytes, "warp-specialised input slots");
    for (int s = 0; s < slots; ++s) prim::name_smem(slot_ptr(s), layout::bytes, "warp-specialised input", position, s);
    const auto rings = barrier_rings::allocate(k, slots, "warp-specialised input barriers");
    ready = rings.first;
    consumed = rings.second;
    ready_at = prim::barrier_at(ready);
    consumed_at = prim::barrier_at(consumed);
    if (leader) rings.init(position, 1, "ready", arrivals, Manual ? "consumed (manual)" : "consumed");
  }

  // ---- memory warpgroup ----

  /// Fetches the block of the next step in order, if it changed; waits until the slot it
  /// goes to was released by the compute warpgroups.
  TP_HD void produce(const Spec& spec, const Gmem& g, const Grid& grid, bool first_of_call) {
    const block_index b = apply_index_map(spec.index_map, fill_at);
    if (first_of_call || !(b == fill_last)) {
      fill_last = b;
      fill_slot = next_slot(fill_slot, slots);
      if (consumed_bits.mark_used(fill_slot)) prim::mbarrier_wait(consumed + fill_slot, consumed_bits.flip(fill_slot));
      if (prim::leader()) {
        prim::mbarrier_arrive_expect_tx(ready + fill_slot, layout::bytes);  // the whole block lands here
        const block_site site{"input", operand, fill_step, failure};
        if constexpr (cluster > 1)
          issue_block_load_multicast<tile>(g, b, slot_ptr(fill_slot), ready + fill_slot, prim::cluster_rank(), cluster,
                                           site);
        else issue_block_load<tile>(g, b, slot_ptr(fill_slot), ready + fill_slot, site);
      }
    }
    grid.increment(fill_at);
    ++fill_step;
  }

  /// At the end of a chain: waits until every slot this warpgroup filled was released.
  TP_HD void drain() {
    for (int s = 0; s < slots; ++s)
      if ((consumed_bits.used >> s) & 1u) {
        prim::mbarrier_wait(consumed + s, consumed_bits.flip(s));
        consumed_bits.used &= ~(1u << s);
      }
  }

  // ---- compute warpgroups ----

  /// Before the body of step s: waits for the block if it is new.
  TP_HD view_type consume(const Spec& spec, const index<Grid::rank>& at, bool first_of_call, long long s) {
    const block_index b = apply_index_map(spec.index_map, at);
    if (first_of_call || !(b == last)) {
      last = b;
      slot = next_slot(slot, slots);
      prim::mbarrier_wait(ready_at + slot, ready_bits.flip(slot));
    }
    (void)s;
    return {reinterpret_cast<T*>(slot_ptr(slot)), 0};
  }

  /// After the body of step s: records whether s was the block's last step, and releases
  /// the block of step s - delay if that was its last step.
  TP_HD void release_after(const Spec& spec, const index<Grid::rank>& next, bool last_step, long long s) {
#pragma unroll
    for (int h = 0; h < delay; ++h) hist_slot[h] = hist_slot[h + 1], hist_last[h] = hist_last[h + 1];
    hist_slot[delay] = slot;
    hist_last[delay] = last_step || !(apply_index_map(spec.index_map, next) == last);
    if constexpr (!Manual)
      if (s >= delay && hist_last[0]) release(hist_slot[0]);
  }

  /// The compute warps are done with slot s: in every CTA of the cluster for a multicast block.
  TP_HD void release(int s) const {
    if constexpr (cluster > 1) prim::mbarrier_arrive_per_warp_cluster(consumed_at + s, cluster);
    else prim::mbarrier_arrive_per_warp(consumed_at + s);
  }

  /// After the last step: releases the blocks of the last `delay` steps.
  TP_HD void release_tail(long long steps) {
    if constexpr (!Manual)
#pragma unroll
      for (int h = 1; h <= delay; ++h)
        if (steps - (delay + 1 - h) >= 0 && hist_last[h]) release(hist_slot[h]);
  }
};

/// What the body gets per input with manual_consumed_barriers: arrive() once per step from
/// every compute warpgroup, when done with the block. It releases the slot on the block's
/// last step and is a no-op on the others (the block stays for the next step).
struct consumed_token {
  std::uint64_t* bar = nullptr;
  bool releases = false;
  TP_HD void arrive() const {
    if (releases) prim::mbarrier_arrive_per_warp(bar);
  }
};

/// State of one SMEM output across a chain of pipelines.
template <class Spec, class Gmem, class Grid, int MCS, int NumCompute>
struct ws_output {
  using T = typename Gmem::value_type;
  using tile = typename Spec::tile_type;
  using layout = tile_layout<tile, static_cast<int>(sizeof(T))>;
  using view_type = smem_ref<T, layout>;
  using plan = slot_plan<Spec, Grid, MCS, 0, false>;
  using block_index = decltype(apply_index_map(std::declval<typename Spec::map_type>(), index<Grid::rank>{}));
  static constexpr int slots = plan::slots;
  static constexpr int arrivals = 4 * NumCompute;
  static constexpr std::uint32_t slot_bytes = round_up(layout::bytes, static_cast<std::uint32_t>(smem_alignment));
  static_assert(Gmem::template has_tile<tile>,
                "tilepipe: the gmem_ref passed for this spec has no tensor map for the spec's tile");

  unsigned char* smem = nullptr;
  std::uint64_t* full = nullptr;
  std::uint64_t* free_ = nullptr;
  // compute side
  int slot = -1;
  slot_bits free_bits;
  block_index last{};
  // memory side
  int store_slot = -1;
  slot_bits full_bits;
  block_index store_last{};
  int pending = -1;  // slot of the last committed store not yet freed
  int operand = 0;   // position among the pipeline's outputs, for reports
  failure_channel failure{};

  TP_HD unsigned char* slot_ptr(int s) const { return smem + s * slot_bytes; }

  TP_HD void allocate(kernel_context& k, bool leader, int position, int barrier_operand) {
    operand = position;
    if constexpr (debug_checks) failure = k.failure();  // read only by the debug checks
    smem = k.allocate(slots * slot_bytes, "warp-specialised output slots");
    for (int s = 0; s < slots; ++s) prim::name_smem(slot_ptr(s), layout::bytes, "warp-specialised output", position, s);
    const auto rings = barrier_rings::allocate(k, slots, "warp-specialised output barriers");
    full = rings.first;
    free_ = rings.second;
    if (leader) {
      rings.init(barrier_operand, arrivals, "output full", 1, "output free");
      for (int s = 0; s < slots; ++s) prim::poison(slot_ptr(s), layout::bytes);  // no block written yet
    }
  }

  // ---- compute warpgroups ----

  TP_HD view_type begin(const Spec& spec, const index<Grid::rank>& at, bool first_of_call) {
    const block_index b = apply_index_map(spec.index_map, at);
    if (first_of_call || !(b == last)) {
      last = b;
      slot = next_slot(slot, slots);
      if (free_bits.mark_used(slot)) prim::mbarrier_wait(free_ + slot, free_bits.flip(slot));
      prim::note_block(slot_ptr(slot), b.v);
    }
    return {reinterpret_cast<T*>(slot_ptr(slot)), 0};
  }

  TP_HD void end(const Spec& spec, const index<Grid::rank>& next, bool last_step) {
    if (last_step || !(apply_index_map(spec.index_map, next) == last)) {
      prim::fence_proxy_async();  // the body's SMEM writes, before the TMA store reads them
      prim::mbarrier_arrive_per_warp(full + slot);
    }
  }

  // ---- memory warpgroup ----

  /// If the block's run ends at the step `at` (next is the following step), waits until it
  /// is written and stores it; returns whether it stored.
  TP_HD bool store_if_ended(const Spec& spec, const Gmem& g, const Grid& grid, const index<Grid::rank>& at,
                            const index<Grid::rank>& next, long long s, bool last_step, bool first_of_call) {
    const block_index b = apply_index_map(spec.index_map, at);
    if (first_of_call || !(b == store_last)) {
      check_output_run(failure, spec.index_map, grid, b, s, operand);
      store_last = b;
      store_slot = next_slot(store_slot, slots);
    }
    if (!(last_step || !(apply_index_map(spec.index_map, next) == b))) return false;
    prim::mbarrier_wait(full + store_slot, full_bits.flip(store_slot));
    if (prim::leader()) issue_block_store<tile>(g, b, slot_ptr(store_slot), {"output", operand, s, failure});
    return true;
  }

  /// After the stores of a step were committed: frees the slot of the previous store once
  /// it has been read (with one slot, the new store's own slot).
  template <int Lag>
  TP_HD void free_stored(bool stored_now) {
    if (!stored_now) return;
    if (Lag == 0 || pending >= 0) {
      if (prim::leader()) prim::bulk_wait_read<Lag>();
      const int s = Lag == 0 ? store_slot : pending;
      if (prim::leader()) {
        prim::poison(slot_ptr(s), layout::bytes);
        prim::mbarrier_arrive(free_ + s);
      }
    }
    pending = Lag == 0 ? -1 : store_slot;
  }

  TP_HD void drain() {
    if (pending < 0) return;
    if (prim::leader()) {
      prim::bulk_wait_read<0>();
      prim::mbarrier_arrive(free_ + pending);
    }
    pending = -1;
  }
};

template <class Spec, class Gmem, class Grid, int MCS, int Delay, int NC, bool Manual>
using ws_input_for = ws_input<Spec, Gmem, Grid, MCS, Delay, NC, Manual>;

template <int NC, int MemRegs, int MemIdx, int MCS, int Delay, bool Manual, class Ctx, class Body, class Grid, class Ins,
          class Outs>
class ws_pipeline;

template <int NC, int MemRegs, int MemIdx, int MCS, int Delay, bool Manual, class Ctx, class Body, class Grid,
          class... Ins, class... Outs>
class ws_pipeline<NC, MemRegs, MemIdx, MCS, Delay, Manual, Ctx, Body, Grid, cuda::std::tuple<Ins...>,
                  cuda::std::tuple<Outs...>> {
  using regs = register_split<NC, MemRegs>;
  static_assert(MemIdx >= 0 && MemIdx <= NC,
                "tilepipe: memory_thread_idx is out of range: the CTA has num_compute_wgs + 1 warpgroups");
  static_assert((Ins::in_smem && ...) && (Outs::in_smem && ...),
                "tilepipe: the warp-specialised pipeline moves every operand through SMEM (no gmem_spec)");
  static constexpr bool has_context = !std::is_same_v<Ctx, no_carry>;
  static constexpr int cluster = detail::largest({1, Ins::multicast...});
  static_assert(((Ins::multicast == 1 || Ins::multicast == cluster) && ...),
                "tilepipe: all multicast specs of a pipeline name the same cluster size");

 public:
  TP_HD ws_pipeline(Body body, Grid grid, cuda::std::tuple<Ins...> ins, cuda::std::tuple<Outs...> outs, Ctx ctx)
      : body_(body), grid_(grid), ins_(ins), outs_(outs), ctx_(ctx) {}

  /// The SMEM and barriers of the pipeline, allocated and initialised once by all
  /// warpgroups together, for pipelines chained with pipeline_state (Pallas' get_allocations).
  template <class... G>
  TP_HD auto get_allocations(kernel_context& k, const G&... gmem) const {
    static_assert(sizeof...(G) == sizeof...(Ins) + sizeof...(Outs),
                  "tilepipe: pass one GMEM ref per in_spec and per out_spec, inputs first");
    TP_REQUIRE(k.num_threads() == NC + 1,
               "the warp-specialised pipeline needs num_compute_wgs + 1 = %d warpgroups, the kernel has %d", NC + 1,
               k.num_threads());
    auto a = make_allocations(cuda::std::tie(gmem...), cuda::std::index_sequence_for<Ins...>{},
                              cuda::std::index_sequence_for<Outs...>{});
    const bool leader = k.cta_leader();
    for_each(a.ins, [&](auto& op, int i) { op.allocate(k, leader, i); });
    for_each(a.outs, [&](auto& op, int j) { op.allocate(k, leader, j, static_cast<int>(sizeof...(Ins)) + j); });
    if (leader) prim::fence_barrier_init();
    if constexpr (cluster > 1) {
      TP_REQUIRE(prim::cluster_size() == cluster,
                 "the pipeline has multicast<%d> specs but the launch's clusters have %d CTAs (launch option cluster)",
                 cluster, prim::cluster_size());
      prim::cluster_sync();  // the peers' multicasts may reach this CTA's barriers from now on
    } else {
      k.sync_threads();
    }
    return a;
  }

  /// Runs the pipeline alone: allocates, moves registers to the compute warpgroups, runs,
  /// waits for everything, gives the registers back, frees.
  template <class... G>
  TP_HD void operator()(kernel_context& k, const G&... gmem) const {
    const std::uint32_t mark = k.smem_mark();
    auto a = get_allocations(k, gmem...);
    const auto refs = cuda::std::tie(gmem...);
    if (k.thread_index() == MemIdx) {
      prim::setmaxnreg_dec<regs::memory>();
      memory_role(a, refs, true);
      prim::setmaxnreg_inc<regs::launch_cap>();
    } else {
      prim::setmaxnreg_inc<regs::compute>();
      compute_role(a, refs);
      prim::setmaxnreg_dec<regs::launch_cap>();
    }
    k.sync_threads();
    k.smem_release(mark);
  }

  /// Runs one pipeline of a chain on hoisted allocations: start, steady..., stop. Between
  /// pipelines of a chain nobody waits for anybody: the memory warpgroup fetches the next
  /// pipeline's blocks while the compute warpgroups finish the previous one. Registers stay
  /// as they are; tp::warp_specialized_for moves them for a whole loop of pipelines.
  template <class Alloc, class... G>
    requires(!std::is_base_of_v<kernel_context, std::remove_cvref_t<Alloc>> && sizeof...(G) > 0)
  TP_HD void operator()(kernel_context& k, Alloc& alloc, pipeline_state state, const G&... gmem) const {
    const auto refs = cuda::std::tie(gmem...);
    if (k.thread_index() == MemIdx) memory_role(alloc, refs, stops(state));
    else compute_role(alloc, refs);
  }

  /// The same, for one side only: inside tp::warp_specialized_for the memory and compute
  /// warpgroups each run their own loop, so each branch holds one role's code.
  template <class Alloc, class Role, class... G>
    requires(std::is_same_v<Role, memory_role_t> || std::is_same_v<Role, compute_role_t>)
  TP_HD void operator()(kernel_context&, Alloc& alloc, pipeline_state state, Role, const G&... gmem) const {
    const auto refs = cuda::std::tie(gmem...);
    if constexpr (std::is_same_v<Role, memory_role_t>) memory_role(alloc, refs, stops(state));
    else compute_role(alloc, refs);
  }

 private:
  template <class InTuple, class OutTuple>
  struct allocations {
    using in_tuple = InTuple;
    InTuple ins;
    OutTuple outs;
  };

  template <class Refs, std::size_t... I, std::size_t... J>
  TP_HD auto make_allocations(const Refs&, cuda::std::index_sequence<I...>, cuda::std::index_sequence<J...>) const {
    constexpr std::size_t n = sizeof...(Ins);
    using in_t = cuda::std::tuple<
        ws_input_for<Ins, std::remove_cvref_t<cuda::std::tuple_element_t<I, Refs>>, Grid, MCS, Delay, NC, Manual>...>;
    using out_t = cuda::std::tuple<
        ws_output<Outs, std::remove_cvref_t<cuda::std::tuple_element_t<n + J, Refs>>, Grid, MCS, NC>...>;
    return allocations<in_t, out_t>{};
  }

  static TP_HD bool stops(pipeline_state s) { return s == pipeline_state::stop || s == pipeline_state::only; }

  // ---- the memory warpgroup --------------------------------------------------------------

  /// Only the first warp fetches and stores: the memory side's work is waits and
  /// single-thread issues, and three more warps polling the same barriers would only take
  /// issue slots from the compute warps that share their SM sub-partitions. The other three
  /// sleep on the warpgroup's barrier until the first is done, so that all four leave
  /// together (setmaxnreg, after the pipeline, is a warpgroup instruction; compute-sanitizer
  /// hung when three warps reached it long before the fourth).
  template <class Alloc, class Refs>
  TP_HD void memory_role(Alloc& a, const Refs& refs, bool stop) const {
    if (prim::leader_warp()) memory_steps(a, refs, stop);
    prim::warpgroup_sync();
  }

  template <class Alloc, class Refs>
  TP_HD void memory_steps(Alloc& a, const Refs& refs, bool stop) const {
    const long long steps = grid_.steps();
    // Prologue: the first `slots` steps of every input, step by step (every input's block of
    // step 0, then of step 1, ...). Each call starts its own sequence of blocks; slot rotation
    // and barrier phases carry over from the previous call, so in a chain each fetch waits
    // for the previous pipeline to release a slot, which it does in step order: input by
    // input, the last input's first block would wait for the previous pipeline's last step.
    for_each_input(a, refs, [](auto& op, const auto&, const auto&) { op.fill_at = {}, op.fill_step = 0; });
    for (long long t = 0; t < input_maxima<typename Alloc::in_tuple>::slots && t < steps; ++t)
      for_each_input(a, refs, [&](auto& op, const auto& spec, const auto& g) {
        if (t < op.slots) op.produce(spec, g, grid_, t == 0);
      });
    index<Grid::rank> at{};
    for (long long s = 0; s < steps; ++s) {
      // Refill: step s + slots - delay into the slot the compute side frees after body(s).
      for_each_input(a, refs, [&](auto& op, const auto& spec, const auto& g) {
        if (s >= op.delay && s + op.slots - op.delay < steps) op.produce(spec, g, grid_, false);
      });
      // Stores of the output blocks whose run ends at s, one bulk group.
      const bool last_step = s + 1 == steps;
      index<Grid::rank> next = at;
      if (!last_step) grid_.increment(next);
      bool stored[sizeof...(Outs) + 1] = {};
      bool any = false;
      for_each_output(a, refs, [&](auto& op, const auto& spec, const auto& g, int j) {
        any |= stored[j] = op.store_if_ended(spec, g, grid_, at, next, s, last_step, s == 0);
      });
      if (any) {
        if (prim::leader()) prim::bulk_commit();
        for_each_output(a, refs, [&](auto& op, const auto&, const auto&, int j) {
          op.template free_stored<store_lag>(stored[j]);
        });
      }
      at = next;
    }
    if (stop) {
      for_each(a.ins, [](auto& op, int) { op.drain(); });
      for_each(a.outs, [](auto& op, int) { op.drain(); });
      if (prim::leader()) prim::bulk_wait<0>();
    }
  }

  // ---- the compute warpgroups ------------------------------------------------------------

  template <class Alloc, class Refs>
  TP_HD void compute_role(Alloc& a, const Refs& refs) const {
    if constexpr (has_context) {
      int calls = 0;
      // pipeline(init) runs with a carry and returns the final one; pipeline() runs without.
      auto pipeline = [&](auto... init) {
        static_assert(sizeof...(init) <= 1, "tilepipe: the pipeline takes at most one initial carry");
        TP_REQUIRE(++calls == 1, "compute_context must call the pipeline exactly once; it called it %d times", calls);
        if constexpr (sizeof...(init) == 1) return compute_loop(a, refs, init...);
        else compute_loop(a, refs, no_carry{});
      };
      ctx_.fn(pipeline);
      TP_REQUIRE(calls == 1, "compute_context must call the pipeline exactly once; it called it %d times", calls);
    } else {
      compute_loop(a, refs, no_carry{});
    }
  }

  template <class Alloc, class Refs, class C>
  TP_HD C compute_loop(Alloc& a, const Refs& refs, C carry) const {
    const long long steps = grid_.steps();
    const long long outer_step = prim::annotate_step(-1);  // for the interpreter's reports
    index<Grid::rank> at{};
    for (long long s = 0; s < steps; ++s) {
      prim::annotate_step(s);
      const bool last_step = s + 1 == steps;
      index<Grid::rank> next = at;
      if (!last_step) grid_.increment(next);
      carry = step(a, refs, at, next, s, last_step, carry, cuda::std::index_sequence_for<Ins...>{},
                   cuda::std::index_sequence_for<Outs...>{});
      at = next;
    }
    constexpr int max_delay = input_maxima<typename Alloc::in_tuple>::delay;
    if constexpr (max_delay > 0) prim::wgmma_wait<0>();
    for_each(a.ins, [&](auto& op, int) { op.release_tail(steps); });
    prim::annotate_step(outer_step);
    return carry;
  }

  template <class Alloc, class Refs, class C, std::size_t... I, std::size_t... J>
  TP_HD C step(Alloc& a, const Refs& refs, const index<Grid::rank>& at, const index<Grid::rank>& next, long long s,
               bool last_step, C carry, cuda::std::index_sequence<I...>, cuda::std::index_sequence<J...>) const {
    constexpr std::size_t n = sizeof...(Ins);
    (void)refs;
    const bool first = s == 0;
    auto in_views = cuda::std::make_tuple(cuda::std::get<I>(a.ins).consume(cuda::std::get<I>(ins_), at, first, s)...);
    auto out_views = cuda::std::make_tuple(cuda::std::get<J>(a.outs).begin(cuda::std::get<J>(outs_), at, first)...);
    // Whether each input's block ends at s (for the manual tokens) is known before the body.
    auto tokens = cuda::std::make_tuple(consumed_token{
        cuda::std::get<I>(a.ins).consumed + cuda::std::get<I>(a.ins).slot,
        last_step || !(apply_index_map(cuda::std::get<I>(ins_).index_map, next) == cuda::std::get<I>(a.ins).last)}...);
    (void)tokens;
    C result = call_body(at, in_views, out_views, tokens, carry);
    (cuda::std::get<J>(a.outs).end(cuda::std::get<J>(outs_), next, last_step), ...);
    (cuda::std::get<I>(a.ins).release_after(cuda::std::get<I>(ins_), next, last_step, s), ...);
    (void)n;
    return result;
  }

  template <class InV, class OutV, class Tok, class C>
  TP_HD C call_body(const index<Grid::rank>& at, InV& ins, OutV& outs, Tok& tokens, C carry) const {
    return cuda::std::apply(
        [&](auto&... in) {
          return cuda::std::apply(
              [&](auto&... out) {
                return cuda::std::apply(
                    [&](auto&... tok) -> C {
                      constexpr bool has_carry = !std::is_same_v<C, no_carry>;
                      if constexpr (Manual && has_carry) return body_(at, in..., out..., tok..., carry);
                      else if constexpr (Manual) {
                        body_(at, in..., out..., tok...);
                        return carry;
                      } else if constexpr (has_carry) {
                        return body_(at, in..., out..., carry);
                      } else {
                        body_(at, in..., out...);
                        return carry;
                      }
                    },
                    tokens);
              },
              outs);
        },
        ins);
  }

  // With two or more slots per output the memory warpgroup keeps one store in flight while
  // it moves on; with one slot it must wait for the store before the slot is written again.
  static constexpr int min_out_slots = detail::smallest({2, slot_plan<Outs, Grid, MCS, 0, false>::slots...});
  static constexpr int store_lag = min_out_slots >= 2 ? 1 : 0;

  template <class Alloc, class Refs, class F>
  TP_HD void for_each_input(Alloc& a, const Refs& refs, F&& f) const {
    for_each_input_impl(a, refs, f, cuda::std::index_sequence_for<Ins...>{});
  }
  template <class Alloc, class Refs, class F, std::size_t... I>
  TP_HD void for_each_input_impl(Alloc& a, const Refs& refs, F& f, cuda::std::index_sequence<I...>) const {
    (f(cuda::std::get<I>(a.ins), cuda::std::get<I>(ins_), cuda::std::get<I>(refs)), ...);
  }
  template <class Alloc, class Refs, class F>
  TP_HD void for_each_output(Alloc& a, const Refs& refs, F&& f) const {
    for_each_output_impl(a, refs, f, cuda::std::index_sequence_for<Outs...>{});
  }
  template <class Alloc, class Refs, class F, std::size_t... J>
  TP_HD void for_each_output_impl(Alloc& a, const Refs& refs, F& f, cuda::std::index_sequence<J...>) const {
    constexpr std::size_t n = sizeof...(Ins);
    (f(cuda::std::get<J>(a.outs), cuda::std::get<J>(outs_), cuda::std::get<n + J>(refs), static_cast<int>(J)), ...);
  }

  Body body_;
  Grid grid_;
  cuda::std::tuple<Ins...> ins_;
  cuda::std::tuple<Outs...> outs_;
  Ctx ctx_;
};

template <class T>
inline constexpr int nc_of = 0;
template <int N>
inline constexpr int nc_of<num_compute_wgs_t<N>> = N;
template <class T>
inline constexpr int mem_regs_of = 0;
template <int R>
inline constexpr int mem_regs_of<memory_registers_t<R>> = R;
template <class T>
inline constexpr int mem_idx_of = -1;
template <int I>
inline constexpr int mem_idx_of<memory_thread_idx_t<I>> = I;

template <class... Opts>
inline constexpr int ws_option(std::initializer_list<long long> values, long long none) {
  return static_cast<int>(detail::first_set(values, none));
}

TP_HD inline no_carry pick_context() { return {}; }
template <class F, class... Rest>
TP_HD auto pick_context(compute_context_t<F> c, Rest...) {
  return c;
}
template <class First, class... Rest>
TP_HD auto pick_context(First, Rest... rest) {
  return pick_context(rest...);
}

}  // namespace pipeline_detail

/// Builds a warp-specialised pipeline; see the top of this file. Options:
/// tp::num_compute_wgs<n> and tp::memory_registers<r> (required), tp::memory_thread_idx<i>,
/// tp::max_concurrent_steps<n> (default 2), tp::delay_release<d>, tp::manual_consumed_barriers,
/// tp::compute_context(fn).
template <class Body, int... E, class... Ins, class... Outs, class... Opts>
TP_HD auto emit_pipeline_warp_specialized(Body body, grid_t<E...> grid, in_specs_t<Ins...> ins, out_specs_t<Outs...> outs,
                                          Opts... opts) {
  using namespace pipeline_detail;
  constexpr int nc = ws_option<Opts...>({nc_of<Opts>...}, 0);
  constexpr int mem_regs = ws_option<Opts...>({mem_regs_of<Opts>...}, 0);
  static_assert(nc > 0, "tilepipe: emit_pipeline_warp_specialized needs tp::num_compute_wgs<n>");
  static_assert(mem_regs > 0, "tilepipe: emit_pipeline_warp_specialized needs tp::memory_registers<r> (40 is typical)");
  constexpr int mem_idx = ws_option<Opts...>({mem_idx_of<Opts>...}, -1) >= 0 ? ws_option<Opts...>({mem_idx_of<Opts>...}, -1) : nc;
  constexpr int mcs = mcs_option<Opts...> ? mcs_option<Opts...> : 2;
  constexpr int delay = delay_option<Opts...> >= 0 ? delay_option<Opts...> : 0;
  constexpr bool manual = (std::is_same_v<Opts, manual_consumed_barriers_t> || ...);
  auto ctx = pick_context(opts...);
  constexpr bool fits = index_maps_fit<grid_t<E...>::rank>(static_cast<cuda::std::tuple<Ins...>*>(nullptr),
                                                           static_cast<cuda::std::tuple<Outs...>*>(nullptr));
  using result = std::conditional_t<fits,
                                    ws_pipeline<nc, mem_regs, mem_idx, mcs, delay, manual, decltype(ctx), Body, grid_t<E...>,
                                                cuda::std::tuple<Ins...>, cuda::std::tuple<Outs...>>,
                                    invalid_pipeline>;
  return result(body, grid, ins.specs, outs.specs, ctx);
}

/// Runs f(item, state, role) for item = first, first + stride, ... < end (a persistent loop
/// over tiles) with the warp-specialised register split: the memory warpgroup runs the
/// loop with memory_role_t, the compute warpgroups with compute_role_t, each after one
/// setmaxnreg, and the registers are given back afterwards. `state` is the position of the
/// item's pipeline in the chain (start, steady..., stop; only for a single item).
template <int NumCompute, int MemoryRegs, int MemoryIdx = NumCompute, class F>
TP_HD void warp_specialized_for(const kernel_context& k, int first, int end, int stride, F&& f) {
  using regs = register_split<NumCompute, MemoryRegs>;
  auto loop = [&](auto role) {
    for (int item = first; item < end; item += stride) {
      const bool is_first = item == first, is_last = item + stride >= end;
      const auto state = is_first && is_last ? pipeline_state::only
                         : is_first          ? pipeline_state::start
                         : is_last           ? pipeline_state::stop
                                             : pipeline_state::steady;
      f(item, state, role);
    }
  };
  if (k.thread_index() == MemoryIdx) {
    prim::setmaxnreg_dec<regs::memory>();
    loop(memory_role_t{});
    prim::setmaxnreg_inc<regs::launch_cap>();
  } else {
    prim::setmaxnreg_inc<regs::compute>();
    loop(compute_role_t{});
    prim::setmaxnreg_dec<regs::launch_cap>();
  }
}

/// The index of the calling warpgroup among the compute warpgroups (0 .. num_compute_wgs - 1).
TP_HD inline int compute_index(const kernel_context& k, int memory_thread_idx) {
  const int wg = k.thread_index();
  return wg < memory_thread_idx ? wg : wg - 1;
}

}  // namespace tilepipe
