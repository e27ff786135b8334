// Random configurations of both pipelines, run in the interpreter and checked against a
// float64 host reference, with the race detector and the barrier protocol checks.
//
// C++ needs compile-time types for tiles, specs and grids, so a fixed table of compiled
// "shapes" (`shapes`, below) sets what must be static: element type and tile, grid rank
// (static extents or run-time ones), pipeline kind and warpgroups, slots and delays, and per
// operand the grid axes its index map may use, delay_release and buffered<n>. Everything
// else is drawn from the seed at run time: the shape, grid extents (0-40 steps), the index
// maps (linear, divided, modulo, clamped; invariant and revisiting), tensor extents with
// edge blocks and padded strides, the CTAs and chains of pipelines, the body's
// coefficients and the interpreter's options (copy mode, CTA order, race detection,
// no_pipelining).
//
// Each configuration computes, per output block, out = sum over the consecutive steps that
// visit it of (sum_i a_i * in_i + c * (step + 1)): consecutive steps that map to the same
// output block accumulate (TPU semantics). Outputs must match the reference where the
// kernel stores, and every other element of every buffer (views' padding, guards before and
// after them, blocks no step visits, inputs) must keep its bits.
//
// CI runs a fixed set of seeds (CI/RandomPipelines.FixedSeeds/0..3). For long runs:
//     interp_test_random_pipelines --seeds N [--first-seed S] [--verbose]
// runs seeds S .. S + N - 1 (S defaults to 1) instead of the tests and prints a summary
// naming every failing seed with its configuration (exit status 1 if any failed);
// `--first-seed S --seeds 1` replays one, --verbose prints every configuration.
#include "test_util.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

namespace {

// ---- limits of the drawn configurations -----------------------------------------------------

constexpr int max_axes = 3;   // grid axes
constexpr int max_dims = 3;   // tensor dimensions
constexpr int max_in = 3, max_out = 2, max_ops = max_in + max_out;
constexpr int max_chain = 4;  // pipelines run one after the other by each CTA
constexpr int max_ctas = 3;
constexpr int max_steps = 40;
constexpr long long max_tensor_elements = 1 << 21;

// ---- index maps with run-time parameters ----------------------------------------------------

enum class map_kind : int { linear, divided, modulo, clamp_high, clamp_low };
constexpr const char* map_kind_names[] = {"", "/", "%", "min", "max"};

/// One dimension of an index map: kind(offset + sum over axes a of coef[a] * axis_a, param),
/// never negative.
struct dim_map {
  int coef[max_axes] = {};
  int offset = 0;
  map_kind kind = map_kind::linear;
  int param = 1;  // divisor, modulus, upper or lower bound
};

struct operand_map {
  dim_map dims[max_dims];
};

/// The index map of one operand: `m`, using only the grid axes in Mask (fixed at compile
/// time, as the library's probe analysis needs), plus `band` in dimension 0 (the band of
/// the tensor that this CTA and pipeline of a chain works on).
template <unsigned Mask, int Rank>
struct random_map {
  operand_map m;
  int band = 0;

  template <class... A>
  TP_HD auto operator()(A... a) const {
    return blocks(std::make_index_sequence<Rank>{}, a...);
  }

 private:
  template <std::size_t... D, class... A>
  TP_HD auto blocks(std::index_sequence<D...>, A... a) const {
    return tp::idx(dim<D>(a...)...);
  }
  template <std::size_t D, class... A>
  TP_HD auto dim(A... a) const {
    const dim_map& d = m.dims[D];
    const auto e = linear(d, std::index_sequence_for<A...>{}, a...);
    auto r = e;
    switch (d.kind) {
      case map_kind::linear: break;
      case map_kind::divided: r = e / d.param; break;
      case map_kind::modulo: r = e % d.param; break;
      case map_kind::clamp_high: r = tp::min(e, d.param); break;
      case map_kind::clamp_low: r = tp::max(e, d.param); break;
    }
    return r + (D == 0 ? band : 0);
  }
  template <std::size_t... I, class... A>
  TP_HD static auto linear(const dim_map& d, std::index_sequence<I...>, A... a) {
    return (d.offset + ... + term<I>(d, a));
  }
  template <std::size_t I, class A>
  TP_HD static auto term(const dim_map& d, A x) {
    if constexpr ((Mask >> I) & 1u) return d.coef[I] * x;
    else return 0;
  }
};

/// The same index map, evaluated by the host reference with a run-time mask.
std::array<long long, max_dims> host_blocks(const operand_map& m, unsigned mask, int rank, int band,
                                            const int* at, int grid_rank) {
  std::array<long long, max_dims> r{};
  for (int d = 0; d < rank; ++d) {
    const dim_map& dm = m.dims[d];
    long long e = dm.offset;
    for (int a = 0; a < grid_rank; ++a)
      if ((mask >> a) & 1u) e += static_cast<long long>(dm.coef[a]) * at[a];
    switch (dm.kind) {
      case map_kind::linear: break;
      case map_kind::divided: e /= dm.param; break;
      case map_kind::modulo: e %= dm.param; break;
      case map_kind::clamp_high: e = std::min<long long>(e, dm.param); break;
      case map_kind::clamp_low: e = std::max<long long>(e, dm.param); break;
    }
    r[d] = e + (d == 0 ? band : 0);
  }
  return r;
}

// ---- what the kernel reads at run time --------------------------------------------------------

struct kernel_config {
  int chain = 1;   // pipelines per CTA
  int driver = 0;  // warp-specialised chains: 0 standalone calls, 1 hoisted allocations, 2 warp_specialized_for
  int extents[max_chain][max_axes] = {};  // run-time grid extents of each pipeline of the chain
  operand_map maps[max_chain][max_ops] = {};
  int span[max_ops] = {};  // dimension-0 blocks per band (CTA x pipeline); 0: all share one
  float coef[max_out][max_in] = {};
  float step_coef[max_out] = {};
};

// ---- compiled shapes ---------------------------------------------------------------------------

template <class T_, class Tile_>
struct tile_of {
  using T = T_;
  using tile = Tile_;
};
/// emit_pipeline run by all Warpgroups of the CTA; with Carry the step count travels in the carry.
template <int Warpgroups, bool Carry = false>
struct plain {};
/// emit_pipeline_warp_specialized: ComputeWgs compute warpgroups, the memory warpgroup at
/// MemoryIdx; Manual: manual_consumed_barriers; Carry: a compute_context owns a carry.
template <int ComputeWgs, int MemoryIdx, bool Manual = false, bool Carry = false>
struct ws {};
/// max_concurrent_steps and the pipeline's delay_release (-1: not given).
template <int MCS, int Delay = -1>
struct slots {};
/// An input spec: the grid axes its map may use, its own delay_release and buffered<n> (-1 / 0: none).
template <unsigned Mask, int Delay = -1, int Buffered = 0>
struct in {
  static constexpr unsigned mask = Mask;
  static constexpr int delay = Delay, buffered = Buffered;
};
template <unsigned Mask, int Buffered = 0>
struct out {
  static constexpr unsigned mask = Mask;
  static constexpr int delay = -1, buffered = Buffered;
};
template <class... S>
struct ins {};
template <class... S>
struct outs {};
template <class... T>
struct type_list {};

template <class K>
struct kind_traits;
template <int W, bool C>
struct kind_traits<plain<W, C>> {
  static constexpr bool warp_specialized = false, manual = false, carry = C;
  static constexpr int warpgroups = W, compute_wgs = W, memory_idx = -1;
};
template <int N, int M, bool Manual, bool C>
struct kind_traits<ws<N, M, Manual, C>> {
  static constexpr bool warp_specialized = true, manual = Manual, carry = C;
  static constexpr int warpgroups = N + 1, compute_wgs = N, memory_idx = M;
};

template <int Delay, int Buffered>
auto spec_options() {
  if constexpr (Delay >= 0 && Buffered > 0) return std::make_tuple(tp::delay_release<Delay>, tp::buffered<Buffered>);
  else if constexpr (Delay >= 0) return std::make_tuple(tp::delay_release<Delay>);
  else if constexpr (Buffered > 0) return std::make_tuple(tp::buffered<Buffered>);
  else return std::make_tuple();
}

template <class Tile, class Grid, class Kind, class Slots, class Ins, class Outs>
struct shape;

template <class T_, class Tile_, int... E, class Kind, int MCS, int Delay, class... In, class... Out>
struct shape<tile_of<T_, Tile_>, tp::grid_t<E...>, Kind, slots<MCS, Delay>, ins<In...>, outs<Out...>> {
  using T = T_;
  using tile = Tile_;
  using block = typename tile::block_type;
  using layout = tp::tile_layout<tile, static_cast<int>(sizeof(T))>;
  using grid_type = tp::grid_t<E...>;
  using kind = kind_traits<Kind>;
  using gmem = tp::gmem<T, block::rank, tile>;
  static constexpr int rank = block::rank, grid_rank = sizeof...(E);
  static constexpr int n_in = sizeof...(In), n_out = sizeof...(Out);
  static constexpr unsigned in_masks[max_in] = {In::mask...};
  static constexpr unsigned out_masks[max_out] = {Out::mask...};
  static constexpr int mcs = MCS, delay = Delay;
  // Each (compute) warpgroup computes its own rows of every block.
  static constexpr int slice_rows = layout::rows / kind::compute_wgs;

