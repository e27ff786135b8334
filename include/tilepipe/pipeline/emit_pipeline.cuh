// emit_pipeline: a software pipeline over a sequential grid, run by all warpgroups of
// the CTA together (Pallas Mosaic GPU's emit_pipeline, with TPU output semantics), or, in
// the body of a warp-specialised pipeline, by its compute warpgroups (the context's team).
//
//   auto pipe = tp::emit_pipeline(body, tp::grid(k_steps),
//                                 tp::in_specs(a_spec, b_spec), tp::out_specs(c_spec),
//                                 tp::max_concurrent_steps<4>, tp::delay_release<1>);
//   pipe(k, a_gmem, b_gmem, c_gmem);                     // or: carry = pipe(k, tp::carry(c0), ...)
//
// The body runs once per step: body(indices, in_views..., out_views...[, carry]).
//
// Schedule (every input has `slots` SMEM slots and one ready barrier per slot):
//   prologue   fetch the blocks of steps 0 .. slots-1
//   step s     wait for each input whose block is new at s; start a new output slot for
//              each output whose block is new at s (after that slot's last store read it);
//              run the body;
//              for each input with s >= delay, fetch step s + slots - delay into the slot
//              released by step s - delay (a block that did not change is not fetched);
//              store each output whose block changes after s (or s is the last step),
//              all stores of the step in one bulk group.
//   epilogue   wait for the stores.
// Only the team's leader thread issues copies and arrives; every thread waits.
// With no_pipelining (TILEPIPE_NO_PIPELINING, or the interpreter option) every fetch is
// waited for right after it is issued and every store group right after it is committed:
// the same schedule with all copies synchronous, for bisecting pipelining bugs.
#pragma once

#include "../backend/primitives.cuh"
#include "../context.cuh"
#include "../core/block_spec.cuh"
#include "../core/grid.cuh"
#include "smem_operands.cuh"

#include <cuda/std/tuple>

namespace tilepipe {

template <class... S>
struct in_specs_t {
  cuda::std::tuple<S...> specs;
};
template <class... S>
struct out_specs_t {
  cuda::std::tuple<S...> specs;
};
template <class... S>
TP_HD constexpr in_specs_t<S...> in_specs(S... s) {
  return {{s...}};
}
template <class... S>
TP_HD constexpr out_specs_t<S...> out_specs(S... s) {
  return {{s...}};
}

/// The initial value of a pipeline's carry: pipe(k, tp::carry(x), refs...).
template <class C>
struct carry_t {
  C value;
};
template <class C>
TP_HD carry_t<C> carry(C c) {
  return {c};
}

namespace pipeline_detail {

struct no_carry {};

/// Calls f(operand, position) for every operand of a tuple.
template <class Tuple, class F>
TP_HD TP_FORCEINLINE void for_each(Tuple& t, F&& f) {
  cuda::std::apply([&](auto&... op) {
    int i = 0;
    (f(op, i++), ...);
  }, t);
}

/// Calls f(operand, spec, ref, position) for every operand of one side of a pipeline (its
/// inputs, or its outputs): the operands and specs are tuples of that side, `refs` holds
/// the GMEM refs of the call (inputs, then outputs), the side's from First on.
template <std::size_t First, class Ops, class Specs, class Refs, class F>
TP_HD TP_FORCEINLINE void for_each_operand(Ops& ops, const Specs& specs, const Refs& refs, F&& f) {
  [&]<std::size_t... I>(cuda::std::index_sequence<I...>) {
    (f(cuda::std::get<I>(ops), cuda::std::get<I>(specs), cuda::std::get<First + I>(refs), static_cast<int>(I)), ...);
  }(cuda::std::make_index_sequence<cuda::std::tuple_size_v<Ops>>{});
}

template <int MCS, int Delay, class Body, class Grid, class InSpecs, class OutSpecs>
class pipeline;

template <int MCS, int Delay, class Body, class Grid, class... Ins, class... Outs>
class pipeline<MCS, Delay, Body, Grid, cuda::std::tuple<Ins...>, cuda::std::tuple<Outs...>> {
 public:
  TP_HD pipeline(Body body, Grid grid, cuda::std::tuple<Ins...> ins, cuda::std::tuple<Outs...> outs)
      : body_(body), grid_(grid), ins_(ins), outs_(outs) {}

  /// The shared memory the pipeline allocates while it runs over GMEM refs of types G...
  /// (inputs, then outputs): its slots and barriers.
  template <class... G>
  static constexpr std::uint32_t smem_bytes =
      allocation_sum<decltype(std::declval<const pipeline&>().make_inputs(
          std::declval<const cuda::std::tuple<const G&...>&>(), cuda::std::index_sequence_for<Ins...>{}))>::value +
      allocation_sum<decltype(std::declval<const pipeline&>().make_outputs(
          std::declval<const cuda::std::tuple<const G&...>&>(), cuda::std::index_sequence_for<Outs...>{}))>::value;

