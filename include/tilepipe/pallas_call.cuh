// pallas_call: a kernel and its pipeline in one call (Pallas' pl.pallas_call on Mosaic GPU,
// the compatibility API beside tp::kernel + tp::emit_pipeline).
//
//   struct axpb {                                        // the body: one block per step
//     float a, b;
//     TP_HD void operator()(tp::kernel_context&, tp::index<2>, auto x, auto y) const {
//       tp::map([a = a, b = b](float v) { return a * v + b; }, y, x);
//     }
//   };
//   auto y = tp::pallas_call(axpb{2, 1}, tp::grid(rows / 32, cols / 256),
//                            tp::in_specs(tp::spec<tile>(tp::axes_map<0, 1>{})),
//                            tp::out_specs(tp::spec<tile>(tp::axes_map<0, 1>{})),
//                            tp::out_shape(tp::out_type<bf16>(rows, cols)),
//                            tp::dimension_semantics<tp::parallel, tp::sequential>)(dev, x);
//
// The grid's parallel axes become the CUDA grid (in their order: x, y, z), one CTA per
// index; the sequential axes run inside each CTA as an emit_pipeline (last axis fastest),
// with the options max_concurrent_steps<n> and delay_release<d>. Without
// dimension_semantics every axis is parallel. Index maps take one index per axis of the
// whole grid, as in Pallas. The body is called as
//     body(ctx, at, in_views..., out_views...[, scratch])
// with `at` the step's tp::index<N> in the whole grid (Pallas' program_id along every axis).
// A body with a member `scratch(ctx)` gets, as its last argument, a reference to what
// scratch(ctx) returned, made once per CTA and kept across its steps (Pallas'
// scratch_shapes; a register accumulator is plgpu.ACC). It is used in place, never copied,
// so a wgmma may still be writing it when a step ends (delay_release).
// The body's `num_threads` and `thread_name`, when it declares them, are the kernel's.
// Outputs are out_type<T>(dims...) (allocated and returned) or aliased<I>(out_type<T>(...))
// (input I updated in place: Pallas' input_output_aliases).
//
// The body and index maps are types declared at namespace scope (structs with a TP_HD call
// operator, or tp::axes_map): nvcc passes no type local to a host function to a kernel, and
// its host-device lambdas cannot be generic.
#pragma once

#include "context.cuh"
#include "core/block_spec.cuh"
#include "core/grid.cuh"
#include "core/index_map.cuh"
#include "host/launch.cuh"
#include "pipeline/emit_pipeline.cuh"

#include <cuda/std/tuple>

#include <string>
#include <type_traits>
#include <utility>