  static_assert(n_in >= 1 && n_in <= max_in && n_out >= 1 && n_out <= max_out && rank <= max_dims);
  static_assert(layout::rows % kind::compute_wgs == 0 && (layout::swizzle == 0 || slice_rows % 8 == 0),
                "every compute warpgroup needs whole rows (whole 8-row atoms when swizzled)");
  static_assert((((In::mask >> grid_rank) == 0) && ...) && (((Out::mask >> grid_rank) == 0) && ...));
  static constexpr long long smem = (0LL + ... + (static_cast<long long>(layout::bytes) * (In::buffered ? In::buffered : MCS))) +
                                    (0LL + ... + (static_cast<long long>(layout::bytes) * (Out::buffered ? Out::buffered : MCS)));
  static_assert(smem <= 200 * 1024, "the shape's slots do not fit in shared memory");

  static grid_type grid_of(const int* extents) {
    if constexpr (grid_type::is_static) return tp::grid<E...>();
    else return [&]<std::size_t... A>(std::index_sequence<A...>) { return tp::grid(extents[A]...); }(std::make_index_sequence<grid_rank>{});
  }

  /// The body of every step: out_o (+)= sum_i coef[o][i] * in_i + step_coef[o] * (step + 1),
  /// on this warpgroup's rows; `=` on the first step of an output block's run, `+=` on later ones.
  struct body {
    grid_type grid;
    std::tuple<random_map<Out::mask, rank>...> out_maps;
    float coef[max_out][max_in];
    float step_coef[max_out];
    int part;  // this warpgroup's slice of rows

    template <class At, class... V>
    TP_HD auto operator()(At at, V... v) const {
      constexpr int tokens = kind::manual ? n_in : 0;
      constexpr bool has_carry = sizeof...(V) == n_in + n_out + tokens + 1;
      static_assert(sizeof...(V) == n_in + n_out + tokens + (has_carry ? 1 : 0));
      const auto views = std::make_tuple(v...);
      long long s = 0;
      for (int a = 0; a < grid_rank; ++a) s = s * grid[a] + at[a];
      if constexpr (has_carry)
        TP_REQUIRE(std::get<sizeof...(V) - 1>(views) == s, "the carry says step %lld, the indices step %lld",
                   static_cast<long long>(std::get<sizeof...(V) - 1>(views)), s);
      [&]<std::size_t... O>(std::index_sequence<O...>) {
        (compute<O>(views, at, s, std::make_index_sequence<n_in>{}), ...);
      }(std::make_index_sequence<n_out>{});
      if constexpr (kind::manual)
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          (std::get<n_in + n_out + I>(views).arrive(), ...);
        }(std::make_index_sequence<n_in>{});
      if constexpr (has_carry) return std::get<sizeof...(V) - 1>(views) + 1;
    }

    template <std::size_t O, class Views, class At, std::size_t... I>
    TP_HD void compute(const Views& views, const At& at, long long s, std::index_sequence<I...>) const {
      const auto& map = std::get<O>(out_maps);
      const bool first = s == 0 || !(tp::apply_index_map(map, grid.unravel(s - 1)) == tp::apply_index_map(map, at));
      const float a[max_in] = {coef[O][I]...};
      const float bias = step_coef[O] * static_cast<float>(s + 1);
      auto f = [a, bias](auto... x) {
        float r = bias;
        int i = 0;
        ((r += a[i++] * x), ...);
        return r;
      };
      const int r0 = part * slice_rows;
      const auto o = tp::rows<slice_rows>(std::get<n_in + O>(views), r0);
      if (first) tp::map(f, o, tp::rows<slice_rows>(std::get<I>(views), r0)...);
      else tp::map([f](float acc, auto... x) { return acc + f(x...); }, o, o, tp::rows<slice_rows>(std::get<I>(views), r0)...);
    }
  };

  template <class Spec>
  static auto make_spec(const operand_map& m, int band) {
    const random_map<Spec::mask, rank> map{m, band};
    auto f = [map](auto... a) { return map(a...); };
    return std::apply([&](auto... o) { return tp::spec<tile>(f, o...); }, spec_options<Spec::delay, Spec::buffered>());
  }

  /// The specs and body of pipeline p of the chain of the instance (CTA x pipeline) `instance`.
  static auto parts(const kernel_config& c, int instance, int p, int part) {
    const grid_type g = grid_of(c.extents[p]);
    auto in_s = [&]<std::size_t... I>(std::index_sequence<I...>) {
      return tp::in_specs(make_spec<In>(c.maps[p][I], instance * c.span[I])...);
    }(std::index_sequence_for<In...>{});
    auto out_s = [&]<std::size_t... J>(std::index_sequence<J...>) {
      return tp::out_specs(make_spec<Out>(c.maps[p][n_in + J], instance * c.span[n_in + J])...);
    }(std::index_sequence_for<Out...>{});
    body b{g, {}, {}, {}, part};
    [&]<std::size_t... J>(std::index_sequence<J...>) {
      b.out_maps = {random_map<Out::mask, rank>{c.maps[p][n_in + J], instance * c.span[n_in + J]}...};
    }(std::index_sequence_for<Out...>{});
    std::memcpy(b.coef, c.coef, sizeof b.coef);
    std::memcpy(b.step_coef, c.step_coef, sizeof b.step_coef);
    return std::make_tuple(g, in_s, out_s, b);
  }