  /// Runs the pipeline over the GMEM refs of the inputs, then of the outputs.
  template <class... G>
  TP_HD void operator()(kernel_context& k, const G&... gmem) const {
    run(k, no_carry{}, gmem...);
  }

  /// Runs it with a carry: the body takes the carry last and returns the next one.
  template <class C, class... G>
  TP_HD C operator()(kernel_context& k, carry_t<C> init, const G&... gmem) const {
    return run(k, init.value, gmem...);
  }

 private:
  template <class C, class... G>
  TP_HD C run(kernel_context& k, C carry, const G&... gmem) const {
    static_assert(sizeof...(G) == sizeof...(Ins) + sizeof...(Outs),
                  "tilepipe: pass one GMEM ref per in_spec and per out_spec, inputs first");
    const auto refs = cuda::std::tie(gmem...);
    auto ins = make_inputs(refs, cuda::std::index_sequence_for<Ins...>{});
    auto outs = make_outputs(refs, cuda::std::index_sequence_for<Outs...>{});
    constexpr std::size_t n = sizeof...(Ins);  // where the outputs' refs start
    constexpr int max_delay = input_maxima<decltype(ins)>::delay;

    // Scoped allocation: the slots and barriers live while the pipeline runs.
    const std::uint32_t mark = k.smem_mark();
    for_each(ins, [&](auto& op, int i) { op.allocate(k, i); });
    for_each(outs, [&](auto& op, int i) { op.allocate(k, i); });
    // Collective over the context's team: the CTA, or (nested in a warp-specialised
    // pipeline's body) its compute warpgroups.
    const bool leader = k.team_leader();
    const int barrier = k.team_barrier(), threads = k.team_threads();
    const profile_recorder_ref profiler = k.profiler();
    auto sync_all = [barrier, threads] { prim::named_barrier_sync(barrier, threads); };
    if (leader) {
      for_each(ins, [&](auto& op, int i) { op.init_barriers(i); });
      prim::fence_barrier_init();
    }
    sync_all();

    const long long steps = grid_.steps();

    // Prologue: the first `slots` steps of every input.
    if (leader)
      for_each_operand<0>(ins, ins_, refs, [&](auto& op, const auto& spec, const auto& g, int) {
        for (long long t = 0; t < op.slots && t < steps; ++t) op.produce(spec, g, grid_, t == 0);
      });

    index<Grid::rank> at{};
    const long long outer_step = prim::annotate_step(-1);  // for the interpreter's reports
    for (long long s = 0; s < steps; ++s) {
      prim::annotate_step(s);
      const bool first = s == 0;
      for_each_operand<0>(ins, ins_, refs, [&](auto& op, const auto& spec, const auto&, int) {
        op.consume(spec, at, first, s);
      });
      bool new_output = false;
      for_each_operand<n>(outs, outs_, refs, [&](auto& op, const auto& spec, const auto&, int) {
        new_output |= op.begin_run(spec, at, first, grid_, s, leader);
      });
      if (new_output) sync_all();  // nobody writes a slot before its old store has read it

      const std::uint64_t body_from = profiler.clock(profile_kind::body);
      carry = call_body(at, ins, outs, refs, carry, cuda::std::index_sequence_for<Ins...>{},
                        cuda::std::index_sequence_for<Outs...>{});
      profiler.span(profile_kind::body, body_from, -1, s);

      const bool last_step = s + 1 == steps;
      index<Grid::rank> next = at;
      if (!last_step) grid_.increment(next);
      bool store = false;
      bool ends[sizeof...(Outs) + 1] = {};
      for_each_operand<n>(outs, outs_, refs, [&](auto& op, const auto& spec, const auto&, int j) {
        store |= ends[j] = op.run_ends(spec, next, last_step);
      });
      bool refill = false;
      for_each(ins, [&](auto& op, int) { refill |= op.refills_after(s, steps); });

      if (store) prim::fence_proxy_async();  // the body's SMEM writes, before TMA reads them
      if (store || refill) sync_all();       // every thread is done with the body
      if (leader) {
        // Refills first: a load is awaited `slots` steps from now, a store by nobody soon.
        for_each_operand<0>(ins, ins_, refs, [&](auto& op, const auto& spec, const auto& g, int) {
          if (op.refills_after(s, steps)) op.produce(spec, g, grid_, false);
        });
        if (store) {
          for_each_operand<n>(outs, outs_, refs, [&](auto& op, const auto&, const auto& g, int j) {
            if (ends[j]) op.store(g, s);
          });
          prim::bulk_commit();
          if (prim::no_pipelining()) prim::bulk_wait<0>();
        }
      }
      at = next;
    }

    // Epilogue: the stores must have landed before the pipeline's outputs are used, and
    // the wgmma groups a delayed release left in flight must be done with the slots
    // before the slots' memory is handed to anything else.
    if (leader) {
      profiler.wait(profile_kind::wait_store, -1, -1, [&] { prim::bulk_wait<0>(); });
    }
    if constexpr (max_delay > 0) {
      profiler.wait(profile_kind::wgmma_wait, -1, -1, [&] { prim::wgmma_wait<0>(); });
    }
    sync_all();
    if (leader) for_each(ins, [&](auto& op, int) { op.inval_barriers(); });
    prim::annotate_step(outer_step);
    k.smem_release(mark);
    return carry;
  }