namespace tilepipe {

/// What an axis of a pallas_call grid is: spread over CTAs, or stepped through in order.
enum class dimension { parallel, sequential };
inline constexpr dimension parallel = dimension::parallel;
inline constexpr dimension sequential = dimension::sequential;
inline constexpr dimension arbitrary = dimension::sequential;  // Pallas TPU's name for it

struct dimension_semantics_tag;
namespace pallas_detail {
/// The value of a dimension_semantics option: the mask of sequential axes, with the axis
/// count above bit 8.
template <dimension... D>
constexpr int semantics_code() {
  int mask = 0, a = 0;
  ((mask |= (D == dimension::sequential ? 1 << a : 0), ++a), ...);
  return static_cast<int>(sizeof...(D)) << 8 | mask;
}
}  // namespace pallas_detail

/// Per-axis semantics of a pallas_call grid (Pallas' dimension_semantics).
template <dimension... D>
struct dimension_semantics_t : option<dimension_semantics_tag, pallas_detail::semantics_code<D...>()> {
  static_assert(sizeof...(D) >= 1 && sizeof...(D) <= 8, "tilepipe: dimension_semantics names 1 to 8 axes");
};
template <dimension... D>
inline constexpr dimension_semantics_t<D...> dimension_semantics{};

/// The index map whose block index is the grid indices of axes A...: axes_map<0, 2> is
/// Pallas' `lambda i, j, k: (i, k)`. A type, so that it also runs on the GPU.
template <int... A>
struct axes_map {
  template <class... I>
    requires(((A >= 0 && A < static_cast<int>(sizeof...(I))) && ...))
  TP_HD constexpr auto operator()(I... i) const {
    const cuda::std::tuple<I...> at{i...};
    return idx(cuda::std::get<A>(at)...);
  }
};

/// The outputs of a pallas_call: out_type<T>(dims...) or aliased<I>(out_type<T>(dims...)).
template <class... O>
struct out_shape_t {
  std::tuple<O...> shapes;
};
template <class... O>
out_shape_t<O...> out_shape(O... o) {
  return {{o...}};
}

namespace pallas_detail {

constexpr int count_bits(unsigned m) {
  int n = 0;
  for (; m != 0; m &= m - 1) ++n;
  return n;
}

/// Position of grid axis `axis` among the sequential axes of mask `seq`.
constexpr int sequential_position(unsigned seq, int axis) { return count_bits(seq & ((1u << axis) - 1u)); }

/// How a grid of N axes with sequential-axis mask Seq is split between CTAs and pipeline.
template <int N, unsigned Seq>
struct split {
  static constexpr int sequential = count_bits(Seq);
  static constexpr int parallel = N - sequential;
  static constexpr int pipeline_rank = sequential > 0 ? sequential : 1;  // a pipeline has an axis
  TP_HD static constexpr bool is_sequential(int axis) { return ((Seq >> axis) & 1u) != 0; }
};

/// What a grid index of axis A is for the analysis of a CTA's map: a probe of its pipeline
/// axis when A is sequential, a run-time int (the CTA's own index) when it is parallel.
template <unsigned Seq, std::size_t A>
using cta_probe_t =
    std::conditional_t<((Seq >> A) & 1u) != 0, axis_probe<(1u << sequential_position(Seq, static_cast<int>(A)))>, int>;

template <class Map, unsigned Seq, std::size_t... A>
auto probe_cta_map(std::index_sequence<A...>) -> decltype(std::declval<const Map&>()(cta_probe_t<Seq, A>{}...));

/// Bit c set: entry c of a probed block index depends on some pipeline axis.
template <class R>
inline constexpr unsigned varying_entries_v = ~0u;  // not probed: every entry may vary
template <int R>
inline constexpr unsigned varying_entries_v<index<R>> = 0u;  // constants and parallel indices only
template <bool A, unsigned... M>
inline constexpr unsigned varying_entries_v<probed_index<A, M...>> = [] {
  unsigned bits = 0, c = 0;
  ((bits |= (M != 0 ? 1u << c : 0u), ++c), ...);
  return bits;
}();

/// The entries of Map's block index that a sequential axis moves: by the probes, or all of
/// them for a map the probes cannot follow (its spec declares depends_on, and the map may
/// not even compile with probes).
template <class Map, int N, unsigned Seq, bool Probed>
constexpr unsigned varying_entries() {
  if constexpr (Probed) return varying_entries_v<decltype(probe_cta_map<Map, Seq>(std::make_index_sequence<N>{}))>;
  else return ~0u;
}

/// An index map of the whole grid as the pipeline of one CTA sees it: called with the
/// sequential axes' indices, it calls the user's map with the CTA's own indices in the
/// parallel places. The probes of the axis analysis pass through it unchanged, so the
/// analysis sees which *pipeline* axes each map depends on.
///
/// Entries of the block index that depend on no sequential axis are the same at every step
/// of the CTA: they are computed once (`invariant`, when the CTA starts) and the per-step
/// call keeps only the others, so the compiler drops their arithmetic from the step loop.
/// That is what a tile order written as index maps needs (examples/pallas_call's grouped
/// order divides by run-time extents: four divisions per step otherwise, ahead of every
/// fetch). Index maps are pure functions of the grid indices (and of scalar-prefetch tables,
/// which a kernel does not write), as in Pallas.
template <class Map, int N, unsigned Seq, bool Probed>
struct cta_index_map {
  static constexpr int steps_rank = split<N, Seq>::pipeline_rank;
  Map map;
  int fixed[N];  // the CTA's index along each parallel axis; sequential entries unused
  decltype(apply_index_map(std::declval<const Map&>(), index<N>{})) invariant{};