  template <class... G>
  static void run(tp::kernel_context& k, const kernel_config& c, const G&... g) {
    const int cta = k.axis_index(0);
    if constexpr (!kind::warp_specialized) {
      for (int p = 0; p < c.chain; ++p) {
        const auto pp = parts(c, cta * c.chain + p, p, k.thread_index());
        const auto& grid = std::get<0>(pp);
        auto opts = std::tuple_cat(std::make_tuple(tp::max_concurrent_steps<MCS>), delay_option());
        auto pipe = std::apply([&](auto... o) {
          return tp::emit_pipeline(std::get<3>(pp), grid, std::get<1>(pp), std::get<2>(pp), o...);
        }, opts);
        if constexpr (kind::carry) {
          const long long n = pipe(k, tp::carry(0LL), g...);
          TP_REQUIRE(n == grid.steps(), "the carry counted %lld steps of %lld", n, grid.steps());
        } else {
          pipe(k, g...);
        }
      }
    } else {
      constexpr int nc = kind::compute_wgs, mem = kind::memory_idx;
      constexpr tp::warp_specialization<nc, 40, mem> ws{};
      const int part = ws.is_memory(k) ? 0 : ws.compute_index(k);
      auto make = [&](int p) {
        const auto pp = parts(c, cta * c.chain + p, p, part);
        const auto& grid = std::get<0>(pp);
        auto opts = std::tuple_cat(std::make_tuple(ws, tp::max_concurrent_steps<MCS>),
                                   delay_option(), manual_option(), context_option(grid.steps()));
        return std::apply([&](auto... o) {
          return tp::emit_pipeline_warp_specialized(std::get<3>(pp), grid, std::get<1>(pp), std::get<2>(pp), o...);
        }, opts);
      };
      if (c.driver == 0) {
        for (int p = 0; p < c.chain; ++p) make(p)(k, g...);
      } else if (c.driver == 1) {
        auto alloc = make(0).get_allocations(k, g...);
        for (int p = 0; p < c.chain; ++p) {
          const auto state = c.chain == 1  ? tp::pipeline_state::only
                             : p == 0      ? tp::pipeline_state::start
                             : p + 1 == c.chain ? tp::pipeline_state::stop
                                                : tp::pipeline_state::steady;
          make(p)(k, alloc, state, g...);
        }
      } else {
        auto alloc = make(0).get_allocations(k, g...);
        tp::warp_specialized_for(ws, k, 0, c.chain, 1, [&](int p, tp::pipeline_state state, auto role) {
          make(p)(k, alloc, state, role, g...);
        });
      }
    }
  }

  static auto delay_option() {
    if constexpr (Delay >= 0) return std::make_tuple(tp::delay_release<Delay>);
    else return std::make_tuple();
  }
  static auto manual_option() {
    if constexpr (kind::manual) return std::make_tuple(tp::manual_consumed_barriers);
    else return std::make_tuple();
  }
  static auto context_option(long long steps) {
    if constexpr (kind::warp_specialized && kind::carry)
      return std::make_tuple(tp::compute_context([steps](auto pipeline) {
        const long long n = pipeline(0LL);
        TP_REQUIRE(n == steps, "the compute_context's carry counted %lld steps of %lld", n, steps);
      }));
    else return std::make_tuple();
  }

  static std::string describe() {
    std::ostringstream o;
    o << (std::is_same_v<T, float> ? "f32" : "bf16") << " block<";
    for (int d = 0; d < rank; ++d)
      o << (d ? "," : "") << (block::kind_at(d) == tp::dim_kind::squeezed ? std::string("sq") : std::to_string(block::size_at(d)));
    o << "> swizzle " << layout::swizzle << ", " << (grid_type::is_static ? "static" : "run-time") << " grid of "
      << grid_rank << (grid_rank > 1 ? " axes, " : " axis, ");
    if (kind::warp_specialized)
      o << "warp-specialised " << kind::compute_wgs << "+1 wgs (memory " << kind::memory_idx << ")"
        << (kind::manual ? " manual-consumed" : "");
    else o << "emit_pipeline " << kind::warpgroups << " wgs";
    o << (kind::carry ? " carry" : "") << ", mcs " << MCS;
    if (Delay >= 0) o << " delay " << Delay;
    auto spec = [&](const char* what, unsigned mask, int d, int b) {
      o << " " << what << "{" << (mask ? "uses" : "invariant");
      for (int a = 0; a < grid_rank; ++a)
        if ((mask >> a) & 1u) o << " x" << a;
      if (d >= 0) o << " delay " << d;
      if (b) o << " buffered " << b;
      o << "}";
    };
    (spec("in", In::mask, In::delay, In::buffered), ...);
    (spec("out", Out::mask, Out::delay, Out::buffered), ...);
    return o.str();
  }
};

template <class S, class L>
struct random_kernel;
template <class S, class... G>
struct random_kernel<S, type_list<G...>> {
  static constexpr int num_threads = S::kind::warpgroups;
  kernel_config cfg;
  TP_HD void operator()(tp::kernel_context& k, G... g) const { S::run(k, cfg, g...); }
};

template <class G, std::size_t... I>
auto repeat_type(std::index_sequence<I...>) -> type_list<std::enable_if_t<(I, true), G>...>;
template <class S>
using kernel_of = random_kernel<S, decltype(repeat_type<typename S::gmem>(std::make_index_sequence<S::n_in + S::n_out>{}))>;

// Tiles: rows (all dimensions but the innermost) x columns; swizzled, multi-panel, multi-box, 1-D and 3-D.
using f32_8x32 = tile_of<float, tp::tile<tp::block<8, 32>>>;
using f32_24x32_sw128 = tile_of<float, tp::tile<tp::block<24, 32>, tp::swizzle<128>>>;
using f32_16x16 = tile_of<float, tp::tile<tp::block<16, 16>>>;
using f32_sq_8x32 = tile_of<float, tp::tile<tp::block<tp::squeezed, 8, 32>>>;
using f32_2x8x16 = tile_of<float, tp::tile<tp::block<2, 8, 16>>>;
using f32_8x512 = tile_of<float, tp::tile<tp::block<8, 512>>>;                      // two 256-column panels
using f32_32x64_sw32 = tile_of<float, tp::tile<tp::block<32, 64>, tp::swizzle<32>>>;  // eight panels
using f32_32x32_boxes = tile_of<float, tp::tile<tp::block<32, 32>, tp::swizzle<0>, tp::box_rows<8>>>;  // four row boxes
using bf16_16x64_sw128 = tile_of<tp::bf16, tp::tile<tp::block<16, 64>, tp::swizzle<128>>>;
using bf16_8x128_sw64 = tile_of<tp::bf16, tp::tile<tp::block<8, 128>, tp::swizzle<64>>>;  // four panels
using bf16_sq_16x32_sw64 = tile_of<tp::bf16, tp::tile<tp::block<tp::squeezed, 16, 32>, tp::swizzle<64>>>;
using bf16_3x8x64_sw128 = tile_of<tp::bf16, tp::tile<tp::block<3, 8, 64>, tp::swizzle<128>>>;
using bf16_24x16 = tile_of<tp::bf16, tp::tile<tp::block<24, 16>>>;
using bf16_256 = tile_of<tp::bf16, tp::tile<tp::block<256>>>;  // 1-D