  template <class Refs, std::size_t... I>
  TP_HD auto make_inputs(const Refs&, cuda::std::index_sequence<I...>) const {
    return cuda::std::tuple<operand_for<Ins, std::remove_cvref_t<cuda::std::tuple_element_t<I, Refs>>, Grid, MCS, Delay, true>...>{};
  }

  template <class Refs, std::size_t... J>
  TP_HD auto make_outputs(const Refs&, cuda::std::index_sequence<J...>) const {
    constexpr std::size_t n = sizeof...(Ins);
    return cuda::std::tuple<
        operand_for<Outs, std::remove_cvref_t<cuda::std::tuple_element_t<n + J, Refs>>, Grid, MCS, Delay, false>...>{};
  }

  template <class InOps, class OutOps, class Refs, class C, std::size_t... I, std::size_t... J>
  TP_HD C call_body(const index<Grid::rank>& at, InOps& ins, OutOps& outs, const Refs& refs, C carry,
                    cuda::std::index_sequence<I...>, cuda::std::index_sequence<J...>) const {
    constexpr std::size_t n = sizeof...(Ins);
    if constexpr (std::is_same_v<C, no_carry>) {
      body_(at, body_view(cuda::std::get<I>(ins), cuda::std::get<I>(refs))...,
            body_view(cuda::std::get<J>(outs), cuda::std::get<n + J>(refs))...);
      return carry;
    } else {
      return body_(at, body_view(cuda::std::get<I>(ins), cuda::std::get<I>(refs))...,
                   body_view(cuda::std::get<J>(outs), cuda::std::get<n + J>(refs))..., carry);
    }
  }

  Body body_;
  Grid grid_;
  cuda::std::tuple<Ins...> ins_;
  cuda::std::tuple<Outs...> outs_;
};

/// What a pipeline builder returns when an index map does not fit the grid: the diagnostic
/// is reported, and calls of it compile to nothing, so no further errors bury the message.
struct invalid_pipeline {
  template <class... A>
  TP_HD explicit invalid_pipeline(A&&...) {}
  template <class... A>
  TP_HD void operator()(A&&...) const {}
  template <class... A>
  TP_HD int get_allocations(A&&...) const {
    return 0;
  }
};

/// Whether every spec's index map takes one index per grid axis (else reports which does not).
template <int GridRank, class... Ins, class... Outs>
constexpr bool index_maps_fit(cuda::std::tuple<Ins...>*, cuda::std::tuple<Outs...>*) {
  return diagnostic::index_maps_fit<GridRank, false>(static_cast<const Ins*>(nullptr)...) &&
         diagnostic::index_maps_fit<GridRank, true>(static_cast<const Outs*>(nullptr)...);
}


}  // namespace pipeline_detail

/// Builds a pipeline; see the top of this file. Options: tp::max_concurrent_steps<n>
/// (default 2), tp::delay_release<d> (default 0, for specs that do not set their own).
template <class Body, int... E, class... Ins, class... Outs, class... Opts>
TP_HD auto emit_pipeline(Body body, grid_t<E...> grid, in_specs_t<Ins...> ins, out_specs_t<Outs...> outs, Opts...) {
  constexpr int mcs = option_v<max_concurrent_steps_tag, 2, Opts...>;
  constexpr int delay = option_v<delay_release_tag, 0, Opts...>;
  constexpr bool fits = pipeline_detail::index_maps_fit<grid_t<E...>::rank>(
      static_cast<cuda::std::tuple<Ins...>*>(nullptr), static_cast<cuda::std::tuple<Outs...>*>(nullptr));
  using result = std::conditional_t<
      fits, pipeline_detail::pipeline<mcs, delay, Body, grid_t<E...>, cuda::std::tuple<Ins...>, cuda::std::tuple<Outs...>>,
      pipeline_detail::invalid_pipeline>;
  return result(body, grid, ins.specs, outs.specs);
}

template <class Body, int... E, class... Ins, class... Opts>
TP_HD auto emit_pipeline(Body body, grid_t<E...> grid, in_specs_t<Ins...> ins, Opts... opts) {
  return emit_pipeline(body, grid, ins, out_specs(), opts...);
}

}  // namespace tilepipe