  template <class... S>
    requires(sizeof...(S) == steps_rank)
  TP_HD constexpr auto operator()(S... seq) const {
    auto b = raw(seq...);
    if constexpr ((std::is_integral_v<S> && ...) && requires { b.v; }) {
      constexpr unsigned varying = varying_entries<Map, N, Seq, Probed>();
      for (int c = 0; c < decltype(b)::rank; ++c)
        if (!((varying >> c) & 1u)) b.v[c] = invariant.v[c];
    }
    return b;
  }

  /// The entries at the CTA's first step; called once, when the CTA's pipeline is made.
  TP_HD constexpr void compute_invariant() { invariant = at_first_step(cuda::std::make_index_sequence<steps_rank>{}); }

 private:
  template <std::size_t... I>
  TP_HD constexpr auto at_first_step(cuda::std::index_sequence<I...>) const {
    return raw(((void)I, 0)...);
  }
  template <class... S>
  TP_HD constexpr auto raw(S... seq) const {
    return call(cuda::std::tuple<S...>{seq...}, cuda::std::make_index_sequence<N>{});
  }
  template <class Steps, std::size_t... A>
  TP_HD constexpr auto call(const Steps& seq, cuda::std::index_sequence<A...>) const {
    return map(argument<A>(seq)...);
  }
  template <std::size_t A, class Steps>
  TP_HD constexpr auto argument(const Steps& seq) const {
    if constexpr (split<N, Seq>::is_sequential(A)) return cuda::std::get<sequential_position(Seq, A)>(seq);
    else return fixed[A];
  }
};

/// A spec option as the pipeline of one CTA needs it: depends_on names axes of the whole
/// grid, the pipeline's are the sequential ones (a parallel axis is a constant there).
template <unsigned Seq, class Opt>
struct cta_option {
  using type = Opt;
};
template <unsigned Seq, int... Axes>
struct cta_option<Seq, depends_on_t<Axes...>> {
  using type = option<depends_on_tag, (0u | ... | (((Seq >> Axes) & 1u) ? 1u << sequential_position(Seq, Axes) : 0u))>;
};

template <int N, unsigned Seq, class Spec>
struct cta_spec {  // gmem_spec: passed through
  static_assert(!Spec::in_smem, "tilepipe: pallas_call takes tp::spec and tp::gmem_spec; a tp::gathered_spec needs a "
                                "kernel that calls emit_pipeline itself");
  using type = Spec;
  TP_HD static type make(const Spec& s, const int (&)[N]) { return s; }
};
template <int N, unsigned Seq, class Tile, class Map, class... Opts>
struct cta_spec<N, Seq, block_spec<Tile, Map, Opts...>> {
  using type = block_spec<Tile, cta_index_map<Map, N, Seq, !has_option_v<depends_on_tag, Opts...>>,
                          typename cta_option<Seq, Opts>::type...>;
  TP_HD static type make(const block_spec<Tile, Map, Opts...>& s, const int (&fixed)[N]) {
    type t{{s.index_map, {}}};
    for (int a = 0; a < N; ++a) t.index_map.fixed[a] = fixed[a];
    t.index_map.compute_invariant();
    return t;
  }
};

/// Every output block is written by one CTA: an output whose index map ignores a parallel
/// axis (by the axis analysis, or its depends_on) would be written by all the CTAs along it
/// at once, a race whose result depends on their timing (a reduction axis left parallel,
/// as it is by default, does that). Reported on the host before the launch. An index map
/// that uses an axis but still sends two of its indices to one block is not caught.
template <int N, unsigned Seq, int... E, class... Outs>
void check_outputs_use_parallel_axes(const grid_t<E...>& grid, const Outs&...) {
  int operand = 0;
  auto check = [&]<class Spec>(const Spec*) {
    if constexpr (requires { Spec::template axes<N>(); }) {
      for (int a = 0; a < N; ++a)
        if (!split<N, Seq>::is_sequential(a) && !((Spec::template axes<N>() >> a) & 1u) && grid.extent[a] > 1)
          detail::throw_formatted("pallas_call: output %d's index map does not use parallel grid axis %d (extent %d), so "
                                  "the %d CTAs along it would all write the same output blocks at once. Mark the axis "
                                  "sequential in dimension_semantics (a reduction axis is), or index the output by it",
                                  operand, a, grid.extent[a], grid.extent[a]);
    }
    ++operand;
  };
  (check(static_cast<const Outs*>(nullptr)), ...);
}

/// What a body without scratch gets in its place: nothing.
struct no_scratch {};

template <class Body>
concept has_scratch = requires(const Body& b, kernel_context& k) { b.scratch(k); };

/// The type of a body's scratch.
template <class Body>
struct scratch_of {
  using type = no_scratch;
};
template <has_scratch Body>
struct scratch_of<Body> {
  using type = decltype(std::declval<const Body&>().scratch(std::declval<kernel_context&>()));
};

/// The pipeline body of one CTA: completes the step's index with the CTA's own indices
/// and calls the user's body with the kernel context first and its scratch last.
template <class Body, int N, unsigned Seq>
struct cta_body {
  using scratch_type = typename scratch_of<Body>::type;
  const Body* body;
  kernel_context* ctx;
  scratch_type* scratch;
  index<N> fixed;