template <int... E>
using sg = tp::grid_t<E...>;  // static extents
using rg1 = tp::grid_t<-1>;   // run-time extents
using rg2 = tp::grid_t<-1, -1>;
using rg3 = tp::grid_t<-1, -1, -1>;

// Masks: bit a = grid axis a. An output whose map leaves out a faster axis than one it uses
// revisits blocks non-consecutively unless the drawn coefficients avoid it; the generator
// redraws such maps, so every mask is allowed.
using shapes = std::tuple<
    // emit_pipeline
    shape<f32_8x32, rg1, plain<1>, slots<2>, ins<in<1>>, outs<out<1>>>,
    shape<f32_8x32, rg2, plain<2>, slots<3, 1>, ins<in<3>, in<1>>, outs<out<1>>>,
    shape<f32_24x32_sw128, rg3, plain<3>, slots<4, 2>, ins<in<7>, in<0>, in<5, 0, 2>>, outs<out<3>, out<0>>>,
    shape<bf16_16x64_sw128, sg<3, 4>, plain<2>, slots<3>, ins<in<3, 2>, in<2>>, outs<out<1, 1>>>,
    shape<f32_16x16, rg2, plain<4>, slots<2, 1>, ins<in<2, 0>, in<3, 1, 3>>, outs<out<3>, out<1, 3>>>,
    shape<f32_sq_8x32, rg3, plain<2, true>, slots<2>, ins<in<6>, in<1>>, outs<out<3>>>,
    shape<f32_2x8x16, sg<2, 3, 2>, plain<1>, slots<5, 3>, ins<in<7>, in<4, 0>>, outs<out<7>, out<3, 2>>>,
    shape<f32_8x512, rg1, plain<2>, slots<2, 1>, ins<in<1>>, outs<out<1>>>,
    shape<f32_32x64_sw32, rg2, plain<2>, slots<2>, ins<in<3>, in<1, -1, 3>>, outs<out<2>>>,
    shape<f32_32x32_boxes, sg<7>, plain<4>, slots<3, 2>, ins<in<1>, in<0>>, outs<out<1>, out<0>>>,
    shape<bf16_8x128_sw64, rg3, plain<1, true>, slots<3, 1>, ins<in<3>, in<7, 2>, in<4>>, outs<out<1>>>,
    shape<bf16_sq_16x32_sw64, rg2, plain<2>, slots<4>, ins<in<3, 3>>, outs<out<3, 1>, out<1>>>,
    shape<bf16_3x8x64_sw128, sg<5, 1>, plain<3>, slots<2>, ins<in<1>, in<3>>, outs<out<1>>>,
    shape<bf16_24x16, rg1, plain<3, true>, slots<6, 5>, ins<in<1>, in<1, 0, 1>, in<0>>, outs<out<1>, out<1, 2>>>,
    shape<bf16_256, rg2, plain<1>, slots<1>, ins<in<3>, in<2>>, outs<out<1>>>,
    shape<f32_8x32, sg<0>, plain<1>, slots<3, 2>, ins<in<1>>, outs<out<1>>>,
    shape<f32_8x32, sg<1, 2>, plain<2>, slots<8, 4>, ins<in<3>, in<2, 1>>, outs<out<3>>>,
    shape<bf16_16x64_sw128, rg1, plain<1>, slots<4, 3>, ins<in<1, -1, 5>, in<0>>, outs<out<0>, out<1, 1>>>,
    // emit_pipeline_warp_specialized
    shape<f32_8x32, rg1, ws<1, 1>, slots<2>, ins<in<1>>, outs<out<1>>>,
    shape<f32_8x32, rg2, ws<2, 2>, slots<3, 1>, ins<in<3>, in<1>>, outs<out<1>>>,
    shape<f32_24x32_sw128, rg3, ws<3, 3>, slots<4, 2>, ins<in<7>, in<0>, in<5, 0, 2>>, outs<out<3>, out<0>>>,
    shape<f32_24x32_sw128, rg2, ws<3, 0>, slots<2>, ins<in<3, 1, 3>>, outs<out<1>>>,
    shape<f32_16x16, rg2, ws<2, 1, true>, slots<3>, ins<in<3>, in<1, -1, 1>>, outs<out<3>, out<1, 1>>>,
    shape<f32_sq_8x32, rg3, ws<2, 0, false, true>, slots<2>, ins<in<6>, in<1, 1, 3>>, outs<out<3>>>,
    shape<f32_2x8x16, sg<2, 3, 2>, ws<1, 0>, slots<5, 3>, ins<in<7>, in<4, 0>>, outs<out<7>, out<3, 2>>>,
    shape<f32_8x512, rg1, ws<2, 2, false, true>, slots<2, 1>, ins<in<1>>, outs<out<1>>>,
    shape<f32_32x64_sw32, rg2, ws<2, 1>, slots<2>, ins<in<3>, in<1, -1, 3>>, outs<out<2>>>,
    shape<f32_32x32_boxes, sg<7>, ws<2, 2, true, true>, slots<3>, ins<in<1>, in<0>>, outs<out<1>, out<0>>>,
    shape<bf16_8x128_sw64, rg3, ws<1, 1>, slots<3, 1>, ins<in<3>, in<7, 2>, in<4>>, outs<out<1>>>,
    shape<bf16_sq_16x32_sw64, rg2, ws<2, 2>, slots<4>, ins<in<3, 3>>, outs<out<3, 1>, out<1>>>,
    shape<bf16_3x8x64_sw128, sg<5, 1>, ws<3, 1>, slots<2>, ins<in<1>, in<3>>, outs<out<1>>>,
    shape<bf16_24x16, rg1, ws<3, 3, false, true>, slots<6, 5>, ins<in<1>, in<1, 0, 1>, in<0>>, outs<out<1>, out<1, 2>>>,
    shape<bf16_256, rg2, ws<1, 0, true>, slots<1>, ins<in<3>, in<2>>, outs<out<1>>>,
    shape<f32_8x32, sg<0>, ws<1, 1>, slots<3, 2>, ins<in<1>>, outs<out<1>>>,
    shape<f32_8x32, sg<1, 2>, ws<2, 0>, slots<8, 4>, ins<in<3>, in<2, 1>>, outs<out<3>>>,
    shape<bf16_16x64_sw128, rg1, ws<2, 2>, slots<4, 3>, ins<in<1, -1, 5>, in<0>>, outs<out<0>, out<1, 1>>>>;

constexpr int num_shapes = static_cast<int>(std::tuple_size_v<shapes>);

// ---- drawing -----------------------------------------------------------------------------------

struct random_source {
  std::mt19937_64 rng;
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }  // inclusive
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }
  template <class T>
  T pick(std::initializer_list<T> xs) {
    return xs.begin()[uniform(0, static_cast<int>(xs.size()) - 1)];
  }
};

