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
// Barriers (all derived from the specs, never written by the user), a full and an empty
// ring per operand (pipeline/ws_operands.cuh; their names in the interpreter's reports):
//   input  full ("ready")      memory -> compute: the block landed (1 arrival + its bytes)
//          empty ("consumed")  compute -> memory: every compute warp is done with the block
//   output full                compute -> memory: the output block is written
//          empty ("free")      memory -> compute: its store has read the slot
// An operand with tp::gmem_spec stays in global memory: no slots, no barriers, the body gets
// the call's GMEM ref (for its own copies, direct stores, scalar reads).
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
//   With no_pipelining every fetch is waited for right after it is issued and every store
//   group right after it is committed (the compute side is unchanged).
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
#include "ws_operands.cuh"

#include <cuda/std/tuple>

namespace tilepipe {

struct num_compute_wgs_tag;
template <int N>
struct num_compute_wgs_t : option<num_compute_wgs_tag, N> {
  static_assert(N >= 1 && N <= 3, "tilepipe: num_compute_wgs must be 1..3 (plus the memory warpgroup: at most 4)");
};
template <int N>
inline constexpr num_compute_wgs_t<N> num_compute_wgs{};

struct memory_registers_tag;
/// Registers per thread the memory warpgroup keeps (setmaxnreg.dec); 40 is typical.
template <int R>
inline constexpr option<memory_registers_tag, R> memory_registers{};

namespace pipeline_detail {
/// The index among the compute warpgroups of warpgroup wg, when the memory warpgroup is
/// warpgroup MemoryIdx (any value for the memory warpgroup itself).
template <int MemoryIdx>
TP_HD constexpr int compute_index_of(int wg) {
  return wg < MemoryIdx ? wg : wg - 1;
}

/// A warp-specialised CTA's two roles under the register split Regs: the memory warpgroup
/// runs `memory` on Regs::memory registers per thread, the compute warpgroups run
/// `compute` (this one is compute warpgroup `compute_index`) on Regs::compute; all end on
/// the launch's count. The registers go back through a named barrier of their own: the
/// compute warpgroups arrive after their setmaxnreg.dec, and the memory warpgroup waits for
/// them before its setmaxnreg.inc. There is one pool per CTA, so if the memory warpgroup
/// took its registers back earlier (a CTA with no work does), the compute warpgroups'
/// increase could wait forever (seen on the GPU). One side arrives and the other syncs:
/// compute-sanitizer's synccheck reports a whole-CTA bar.sync reached from two
/// instructions as divergence.
template <class Regs, class Memory, class Compute>
TP_HD TP_FORCEINLINE void run_register_split(const kernel_context& k, bool is_memory, int compute_index,
                                             Memory&& memory, Compute&& compute) {
  if (is_memory) {
    prim::setmaxnreg_dec<Regs::memory>();
    k.profiler().set_role(profile_role::memory);
    memory();
    prim::named_barrier_sync(prim::register_handoff_barrier_id, warpgroup_size * k.num_threads());
    prim::setmaxnreg_inc<Regs::launch_cap>();
  } else {
    prim::setmaxnreg_inc<Regs::compute>();
    k.profiler().set_role(profile_role::compute, compute_index);
    compute();
    prim::setmaxnreg_dec<Regs::launch_cap>();
    prim::named_barrier_arrive(prim::register_handoff_barrier_id, warpgroup_size * k.num_threads());
  }
}
}  // namespace pipeline_detail

struct memory_thread_idx_tag;
/// Which warpgroup moves the data (default: the last).
template <int I>
inline constexpr option<memory_thread_idx_tag, I> memory_thread_idx{};

struct manual_consumed_barriers_tag;
/// The body receives one consumed token per input and releases blocks itself.
inline constexpr option<manual_consumed_barriers_tag, true> manual_consumed_barriers{};

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

template <int NC, int MemRegs, int MemIdx, int MCS, int Delay, bool Manual, class Ctx, class Body, class Grid, class Ins,
          class Outs>
class ws_pipeline;

template <int NC, int MemRegs, int MemIdx, int MCS, int Delay, bool Manual, class Ctx, class Body, class Grid,
          class... Ins, class... Outs>
class ws_pipeline<NC, MemRegs, MemIdx, MCS, Delay, Manual, Ctx, Body, Grid, cuda::std::tuple<Ins...>,
                  cuda::std::tuple<Outs...>> {
  using regs = register_split<NC, MemRegs>;
  static constexpr bool has_context = !std::is_same_v<Ctx, no_carry>;
  // Whether CTAs of a cluster write each other's slots and arrive on each other's barriers
  // (each multicast input checks that the launch's cluster matches its spec).
  static constexpr bool multicasts = ((Ins::multicast > 1) || ...);

 public:
  TP_HD ws_pipeline(Body body, Grid grid, cuda::std::tuple<Ins...> ins, cuda::std::tuple<Outs...> outs, Ctx ctx)
      : body_(body), grid_(grid), ins_(ins), outs_(outs), ctx_(ctx) {}

  /// The shared memory the pipeline allocates over GMEM refs of types G... (inputs, then
  /// outputs): its slots and barrier rings, what get_allocations takes.
  template <class... G>
  static constexpr std::uint32_t smem_bytes = [] {
    static_assert(sizeof...(G) == sizeof...(Ins) + sizeof...(Outs),
                  "tilepipe: smem_bytes<G...> takes one GMEM ref type per in_spec and per out_spec, inputs first");
    using a = decltype(std::declval<const ws_pipeline&>().make_allocations(
        std::declval<cuda::std::tuple<const G&...>>(), cuda::std::index_sequence_for<Ins...>{},
        cuda::std::index_sequence_for<Outs...>{}));
    return allocation_sum<typename a::in_tuple>::value + allocation_sum<typename a::out_tuple>::value;
  }();

  /// The SMEM and barriers of the pipeline, allocated and initialised once by all
  /// warpgroups together, for pipelines chained with pipeline_state (Pallas' get_allocations).
  template <class... G>
  TP_HD auto get_allocations(kernel_context& k, const G&... gmem) const {
    static_assert(sizeof...(G) == sizeof...(Ins) + sizeof...(Outs),
                  "tilepipe: pass one GMEM ref per in_spec and per out_spec, inputs first");
    TP_REQUIRE(k.team_is_cta(),
               "emit_pipeline_warp_specialized is called inside the body (or compute_context) of another "
               "warp-specialised pipeline, where only its compute warpgroups run and its memory warpgroup is busy; "
               "nest a tp::emit_pipeline there (it runs on the compute warpgroups)");
    TP_REQUIRE(k.num_threads() == NC + 1,
               "the warp-specialised pipeline needs num_compute_wgs + 1 = %d warpgroups, the kernel has %d", NC + 1,
               k.num_threads());
    auto a = make_allocations(cuda::std::tie(gmem...), cuda::std::index_sequence_for<Ins...>{},
                              cuda::std::index_sequence_for<Outs...>{});
    const bool leader = k.cta_leader();
    const int compute_index = compute_index_of<MemIdx>(prim::uniform_warpgroup_index());
    for_each(a.ins, [&](auto& op, int i) { op.allocate(k, leader, i, compute_index); });
    for_each(a.outs, [&](auto& op, int j) { op.allocate(k, leader, j, static_cast<int>(sizeof...(Ins)) + j); });
    if (leader) prim::fence_barrier_init();
    if constexpr (multicasts) {
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
    const int t = k.thread_index();
    pipeline_detail::run_register_split<regs>(
        k, t == MemIdx, compute_index_of<MemIdx>(t), [&] { memory_role(a, refs, true); }, [&] { compute_role(k, a, refs); });
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
    else compute_role(k, alloc, refs);
  }

  /// The same, for one side only: inside tp::warp_specialized_for the memory and compute
  /// warpgroups each run their own loop, so each branch holds one role's code.
  template <class Alloc, class Role, class... G>
    requires(std::is_same_v<Role, memory_role_t> || std::is_same_v<Role, compute_role_t>)
  TP_HD void operator()(kernel_context& k, Alloc& alloc, pipeline_state state, Role, const G&... gmem) const {
    const auto refs = cuda::std::tie(gmem...);
    if constexpr (std::is_same_v<Role, memory_role_t>) memory_role(alloc, refs, stops(state));
    else compute_role(k, alloc, refs);
  }

 private:
  template <class InTuple, class OutTuple>
  struct allocations {
    using in_tuple = InTuple;
    using out_tuple = OutTuple;
    InTuple ins;
    OutTuple outs;
  };

  // The operand an in_spec / out_spec makes: SMEM slots and barriers, or (gmem_spec) nothing.
  template <class Spec, class G>
  struct input_for {
    using type = ws_input<Spec, G, Grid, MCS, Delay, NC, Manual>;
  };
  template <class G>
  struct input_for<gmem_spec_t, G> {
    using type = gmem_operand;
  };
  template <class Spec, class G>
  struct output_for {
    using type = ws_output<Spec, G, Grid, MCS, NC>;
  };
  template <class G>
  struct output_for<gmem_spec_t, G> {
    using type = gmem_operand;
  };

  template <class Refs, std::size_t... I, std::size_t... J>
  TP_HD auto make_allocations(const Refs&, cuda::std::index_sequence<I...>, cuda::std::index_sequence<J...>) const {
    constexpr std::size_t n = sizeof...(Ins);
    using in_t = cuda::std::tuple<typename input_for<Ins, std::remove_cvref_t<cuda::std::tuple_element_t<I, Refs>>>::type...>;
    using out_t =
        cuda::std::tuple<typename output_for<Outs, std::remove_cvref_t<cuda::std::tuple_element_t<n + J, Refs>>>::type...>;
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
    constexpr std::size_t n = sizeof...(Ins);  // where the outputs' refs start
    const long long steps = grid_.steps();
    // Prologue: the first `slots` steps of every input, step by step (every input's block of
    // step 0, then of step 1, ...). Each call starts its own sequence of blocks; slot rotation
    // and barrier phases carry over from the previous call, so in a chain each fetch waits
    // for the previous pipeline to release a slot, which it does in step order: input by
    // input, the last input's first block would wait for the previous pipeline's last step.
    for_each(a.ins, [](auto& op, int) { op.restart(); });
    for (long long t = 0; t < input_maxima<typename Alloc::in_tuple>::slots && t < steps; ++t)
      for_each_operand<0>(a.ins, ins_, refs, [&](auto& op, const auto& spec, const auto& g, int) {
        if (t < op.slots) op.produce(spec, g, grid_, t == 0);
      });
    index<Grid::rank> at{};
    for (long long s = 0; s < steps; ++s) {
      // Refill: step s + slots - delay into the slot the compute side frees after body(s).
      for_each_operand<0>(a.ins, ins_, refs, [&](auto& op, const auto& spec, const auto& g, int) {
        if (s >= op.delay && s + op.slots - op.delay < steps) op.produce(spec, g, grid_, false);
      });
      // Stores of the output blocks whose run ends at s, one bulk group.
      const bool last_step = s + 1 == steps;
      index<Grid::rank> next = at;
      if (!last_step) grid_.increment(next);
      bool stored[sizeof...(Outs) + 1] = {};
      bool any = false;
      for_each_operand<n>(a.outs, outs_, refs, [&](auto& op, const auto& spec, const auto& g, int j) {
        any |= stored[j] = op.store_if_ended(spec, g, grid_, at, next, s, last_step, s == 0);
      });
      if (any) {
        if (prim::leader()) {
          prim::bulk_commit();
          if (prim::no_pipelining()) prim::bulk_wait<0>();
        }
        for_each(a.outs, [&](auto& op, int j) { op.template free_stored<stores_in_flight>(stored[j]); });
      }
      at = next;
    }
    if (stop) {
      for_each(a.ins, [&](auto& op, int) { op.drain(); });
      for_each(a.outs, [&](auto& op, int) { op.drain(); });
      if (prim::leader()) prim::bulk_wait<0>();
    }
  }

  // ---- the compute warpgroups ------------------------------------------------------------

  /// The compute side: the body and compute_context run with the compute warpgroups as the
  /// context's team, so that a pipeline nested in them (emit_pipeline, run_scoped) is
  /// collective over those warpgroups and synchronises on their own named barrier.
  template <class Alloc, class Refs>
  TP_HD void compute_role(kernel_context& k, Alloc& a, const Refs& refs) const {
    const auto cta = k.enter_team({NC, MemIdx == 0 ? 1 : 0, prim::compute_team_barrier_id});
    compute_side(k.profiler(), a, refs);
    k.leave_team(cta);
  }

  template <class Alloc, class Refs>
  TP_HD void compute_side(profile_recorder_ref profiler, Alloc& a, const Refs& refs) const {
    if constexpr (has_context) {
      int calls = 0;
      // pipeline(init) runs with a carry and returns the final one; pipeline() runs without.
      auto pipeline = [&](auto... init) {
        static_assert(sizeof...(init) <= 1, "tilepipe: the pipeline takes at most one initial carry");
        TP_REQUIRE(++calls == 1, "compute_context must call the pipeline exactly once; it called it %d times", calls);
        if constexpr (sizeof...(init) == 1) {
          auto carry = compute_loop(profiler, a, refs, init...);
          profiler.begin(profile_kind::epilogue);  // the rest of the compute context
          return carry;
        } else {
          compute_loop(profiler, a, refs, no_carry{});
          profiler.begin(profile_kind::epilogue);
        }
      };
      ctx_.fn(pipeline);
      profiler.end(profile_kind::epilogue);
      TP_REQUIRE(calls == 1, "compute_context must call the pipeline exactly once; it called it %d times", calls);
    } else {
      compute_loop(profiler, a, refs, no_carry{});
    }
  }

  template <class Alloc, class Refs, class C>
  TP_HD C compute_loop(profile_recorder_ref profiler, Alloc& a, const Refs& refs, C carry) const {
    const long long steps = grid_.steps();
    const long long outer_step = prim::annotate_step(-1);  // for the interpreter's reports
    index<Grid::rank> at{};
    for (long long s = 0; s < steps; ++s) {
      prim::annotate_step(s);
      const bool last_step = s + 1 == steps;
      index<Grid::rank> next = at;
      if (!last_step) grid_.increment(next);
      carry = step(profiler, a, refs, at, next, s, last_step, carry, cuda::std::index_sequence_for<Ins...>{},
                   cuda::std::index_sequence_for<Outs...>{});
      at = next;
    }
    constexpr int max_delay = input_maxima<typename Alloc::in_tuple>::delay;
    if constexpr (max_delay > 0) {
      profiler.wait(profile_kind::wgmma_wait, -1, -1, [&] { prim::wgmma_wait<0>(); });
    }
    for_each(a.ins, [&](auto& op, int) { op.release_tail(steps); });
    prim::annotate_step(outer_step);
    return carry;
  }

  template <class Alloc, class Refs, class C, std::size_t... I, std::size_t... J>
  TP_HD C step(profile_recorder_ref profiler, Alloc& a, const Refs& refs, const index<Grid::rank>& at,
               const index<Grid::rank>& next, long long s, bool last_step, C carry, cuda::std::index_sequence<I...>,
               cuda::std::index_sequence<J...>) const {
    const bool first = s == 0;
    constexpr std::size_t n = sizeof...(Ins);
    auto in_views = cuda::std::make_tuple(input_view<I>(a, refs, at, first, s)...);
    auto out_views = cuda::std::make_tuple(output_view<J>(a, cuda::std::get<n + J>(refs), at, first)...);
    // Whether each input's block ends at s (for the manual tokens) is known before the body.
    auto tokens = cuda::std::make_tuple(token<I>(a, next, last_step)...);
    const std::uint64_t body_from = profiler.clock(profile_kind::body);
    C result = call_body(at, in_views, out_views, tokens, carry);
    profiler.span(profile_kind::body, body_from, -1, s);
    (cuda::std::get<J>(a.outs).end_run(cuda::std::get<J>(outs_), next, last_step), ...);
    (cuda::std::get<I>(a.ins).release_after(cuda::std::get<I>(ins_), next, last_step, s), ...);
    return result;
  }

  /// What the body gets for input I at step s: its SMEM block (waited for if new), or
  /// (gmem_spec) the call's GMEM ref.
  template <std::size_t I, class Alloc, class Refs>
  TP_HD auto input_view(Alloc& a, const Refs& refs, const index<Grid::rank>& at, bool first, long long s) const {
    if constexpr (cuda::std::tuple_element_t<I, cuda::std::tuple<Ins...>>::in_smem)
      return cuda::std::get<I>(a.ins).consume(cuda::std::get<I>(ins_), at, first, s);
    else return cuda::std::get<I>(refs);
  }
  template <std::size_t J, class Alloc, class G>
  TP_HD auto output_view(Alloc& a, const G& ref, const index<Grid::rank>& at, bool first) const {
    if constexpr (cuda::std::tuple_element_t<J, cuda::std::tuple<Outs...>>::in_smem)
      return cuda::std::get<J>(a.outs).begin_run(cuda::std::get<J>(outs_), at, first);
    else return ref;
  }
  /// Input I's consumed token (a GMEM operand's releases nothing).
  template <std::size_t I, class Alloc>
  TP_HD consumed_token token(Alloc& a, const index<Grid::rank>& next, bool last_step) const {
    if constexpr (cuda::std::tuple_element_t<I, cuda::std::tuple<Ins...>>::in_smem) {
      return cuda::std::get<I>(a.ins).token(cuda::std::get<I>(ins_), next, last_step);
    } else {
      return {};
    }
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
  template <class Spec>
  static constexpr int out_slots() {
    if constexpr (Spec::in_smem) return slot_plan<Spec, Grid, MCS, 0, false>::slots;
    else return 2;  // a GMEM operand stores nothing
  }
  static constexpr int min_out_slots = detail::smallest({2, out_slots<Outs>()...});
  static constexpr int stores_in_flight = min_out_slots >= 2 ? 1 : 0;

  Body body_;
  Grid grid_;
  cuda::std::tuple<Ins...> ins_;
  cuda::std::tuple<Outs...> outs_;
  Ctx ctx_;
};

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

struct warp_specialization_tag;

/// How a CTA is split for warp-specialised pipelines, stated once and used by everything
/// that depends on it: NumCompute compute warpgroups and one memory warpgroup (MemoryIdx,
/// default the last) that keeps MemoryRegs registers per thread (setmaxnreg.dec; the
/// compute warpgroups get the rest, checked by register_split).
///     static constexpr tp::warp_specialization<2, 40> ws{};   // in the kernel struct
///     static constexpr int num_threads = ws.num_threads;
///     const int c = ws.compute_index(k);
///     tp::emit_pipeline_warp_specialized(body, grid, ins, outs, ws, tp::max_concurrent_steps<4>);
///     tp::warp_specialized_for(ws, k, first, end, stride, f);
/// It is an option of emit_pipeline_warp_specialized; tp::num_compute_wgs<n>,
/// tp::memory_registers<r> and tp::memory_thread_idx<i> (Pallas' names) state the same
/// one by one.
template <int NumCompute, int MemoryRegs, int MemoryIdx = NumCompute>
struct warp_specialization {
  using tag = warp_specialization_tag;
  static constexpr int compute_wgs = NumCompute;
  static constexpr int memory_registers = MemoryRegs;
  static constexpr int memory_warpgroup = MemoryIdx;
  [[deprecated("use memory_warpgroup")]] static constexpr int memory_thread = MemoryIdx;
  static constexpr int num_threads = NumCompute + 1;  // warpgroups of the CTA (Pallas: "threads")
  using registers = register_split<NumCompute, MemoryRegs>;
  static_assert(MemoryIdx >= 0 && MemoryIdx <= NumCompute,
                "tilepipe: memory_thread_idx is out of range: the CTA has num_compute_wgs + 1 warpgroups");

  /// Whether the calling warpgroup is the memory warpgroup. The role split branches on
  /// this per-thread value on purpose: on a warp-uniform one, ptxas no longer allocates the
  /// compute branch for its setmaxnreg count (at the launch's 168 registers the attention
  /// step spilled 440 bytes). With the memory warpgroup last the test is `>=`, not `==`: the
  /// form decides which way nvcc points the branch, and ptxas allocates the compute path for
  /// its count only where the branch jumps to it (with `==`, the backward's dK dV kernel had
  /// every wgmma serialised and 648 bytes spilled; with `>=`, 4 waits for 48 wgmmas and 104
  /// bytes; the other kernels' SASS differs in the test alone).
  TP_HD static bool is_memory(const kernel_context& k) {
    if constexpr (MemoryIdx == NumCompute) return k.thread_index() >= MemoryIdx;
    else return k.thread_index() == MemoryIdx;
  }
  /// The calling warpgroup's index among the compute warpgroups (0 .. NumCompute - 1), as a
  /// warp-uniform value (prim::uniform_warpgroup_index: call it with the warp converged, as
  /// at the top of a kernel), so that the wgmma descriptors and offsets a kernel derives from
  /// it stay in uniform registers (docs/design.md).
  TP_HD static int compute_index(const kernel_context&) {
    return pipeline_detail::compute_index_of<MemoryIdx>(prim::uniform_warpgroup_index());
  }
};

namespace pipeline_detail {
/// The first warp_specialization among Opts (void if none).
template <class... Opts>
struct split_of {
  using type = void;
};
template <class First, class... Rest>
struct split_of<First, Rest...> {
  using type = std::conditional_t<std::is_same_v<typename detail::tag_of<First>::type, warp_specialization_tag>, First,
                                  typename split_of<Rest...>::type>;
};

/// The warp split of a pipeline's options: a warp_specialization, or the one-by-one options.
template <class... Opts>
constexpr auto split_option() {
  using bundle = typename split_of<Opts...>::type;
  constexpr int nc = option_v<num_compute_wgs_tag, 0, Opts...>;
  constexpr int regs = option_v<memory_registers_tag, 0, Opts...>;
  if constexpr (!std::is_void_v<bundle>) {
    static_assert((nc == 0 || nc == bundle::compute_wgs) && (regs == 0 || regs == bundle::memory_registers),
                  "tilepipe: num_compute_wgs / memory_registers disagree with the pipeline's warp_specialization");
    return bundle{};
  } else {
    static_assert(nc > 0, "tilepipe: emit_pipeline_warp_specialized needs tp::warp_specialization<n, r> (or "
                          "tp::num_compute_wgs<n>)");
    static_assert(regs > 0, "tilepipe: emit_pipeline_warp_specialized needs tp::warp_specialization<n, r> (or "
                            "tp::memory_registers<r>; 40 is typical)");
    return warp_specialization<nc, regs, option_v<memory_thread_idx_tag, nc, Opts...>>{};
  }
}
}  // namespace pipeline_detail

/// Builds a warp-specialised pipeline; see the top of this file. Options:
/// tp::warp_specialization<n, r[, i]> (or tp::num_compute_wgs<n>, tp::memory_registers<r>,
/// tp::memory_thread_idx<i>), tp::max_concurrent_steps<n> (default 2), tp::delay_release<d>,
/// tp::manual_consumed_barriers, tp::compute_context(fn).
template <class Body, int... E, class... Ins, class... Outs, class... Opts>
TP_HD auto emit_pipeline_warp_specialized(Body body, grid_t<E...> grid, in_specs_t<Ins...> ins, out_specs_t<Outs...> outs,
                                          Opts... opts) {
  using namespace pipeline_detail;
  using split = decltype(split_option<Opts...>());
  constexpr int nc = split::compute_wgs, mem_regs = split::memory_registers, mem_idx = split::memory_warpgroup;
  constexpr int mcs = option_v<max_concurrent_steps_tag, 2, Opts...>;
  constexpr int delay = option_v<delay_release_tag, 0, Opts...>;
  constexpr bool manual = option_v<manual_consumed_barriers_tag, false, Opts...>;
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
/// over tiles) with the warp-specialised register split of `split`: the memory warpgroup
/// runs the loop with memory_role_t, the compute warpgroups with compute_role_t, each after
/// one setmaxnreg, and the registers are given back afterwards. `state` is the position of
/// the item's pipeline in the chain (start, steady..., stop; only for a single item).
template <int NumCompute, int MemoryRegs, int MemoryIdx, class F>
TP_HD void warp_specialized_for(warp_specialization<NumCompute, MemoryRegs, MemoryIdx> split, const kernel_context& k,
                                int first, int end, int stride, F&& f) {
  auto loop = [&](auto role) {
    for (int item = first; item < end; item += stride) {
      const bool is_first = item == first, is_last = item + stride >= end;
      const auto state = is_first && is_last ? pipeline_state::only
                         : is_first          ? pipeline_state::start
                         : is_last           ? pipeline_state::stop
                                             : pipeline_state::steady;
      k.profiler().begin(profile_kind::tile, -1, item);
      f(item, state, role);
      k.profiler().end(profile_kind::tile, -1, item);
    }
  };
  pipeline_detail::run_register_split<typename decltype(split)::registers>(
      k, split.is_memory(k), split.compute_index(k), [&] { loop(memory_role_t{}); }, [&] { loop(compute_role_t{}); });
}

}  // namespace tilepipe