  template <class... V>
  TP_HD TP_FORCEINLINE void operator()(const index<split<N, Seq>::pipeline_rank>& step, V&&... views) const {
    index<N> at = fixed;
    for (int a = 0; a < N; ++a)
      if (split<N, Seq>::is_sequential(a)) at.v[a] = step.v[sequential_position(Seq, a)];
    if constexpr (has_scratch<Body>) (*body)(*ctx, at, static_cast<V&&>(views)..., *scratch);
    else (*body)(*ctx, at, static_cast<V&&>(views)...);
  }
};

/// The kernel's warpgroups and their name: the body's, when it declares them.
template <class Body>
struct warpgroups_of_body {
  static constexpr int num_threads = launch_detail::warpgroups_of<Body>();
};
template <class Body>
  requires requires { Body::thread_name; }
struct warpgroups_of_body<Body> {
  static constexpr int num_threads = launch_detail::warpgroups_of<Body>();
  static constexpr const char* thread_name = Body::thread_name;
};

template <std::size_t... I>
auto dynamic_grid(std::index_sequence<I...>) -> grid_t<((void)I, dynamic_extent)...>;

/// Everything a CTA needs to run its part of the call (trivially copyable: it travels in
/// the kernel's parameter).
template <class Body, class Grid, unsigned Seq, int MCS, int Delay, class InSpecs, class OutSpecs>
struct plan;

template <class Body, class Grid, unsigned Seq, int MCS, int Delay, class... Ins, class... Outs>
struct plan<Body, Grid, Seq, MCS, Delay, cuda::std::tuple<Ins...>, cuda::std::tuple<Outs...>> {
  static constexpr int N = Grid::rank;
  using axes = split<N, Seq>;
  using body_type = Body;
  using in_specs_type = cuda::std::tuple<Ins...>;
  using out_specs_type = cuda::std::tuple<Outs...>;
  using pipeline_grid = decltype(dynamic_grid(std::make_index_sequence<axes::pipeline_rank>{}));

  Body body;
  Grid grid;
  cuda::std::tuple<Ins...> ins;
  cuda::std::tuple<Outs...> outs;