/// Grid extents with at most max_steps steps (sometimes none).
std::array<int, max_axes> draw_extents(random_source& r, int rank, int slots) {
  std::array<int, max_axes> e{};
  if (rank == 1) {
    const int pick = r.uniform(0, 24);
    e[0] = pick == 0 ? 0 : pick <= 8 ? r.uniform(1, 4) : pick <= 13 ? std::max(1, slots + r.uniform(-1, 1)) : r.uniform(1, max_steps);
    return e;
  }
  long long steps = 1;
  for (int a = 0; a < rank; ++a) steps *= (e[a] = r.pick({1, 1, 2, 2, 3, 3, 4, 5, 6, 8}));
  for (int a = 0; steps > max_steps; a = (a + 1) % rank)
    if (e[a] > 1) steps = steps / e[a] * (e[a] - 1), --e[a];
  if (r.chance(0.05)) e[r.uniform(0, rank - 1)] = 0;
  return e;
}

/// Visits every step of a grid: f(at), in the pipelines' order (last axis fastest).
template <class F>
void for_each_step(const int* extents, int rank, F&& f) {
  long long steps = 1;
  for (int a = 0; a < rank; ++a) steps *= extents[a];
  int at[max_axes] = {};
  for (long long s = 0; s < steps; ++s) {
    f(at, s);
    for (int a = rank - 1; a >= 0; --a) {
      if (++at[a] < extents[a]) break;
      at[a] = 0;
    }
  }
}

dim_map draw_dim(random_source& r, unsigned mask, const int* extents, int grid_rank) {
  dim_map d;
  for (int a = 0; a < grid_rank; ++a)
    if ((mask >> a) & 1u) d.coef[a] = r.pick({1, 1, 1, 1, 2, 0, 0, -1, -1, 3});
  long long lo = 0, hi = 0;
  bool any = false;
  for_each_step(extents, grid_rank, [&](const int* at, long long) {
    long long e = 0;
    for (int a = 0; a < grid_rank; ++a) e += static_cast<long long>(d.coef[a]) * at[a];
    lo = any ? std::min(lo, e) : e, hi = any ? std::max(hi, e) : e, any = true;
  });
  d.offset = static_cast<int>(-lo) + (r.chance(0.2) ? r.uniform(1, 2) : 0);
  const int top = static_cast<int>(hi - lo) + d.offset;  // the largest linear value
  const int pick = r.uniform(0, 99);
  d.kind = pick < 50 ? map_kind::linear : pick < 62 ? map_kind::divided : pick < 75 ? map_kind::modulo
           : pick < 87 ? map_kind::clamp_high : map_kind::clamp_low;
  switch (d.kind) {
    case map_kind::linear: break;
    case map_kind::divided: d.param = r.uniform(2, 3); break;
    case map_kind::modulo: d.param = r.uniform(1, 4); break;
    case map_kind::clamp_high: d.param = r.uniform(0, top); break;
    case map_kind::clamp_low: d.param = r.uniform(0, top); break;
  }
  return d;
}

operand_map draw_map(random_source& r, unsigned mask, int rank, const int* extents, int grid_rank) {
  operand_map m;
  for (int d = 0; d < rank; ++d) m.dims[d] = draw_dim(r, mask, extents, grid_rank);
  return m;
}

/// Whether every output block is visited by consecutive steps only (required of outputs).
bool visits_are_consecutive(const operand_map& m, unsigned mask, int rank, const int* extents, int grid_rank) {
  std::vector<std::array<long long, max_dims>> seen;
  bool ok = true;
  for_each_step(extents, grid_rank, [&](const int* at, long long) {
    const auto b = host_blocks(m, mask, rank, 0, at, grid_rank);
    if (!seen.empty() && seen.back() == b) return;
    if (std::find(seen.begin(), seen.end(), b) != seen.end()) ok = false;
    seen.push_back(b);
  });
  return ok;
}

// ---- host tensors ------------------------------------------------------------------------------

/// A tensor view with padded strides inside a buffer with guard elements before and after it.
struct geometry {
  int rank = 0;
  long long shape[max_dims] = {}, stride[max_dims] = {};
  long long lead = 0, total = 0;  // guard elements before the view; buffer elements
  long long offset(const long long* e) const {
    long long o = lead;
    for (int d = 0; d < rank; ++d) o += e[d] * stride[d];
    return o;
  }
  std::string str() const {
    std::string s = "[";
    for (int d = 0; d < rank; ++d) s += (d ? "x" : "") + std::to_string(shape[d]);
    s += " strides";
    for (int d = 0; d < rank; ++d) s += " " + std::to_string(stride[d]);
    return s + " lead " + std::to_string(lead) + "]";
  }
};

geometry draw_geometry(random_source& r, int rank, const long long* extent, int elem_bytes) {
  const int chunk = 16 / elem_bytes;  // elements per 16 bytes: TMA strides are multiples of it
  geometry g;
  g.rank = rank;
  for (int d = 0; d < rank; ++d) g.shape[d] = extent[d];
  g.stride[rank - 1] = 1;
  for (int d = rank - 2; d >= 0; --d) {
    const long long tight = d == rank - 2 ? (g.shape[d + 1] + chunk - 1) / chunk * chunk : g.stride[d + 1] * g.shape[d + 1];
    g.stride[d] = tight + (r.chance(0.4) ? r.uniform(1, 3) * chunk : 0);
  }
  g.lead = r.uniform(0, 3) * chunk;
  long long last = 0;
  for (int d = 0; d < rank; ++d) last += (g.shape[d] - 1) * g.stride[d];
  g.total = g.lead + last + 1 + r.uniform(0, 2) * chunk + chunk;
  return g;
}

struct aligned_free {
  void operator()(void* p) const { std::free(p); }
};

template <class T>
struct host_buffer {
  std::unique_ptr<T, aligned_free> data;
  explicit host_buffer(long long count) {
    const std::size_t bytes = (static_cast<std::size_t>(count) * sizeof(T) + 255) / 256 * 256;
    data.reset(static_cast<T*>(std::aligned_alloc(256, bytes)));
  }
  T* get() const { return data.get(); }
};

template <class T>
T sentinel() {  // a NaN with a payload the pipelines never write (the interpreter poisons with all ones)
  if constexpr (std::is_same_v<T, float>) return std::bit_cast<float>(0x7fc5a5a5u);
  else return std::bit_cast<T>(static_cast<std::uint16_t>(0x7fa5));
}

// ---- one configuration -------------------------------------------------------------------------

/// What a configuration exercised (counted over a run of seeds, for the summary).
struct coverage {
  enum item {
    empty_pipeline,      // a pipeline of 0 steps
    chain,               // a CTA runs 2-4 pipelines
    several_ctas,        // 2-3 CTAs
    accumulation,        // an output block stays for 2 or more consecutive steps
    input_revisit,       // an input block comes back after other blocks
    input_edge,          // an input block overhangs its tensor (zero fill)
    input_outside,       // an input block lies wholly outside its tensor
    output_edge,         // a stored output block is clipped at the tensor's edge
    output_outside,      // a stored output block lies wholly outside (nothing written)
    count
  };
  static constexpr const char* names[count] = {"empty pipelines", "chains", "several CTAs", "accumulating outputs",
                                               "revisited inputs", "input edge blocks", "inputs wholly outside",
                                               "output edge blocks", "outputs wholly outside"};
  bool seen[count] = {};
};

struct outcome {
  bool ok = true;
  std::string shape, config, message;
  coverage covered;
};

/// The whole configuration, host side: what the kernel reads plus the launch.
struct drawn {
  kernel_config k;
  int ctas = 1;
  tp::interpret::options opts;
  geometry geo[max_ops];
};

std::string describe(const drawn& d, int n_in, int n_out, int grid_rank, int rank, const unsigned* masks) {
  static const char* copies[] = {"at_wait", "eager", "shuffled"};
  static const char* drivers[] = {"standalone calls", "hoisted allocations", "warp_specialized_for"};
  std::ostringstream o;
  o << d.ctas << " CTAs x " << d.k.chain << " pipelines (" << drivers[d.k.driver] << "); copies "
    << copies[static_cast<int>(d.opts.copies)] << (d.opts.shuffle_ctas ? ", shuffled CTAs" : "")
    << (d.opts.detect_races ? "" : ", race detection off") << (d.opts.no_pipelining ? ", no_pipelining" : "")
    << ", interpreter seed " << d.opts.seed;
  for (int p = 0; p < d.k.chain; ++p) {
    o << "\n    pipeline " << p << ": grid (";
    for (int a = 0; a < grid_rank; ++a) o << (a ? ", " : "") << d.k.extents[p][a];
    o << ")";
    for (int op = 0; op < n_in + n_out; ++op) {
      o << (op < n_in ? "; in" : "; out") << (op < n_in ? op : op - n_in) << " (";
      for (int dd = 0; dd < rank; ++dd) {
        const dim_map& m = d.k.maps[p][op].dims[dd];
        o << (dd ? ", " : "") << m.offset;
        for (int a = 0; a < grid_rank; ++a)
          if (((masks[op] >> a) & 1u) && m.coef[a]) o << (m.coef[a] > 0 ? "+" : "") << m.coef[a] << "*x" << a;
        if (m.kind != map_kind::linear) o << " " << map_kind_names[static_cast<int>(m.kind)] << " " << m.param;
      }
      o << ")";
    }
  }
  o << "\n    tensors:";
  for (int op = 0; op < n_in + n_out; ++op)
    o << (op < n_in ? " in" : " out") << (op < n_in ? op : op - n_in) << d.geo[op].str()
      << (d.k.span[op] ? " band " + std::to_string(d.k.span[op]) : "");
  o << "\n    coefficients:";
  for (int j = 0; j < n_out; ++j) {
    o << " out" << j << " = " << d.k.step_coef[j] << "*(step+1)";
    for (int i = 0; i < n_in; ++i) o << " + " << d.k.coef[j][i] << "*in" << i;
    o << ";";
  }
  return o.str();
}