  /// The emit_pipeline of the CTA whose indices along the parallel axes are in `fixed`.
  TP_HD auto make_pipeline(kernel_context& ctx, const int (&fixed)[N], typename scratch_of<Body>::type* scratch) const {
    pipeline_grid steps{};
    for (int a = 0; a < axes::pipeline_rank; ++a) steps.extent[a] = 1;  // no sequential axis: one step
    for (int a = 0; a < N; ++a)
      if (axes::is_sequential(a)) steps.extent[sequential_position(Seq, a)] = grid.extent[a];
    index<N> at{};
    for (int a = 0; a < N; ++a) at.v[a] = fixed[a];
    auto cta_ins = cuda::std::apply([&](const auto&... s) { return in_specs(make_spec(s, fixed)...); }, ins);
    auto cta_outs = cuda::std::apply([&](const auto&... s) { return out_specs(make_spec(s, fixed)...); }, outs);
    return emit_pipeline(cta_body<Body, N, Seq>{&body, &ctx, scratch, at}, steps, cta_ins, cta_outs,
                         max_concurrent_steps<MCS>, delay_release<Delay>);
  }

  /// The shared memory the pipeline of a CTA allocates over GMEM refs of types G...
  template <class... G>
  static constexpr std::uint32_t smem_bytes = decltype(std::declval<const plan&>().make_pipeline(
      std::declval<kernel_context&>(), std::declval<const int (&)[N]>(),
      nullptr))::template smem_bytes<G...>;

  /// One CTA: its indices along the parallel axes are its position in the CUDA grid.
  template <class... G>
  TP_HD void run(kernel_context& ctx, const G&... refs) const {
    int fixed[N] = {};
    int cta_axis = 0;
    for (int a = 0; a < N; ++a)
      if (!axes::is_sequential(a)) fixed[a] = ctx.axis_index(cta_axis++);
    if constexpr (has_scratch<Body>) {
      auto scratch = body.scratch(ctx);  // lives in this frame: the steps use it in place
      make_pipeline(ctx, fixed, &scratch)(ctx, refs...);
    } else {
      make_pipeline(ctx, fixed, nullptr)(ctx, refs...);
    }
  }

 private:
  template <class Spec>
  TP_HD static auto make_spec(const Spec& s, const int (&fixed)[N]) {
    return cta_spec<N, Seq, Spec>::make(s, fixed);
  }
};

/// The kernel tp::kernel launches: one parameter per input and output.
template <class Plan, class Params>
struct call_kernel;
template <class Plan, class... G>
struct call_kernel<Plan, cuda::std::tuple<G...>> : warpgroups_of_body<typename Plan::body_type> {
  Plan plan;
  TP_HD void operator()(kernel_context& ctx, G... refs) const { plan.run(ctx, refs...); }
};

/// The GMEM parameter of an operand of element type T and rank R moved by spec Spec.
template <class Spec, class T, int R>
struct gmem_param {
  using type = gmem_ref<T, R, typename Spec::tile_type>;
};
template <class T, int R>
struct gmem_param<gmem_spec_t, T, R> {
  using type = gmem_ref<T, R>;
};

template <class O>
struct output_traits;
template <class T, int R>
struct output_traits<out_type_t<T, R>> {
  using value_type = T;
  static constexpr int rank = R;
};
template <int I, class T, int R>
struct output_traits<aliased_t<I, T, R>> {
  using value_type = T;
  static constexpr int rank = R;
};

template <class Plan, class... O>
class launcher {
 public:
  launcher(Plan p, std::tuple<O...> shapes) : plan_(p), shapes_(shapes) {}