template <class S>
outcome run_shape(random_source& r) {
  using T = typename S::T;
  using block = typename S::block;
  constexpr int R = S::rank, G = S::grid_rank, n_in = S::n_in, n_out = S::n_out, n_ops = n_in + n_out;
  constexpr bool exact = !std::is_same_v<T, float>;  // bf16: values whose sums are exact in float (see below)
  unsigned masks[max_ops] = {};
  for (int i = 0; i < n_in; ++i) masks[i] = S::in_masks[i];
  for (int j = 0; j < n_out; ++j) masks[n_in + j] = S::out_masks[j];
  long long block_dims[max_dims];
  for (int d = 0; d < R; ++d) block_dims[d] = block::size_at(d);

  drawn d;
  d.ctas = r.chance(0.6) ? 1 : r.uniform(2, max_ctas);
  d.k.chain = r.chance(0.5) ? 1 : r.uniform(2, max_chain);
  d.k.driver = S::kind::warp_specialized ? r.uniform(0, 2) : 0;
  const int instances = d.ctas * d.k.chain;

  // Grids and maps; redrawn whole when a tensor would be too large.
  long long extent[max_ops][max_dims];
  for (bool fits = false; !fits;) {
    for (int p = 0; p < d.k.chain; ++p) {
      if constexpr (S::grid_type::is_static)
        for (int a = 0; a < G; ++a) d.k.extents[p][a] = S::grid_type::static_extents[a];
      else {
        const auto e = draw_extents(r, G, S::mcs);
        for (int a = 0; a < G; ++a) d.k.extents[p][a] = e[a];
      }
      for (int op = 0; op < n_ops; ++op) {
        auto& m = d.k.maps[p][op];
        m = draw_map(r, masks[op], R, d.k.extents[p], G);
        if (op >= n_in)
          for (int tries = 0; !visits_are_consecutive(m, masks[op], R, d.k.extents[p], G); ++tries)
            m = tries < 20 ? draw_map(r, masks[op], R, d.k.extents[p], G) : operand_map{};  // constant: one run
      }
    }
    // Bands: outputs always (CTAs and chained pipelines write disjoint blocks), inputs sometimes.
    long long top[max_ops][max_dims];
    for (int op = 0; op < n_ops; ++op) {
      for (int dd = 0; dd < R; ++dd) top[op][dd] = -1;
      for (int p = 0; p < d.k.chain; ++p)
        for_each_step(d.k.extents[p], G, [&](const int* at, long long) {
          const auto b = host_blocks(d.k.maps[p][op], masks[op], R, 0, at, G);
          for (int dd = 0; dd < R; ++dd) top[op][dd] = std::max(top[op][dd], b[dd]);
        });
      d.k.span[op] = (op >= n_in || r.chance(0.5)) && instances > 1 ? static_cast<int>(top[op][0] + 1) : 0;
      if (top[op][0] >= 0) top[op][0] += static_cast<long long>(instances - 1) * d.k.span[op];
    }
    // Extents: the blocks the steps visit, give or take: edge blocks that overhang the end,
    // blocks wholly outside, untouched elements after the last block.
    fits = true;
    for (int op = 0; op < n_ops; ++op) {
      long long n = 1;
      for (int dd = 0; dd < R; ++dd) {
        const long long b = block_dims[dd], covered = (top[op][dd] + 1) * b;
        long long e = covered;
        const int pick = r.uniform(0, 99);
        if (covered == 0) e = r.uniform(1, static_cast<int>(2 * b));
        else if (pick < 30 && b > 1) e = covered - r.uniform(1, static_cast<int>(b) - 1);
        else if (pick < 42) e = covered - r.uniform(1, static_cast<int>(2 * b));
        else if (pick < 57) e = covered + r.uniform(1, static_cast<int>(b));
        e = std::max(e, 1LL);
        extent[op][dd] = e;
        n *= e;
      }
      fits = fits && n <= max_tensor_elements;
    }
  }
  for (int op = 0; op < n_ops; ++op) d.geo[op] = draw_geometry(r, R, extent[op], sizeof(T));
  for (int j = 0; j < n_out; ++j) {
    for (int i = 0; i < n_in; ++i) d.k.coef[j][i] = r.pick({-2.0f, -1.0f, -0.5f, 0.5f, 1.0f, 2.0f});
    d.k.step_coef[j] = r.pick({0.0f, 0.125f, 0.25f});
  }
  d.opts.copies = static_cast<tp::interpret::copy_mode>(r.uniform(0, 2));
  d.opts.shuffle_ctas = d.ctas > 1 && r.chance(0.5);
  d.opts.seed = r.rng();
  d.opts.detect_races = r.chance(0.9);
  d.opts.no_pipelining = r.chance(0.1);

  outcome result{true, S::describe(), describe(d, n_in, n_out, G, R, masks), ""};

  // Buffers: inputs hold random values and NaN in their padding and guards (TMA must read
  // zeros outside a view, never the memory next to it); outputs hold the sentinel everywhere.
  // bf16 values are multiples of 1/16 in [-4, 4] and the coefficients powers of two, so every
  // sum the body forms is exact in float and only the rounding to bf16 of each step's result
  // is inexact: the reference rounds there too and must match bit for bit.
  std::vector<host_buffer<T>> bufs;
  std::vector<std::vector<T>> before;
  std::uniform_real_distribution<float> value(-4.0f, 4.0f);
  for (int op = 0; op < n_ops; ++op) {
    const geometry& g = d.geo[op];
    bufs.emplace_back(g.total);
    T* p = bufs.back().get();
    const T fill = op < n_in ? tp::from_float<T>(NAN) : sentinel<T>();
    for (long long i = 0; i < g.total; ++i) p[i] = fill;
    if (op < n_in) {
      long long e[max_dims] = {};
      for (bool more = true; more;) {
        p[g.offset(e)] = tp::from_float<T>(exact ? static_cast<float>(r.uniform(-64, 64)) / 16.0f : value(r.rng));
        more = false;
        for (int dd = R - 1; dd >= 0 && !more; --dd) {
          if (++e[dd] < g.shape[dd]) more = true;
          else e[dd] = 0;
        }
      }
    }
    before.emplace_back(p, p + g.total);
  }

  // The reference: the steps of every CTA and pipeline in order, block by block.
  long long block_elems = 1;
  for (int dd = 0; dd < R; ++dd) block_elems *= block_dims[dd];
  std::vector<std::vector<double>> ref(n_out), tol(n_out);
  std::vector<std::vector<char>> written(n_out);
  for (int j = 0; j < n_out; ++j) {
    ref[j].assign(d.geo[n_in + j].total, 0.0);
    tol[j].assign(d.geo[n_in + j].total, 0.0);
    written[j].assign(d.geo[n_in + j].total, 0);
  }
  auto round_to_T = [](double v) { return exact ? static_cast<double>(tp::to_float(tp::from_float<T>(static_cast<float>(v)))) : v; };
  // Element e of block b of operand op: its buffer index, or -1 outside the view.
  auto element_at = [&](int op, const std::array<long long, max_dims>& b, long long e) {
    long long idx[max_dims];
    for (int dd = R - 1; dd >= 0; --dd) {
      idx[dd] = b[dd] * block_dims[dd] + e % block_dims[dd];
      e /= block_dims[dd];
      if (idx[dd] >= d.geo[op].shape[dd]) return -1LL;
    }
    return d.geo[op].offset(idx);
  };
  std::vector<double> x(static_cast<std::size_t>(n_in * block_elems));
  std::vector<double> acc(static_cast<std::size_t>(n_out * block_elems)), mag(acc.size());
  std::vector<long long> run_length(n_out);
  bool written_twice = false;  // a generator error: outputs must be revisited by consecutive steps only
  auto& seen = result.covered.seen;
  seen[coverage::chain] = d.k.chain > 1;
  seen[coverage::several_ctas] = d.ctas > 1;
  for (int cta = 0; cta < d.ctas; ++cta)
    for (int p = 0; p < d.k.chain; ++p) {
      const int instance = cta * d.k.chain + p;
      const int* ext = d.k.extents[p];
      long long steps = 1;
      for (int a = 0; a < G; ++a) steps *= ext[a];
      seen[coverage::empty_pipeline] |= steps == 0;
      std::vector<std::array<long long, max_dims>> out_blocks;  // of every step, for the runs
      std::vector<std::array<long long, max_dims>> in_blocks[max_in];  // the blocks each input moved to, in order
      for_each_step(ext, G, [&](const int* at, long long) {
        for (int j = 0; j < n_out; ++j) out_blocks.push_back(host_blocks(d.k.maps[p][n_in + j], masks[n_in + j], R, 0, at, G));
      });
      for_each_step(ext, G, [&](const int* at, long long s) {
        for (int i = 0; i < n_in; ++i) {
          const auto b = host_blocks(d.k.maps[p][i], masks[i], R, instance * d.k.span[i], at, G);
          if (in_blocks[i].empty() || in_blocks[i].back() != b) {
            seen[coverage::input_revisit] |= std::find(in_blocks[i].begin(), in_blocks[i].end(), b) != in_blocks[i].end();
            in_blocks[i].push_back(b);
          }
          long long inside = 0;
          for (long long e = 0; e < block_elems; ++e) {
            const long long at_e = element_at(i, b, e);
            inside += at_e >= 0;
            x[i * block_elems + e] = at_e < 0 ? 0.0 : static_cast<double>(tp::to_float(bufs[i].get()[at_e]));
          }
          seen[coverage::input_edge] |= inside > 0 && inside < block_elems;
          seen[coverage::input_outside] |= inside == 0;
        }
        for (int j = 0; j < n_out; ++j) {
          const auto& b = out_blocks[s * n_out + j];
          const bool first = s == 0 || out_blocks[(s - 1) * n_out + j] != b;
          const bool last = s + 1 == steps || out_blocks[(s + 1) * n_out + j] != b;
          run_length[j] = first ? 1 : run_length[j] + 1;
          seen[coverage::accumulation] |= run_length[j] > 1;
          for (long long e = 0; e < block_elems; ++e) {
            double v = d.k.step_coef[j] * static_cast<double>(s + 1), m = std::abs(v);
            for (int i = 0; i < n_in; ++i) {
              v += d.k.coef[j][i] * x[i * block_elems + e];
              m += std::abs(d.k.coef[j][i] * x[i * block_elems + e]);
            }
            double& a = acc[j * block_elems + e];
            double& mg = mag[j * block_elems + e];
            a = round_to_T(first ? v : a + v);
            mg = first ? m : mg + m;
          }
          if (!last) continue;
          auto banded = b;
          banded[0] += static_cast<long long>(instance) * d.k.span[n_in + j];
          long long inside = 0;
          for (long long e = 0; e < block_elems; ++e) {
            const long long at_e = element_at(n_in + j, banded, e);
            if (at_e < 0) continue;
            ++inside;
            written_twice |= written[j][at_e] != 0;
            written[j][at_e] = 1;
            ref[j][at_e] = acc[j * block_elems + e];
            // f32: each step rounds its n_in products and sums and the accumulation once,
            // by at most 2^-24 of the magnitudes summed so far.
            tol[j][at_e] = std::ldexp(mag[j * block_elems + e], -22) * static_cast<double>(run_length[j] * (n_in + 2) + 1);
          }
          seen[coverage::output_edge] |= inside > 0 && inside < block_elems;
          seen[coverage::output_outside] |= inside == 0;
        }
      });
    }

  if (written_twice) {
    result.ok = false;
    result.message = "test generator error: an output element is stored by two runs of steps";
    return result;
  }
  // A block wholly outside its tensor is an index-map bug the pipelines report.
  const bool outside = seen[coverage::input_outside] || seen[coverage::output_outside];

  // The launch.
  tp::device dev = test::dev();
  dev.interpreter = d.opts;
  std::array<tp::tensor_view<T, R>, n_ops> views;
  for (int op = 0; op < n_ops; ++op) {
    const geometry& g = d.geo[op];
    std::array<long long, R> shape{};
    for (int dd = 0; dd < R; ++dd) shape[dd] = g.shape[dd];
    views[op] = tp::tensor_view<T, R>::wrap(bufs[op].get() + g.lead, shape, false);
    for (int dd = 0; dd < R; ++dd) views[op].stride[dd] = g.stride[dd];
  }
  try {
    std::apply([&](const auto&... v) { tp::kernel(kernel_of<S>{d.k}, {.grid = {d.ctas}})(dev, v...); }, views);
  } catch (const tp::error& e) {
    // The report names the kernel by its (long) type: keep what follows it.
    std::string what = e.what();
    const auto cta = what.find(", CTA (");
    if (what.rfind("tilepipe: kernel ", 0) == 0 && cta != std::string::npos) what = "tilepipe: kernel" + what.substr(cta + 1);
    result.ok = outside && what.find("wholly outside the array's extent") != std::string::npos;
    if (!result.ok) result.message = what;
    return result;
  }
  if (outside) {
    result.ok = false;
    result.message = "a block wholly outside its tensor was not reported";
    return result;
  }

  // The comparison: stored elements against the reference, every other element unchanged.
  auto where = [&](int op, long long i) {
    const geometry& g = d.geo[op];
    std::string s = (op < n_in ? "in" : "out") + std::to_string(op < n_in ? op : op - n_in);
    long long rest = i - g.lead;
    if (rest < 0) return s + " guard before the view";
    long long idx[max_dims];
    for (int dd = 0; dd < R; ++dd) idx[dd] = rest / g.stride[dd], rest %= g.stride[dd];
    std::string at = " element (";
    bool inside = true;
    for (int dd = 0; dd < R; ++dd) {
      at += (dd ? ", " : "") + std::to_string(idx[dd]);
      inside = inside && idx[dd] < g.shape[dd];
    }
    return s + at + ")" + (inside ? "" : " (padding or guard)");
  };
  int reported = 0;
  std::ostringstream msg;
  for (int op = 0; op < n_ops && reported < 5; ++op) {
    const T* p = bufs[op].get();
    for (long long i = 0; i < d.geo[op].total && reported < 5; ++i) {
      const bool stored = op >= n_in && written[op - n_in][i];
      if (!stored) {
        if (std::memcmp(&p[i], &before[op][i], sizeof(T)) != 0) {
          msg << "\n    " << where(op, i) << " changed: " << tp::to_float(before[op][i]) << " -> " << tp::to_float(p[i]);
          ++reported;
        }
        continue;
      }
      const double got = tp::to_float(p[i]), want = ref[op - n_in][i];
      const bool good = exact ? got == want : std::abs(got - want) <= tol[op - n_in][i];
      if (!good) {
        msg << "\n    " << where(op, i) << " is " << got << ", want " << want;
        ++reported;
      }
    }
  }
  if (reported) {
    result.ok = false;
    result.message = "wrong values:" + msg.str();
  }
  return result;
}

template <std::size_t... I>
constexpr auto make_runners(std::index_sequence<I...>) {
  return std::array<outcome (*)(random_source&), sizeof...(I)>{&run_shape<std::tuple_element_t<I, shapes>>...};
}
constexpr auto runners = make_runners(std::make_index_sequence<num_shapes>{});

/// Configuration `seed`: everything follows from it. The shape is seed % num_shapes, so any
/// num_shapes consecutive seeds run every shape once.
outcome run_seed(std::uint64_t seed) {
  random_source r{std::mt19937_64(seed)};
  return runners[seed % num_shapes](r);
}

// ---- seeds: fixed ones for CI, or from the command line ----------------------------------------

bool verbose = false;  // --verbose: print every configuration

constexpr int ci_seeds = 40 * num_shapes;  // 1440: each shape 40 times, about 30 s in all
constexpr int ci_shards = 4;

/// Runs seeds [first, first + count); prints failures (and, when `progress`, a running count).
int run_seeds(std::uint64_t first, long long count, bool progress) {
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  int failures = 0;
  long long covered[coverage::count] = {};
  for (long long n = 0; n < count; ++n) {
    const std::uint64_t seed = first + static_cast<std::uint64_t>(n);
    const outcome o = run_seed(seed);
    for (int c = 0; c < coverage::count; ++c) covered[c] += o.covered.seen[c];
    if (verbose && o.ok)
      std::printf("ok seed %llu: %s\n    %s\n", static_cast<unsigned long long>(seed), o.shape.c_str(), o.config.c_str());
    if (!o.ok) {
      ++failures;
      std::printf("FAILED seed %llu: %s\n    %s\n    %s\n    replay: --first-seed %llu --seeds 1\n",
                  static_cast<unsigned long long>(seed), o.shape.c_str(), o.config.c_str(), o.message.c_str(),
                  static_cast<unsigned long long>(seed));
      std::fflush(stdout);
    }
    if (progress && (n + 1) % 250 == 0) {
      std::printf("  %lld of %lld configurations, %d failed, %.0f s\n", n + 1, count, failures, seconds());
      std::fflush(stdout);
    }
  }
  std::printf("random pipelines: seeds %llu..%llu: %lld configurations, %d failed, %.1f s\n  with",
              static_cast<unsigned long long>(first), static_cast<unsigned long long>(first + count - 1), count,
              failures, seconds());
  for (int c = 0; c < coverage::count; ++c) std::printf("%s %s %lld", c ? "," : "", coverage::names[c], covered[c]);
  std::printf("\n");
  return failures;
}

class RandomPipelines : public testing::TestWithParam<int> {};

TEST_P(RandomPipelines, FixedSeeds) {
  constexpr int per_shard = ci_seeds / ci_shards;
  EXPECT_EQ(run_seeds(1 + static_cast<std::uint64_t>(GetParam()) * per_shard, per_shard, false), 0);
}
INSTANTIATE_TEST_SUITE_P(CI, RandomPipelines, testing::Range(0, ci_shards));

}  // namespace

/// --seeds N [--first-seed S] [--verbose]: runs those seeds instead of the tests; other
/// arguments go to GoogleTest.
int main(int argc, char** argv) {
  long long seeds = 0;
  std::uint64_t first = 1;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const std::string f = flag;
      if (a == f && i + 1 < argc) return argv[++i];
      if (a.rfind(f + "=", 0) == 0) return argv[i] + f.size() + 1;
      return nullptr;
    };
    if (const char* v = value("--seeds")) seeds = std::atoll(v);
    else if (const char* v2 = value("--first-seed")) first = std::strtoull(v2, nullptr, 10);
    else if (a == "--verbose") verbose = true;
    else argv[kept++] = argv[i];
  }
  if (seeds > 0) return run_seeds(first, seeds, true) == 0 ? 0 : 1;
  argc = kept;
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