  /// Launches on `dev` with the inputs (tensors or tensor_views); returns the outputs as
  /// tp::kernel does (nothing, one, or a std::tuple).
  template <class... In>
  auto operator()(const device& dev, const In&... inputs) const {
    using ins = typename Plan::in_specs_type;
    static_assert(sizeof...(In) == cuda::std::tuple_size_v<ins>,
                  "tilepipe: pallas_call: pass one input per in_spec");
    using params = decltype(parameters<In...>(cuda::std::make_index_sequence<sizeof...(In)>{},
                                              cuda::std::make_index_sequence<sizeof...(O)>{}));
    using K = call_kernel<Plan, params>;
    return std::apply([&](const auto&... o) { return tilepipe::kernel(K{{}, plan_}, config<params>(), o...); },
                      shapes_)(dev, inputs...);
  }

  /// Runs the call writing into existing outputs instead of allocating them: arguments
  /// are the inputs, then one tensor (or view) per out_shape, of its type and shape.
  /// For timing loops and outputs that are slices of larger tensors.
  template <class... A>
  void into(const device& dev, const A&... args) const {
    constexpr std::size_t n_in = cuda::std::tuple_size_v<typename Plan::in_specs_type>;
    static_assert(sizeof...(A) == n_in + sizeof...(O),
                  "tilepipe: pallas_call(...).into(dev, inputs..., outputs...): one argument per in_spec and per "
                  "out_spec");
    using params = decltype(argument_parameters<A...>(cuda::std::make_index_sequence<sizeof...(A)>{}));
    using K = call_kernel<Plan, params>;
    const auto bound = std::tie(args...);
    for_outputs(bound, std::make_index_sequence<sizeof...(O)>{});
    tilepipe::kernel(K{{}, plan_}, config<params>())(dev, args...);
  }

  /// The CUDA stream the launches go to (default: the default stream).
  launcher& on_stream(void* stream) {
    stream_ = stream;
    return *this;
  }

 private:
  template <class... In, std::size_t... I, std::size_t... J>
  static auto parameters(cuda::std::index_sequence<I...>, cuda::std::index_sequence<J...>) -> cuda::std::tuple<
      typename gmem_param<cuda::std::tuple_element_t<I, typename Plan::in_specs_type>,
                          typename launch_detail::argument_traits<In>::value_type,
                          launch_detail::argument_traits<In>::rank>::type...,
      typename gmem_param<cuda::std::tuple_element_t<J, typename Plan::out_specs_type>,
                          typename output_traits<std::tuple_element_t<J, std::tuple<O...>>>::value_type,
                          output_traits<std::tuple_element_t<J, std::tuple<O...>>>::rank>::type...>;

  template <std::size_t I>
  using spec_at = cuda::std::tuple_element_t<I, decltype(cuda::std::tuple_cat(std::declval<typename Plan::in_specs_type>(),
                                                                           std::declval<typename Plan::out_specs_type>()))>;

  template <class... A, std::size_t... I>
  static auto argument_parameters(cuda::std::index_sequence<I...>) -> cuda::std::tuple<typename gmem_param<
      spec_at<I>, typename launch_detail::argument_traits<A>::value_type, launch_detail::argument_traits<A>::rank>::type...>;

  /// into(): every output given has the declared shape.
  template <class Bound, std::size_t... J>
  void for_outputs(const Bound& bound, std::index_sequence<J...>) const {
    constexpr std::size_t n_in = cuda::std::tuple_size_v<typename Plan::in_specs_type>;
    (check_output<J>(launch_detail::as_view(std::get<n_in + J>(bound)), std::get<J>(shapes_)), ...);
  }
  template <std::size_t J, class View, class Shape>
  static void check_output(const View& v, const Shape& declared) {
    const auto& shape = [&]() -> const auto& {
      if constexpr (requires { declared.type; }) return declared.type.shape;
      else return declared.shape;
    }();
    for (std::size_t d = 0; d < shape.size(); ++d)
      if (v.shape[d] != shape[d])
        detail::throw_formatted("pallas_call(...).into: output %zu has extent %lld along dimension %zu, but its "
                                "out_shape says %lld",
                                J, v.shape[d], d, shape[d]);
  }

  /// One CTA per index of the parallel axes, and the shared memory its pipeline takes (no
  /// more, so that several CTAs share an SM).
  template <class Params>
  launch_config config() const {
    launch_config cfg;
    cfg.grid.clear();
    for (int a = 0; a < Plan::N; ++a)
      if (!Plan::axes::is_sequential(a)) {
        const int cuda_axis = static_cast<int>(cfg.grid.size());
        if (cuda_axis > 0 && plan_.grid.extent[a] > 65535)
          detail::throw_formatted("pallas_call: parallel grid axis %d has %d indices; as the CUDA grid's %s axis it "
                                  "may have at most 65535",
                                  a, plan_.grid.extent[a], cuda_axis == 1 ? "y" : "z");
        cfg.grid.push_back(plan_.grid.extent[a]);
      }
    if (cfg.grid.empty()) cfg.grid.push_back(1);
    cfg.smem_bytes = smem_for(static_cast<Params*>(nullptr));
    cfg.stream = stream_;
    return cfg;
  }
  template <class... G>
  static std::size_t smem_for(cuda::std::tuple<G...>*) {
    constexpr std::size_t bytes = Plan::template smem_bytes<G...>;
    return bytes > 0 ? bytes : smem_alignment;  // 0 would mean "the device maximum"
  }

  Plan plan_;
  std::tuple<O...> shapes_;
  void* stream_ = nullptr;
};

}  // namespace pallas_detail

/// Prepares a pallas_call; see the top of this file. Options: tp::dimension_semantics<...>
/// (default: every axis parallel), tp::max_concurrent_steps<n> (default 2),
/// tp::delay_release<d> (default 0). Call the result with a device and the inputs.
template <class Body, int... E, class... Ins, class... Outs, class... O, class... Opts>
auto pallas_call(Body body, grid_t<E...> grid, in_specs_t<Ins...> ins, out_specs_t<Outs...> outs,
                 out_shape_t<O...> shapes, Opts...) {
  constexpr int N = grid_t<E...>::rank;
  constexpr int semantics = option_v<dimension_semantics_tag, (N << 8), Opts...>;  // default: all parallel
  static_assert((semantics >> 8) == N,
                "tilepipe: pallas_call: dimension_semantics names a different number of axes than the grid has");
  constexpr unsigned seq = static_cast<unsigned>(semantics & 0xff);
  using axes = pallas_detail::split<N, seq>;
  static_assert(axes::parallel <= 3,
                "tilepipe: pallas_call: at most 3 parallel axes (they become the CUDA grid's x, y and z); mark the "
                "others sequential in dimension_semantics");
  static_assert(sizeof...(Outs) == sizeof...(O), "tilepipe: pallas_call: give one out_shape per out_spec");
  static_assert(std::is_trivially_copyable_v<Body>,
                "tilepipe: pallas_call: the body travels to the GPU in the kernel's parameter: it must be trivially "
                "copyable");
  constexpr bool fits =
      diagnostic::index_maps_fit<N, false>(static_cast<const Ins*>(nullptr)...) &&
      diagnostic::index_maps_fit<N, true>(static_cast<const Outs*>(nullptr)...);
  constexpr int mcs = option_v<max_concurrent_steps_tag, 2, Opts...>;
  constexpr int delay = option_v<delay_release_tag, 0, Opts...>;
  using plan = pallas_detail::plan<Body, grid_t<E...>, seq, mcs, delay, cuda::std::tuple<Ins...>, cuda::std::tuple<Outs...>>;
  if constexpr (!fits) {
    return pipeline_detail::invalid_pipeline{};  // the diagnostic is reported above; calls compile to nothing
  } else {
    cuda::std::apply([&](const auto&... o) { pallas_detail::check_outputs_use_parallel_axes<N, seq>(grid, o...); },
                     outs.specs);
    return pallas_detail::launcher<plan, O...>(plan{body, grid, ins.specs, outs.specs}, shapes.shapes);
  }
}

}  // namespace tilepipe
