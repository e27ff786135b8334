// The elementwise and the non-specialised matmul examples written with tp::pallas_call:
// a body, a grid with its dimension semantics, block specs, output shapes. Compare
// examples/elementwise and examples/matmul, which write the kernel and its emit_pipeline
// by hand.
#pragma once

#include <tilepipe/tilepipe.cuh>

namespace tp = tilepipe;

namespace pallas_examples {

inline int cdiv(long long n, int d) { return static_cast<int>((n + d - 1) / d); }

/// y = a * x + b, one block per step.
struct axpb_body {
  float a, b;
  TP_HD void operator()(tp::kernel_context&, tp::index<2>, auto x, auto y) const {
    tp::map([a = a, b = b](float v) { return a * v + b; }, y, x);
  }
};

/// y = a * x + b over a rows x cols tensor: one CTA per band of BR rows, which pipelines
/// over the band's column blocks (In input slots, 2 output slots).
template <class T, int BR = 32, int BC = 256, int In = 4>
auto axpb(long long rows, long long cols, float a, float b) {
  using tile = tp::tile<tp::block<BR, BC>>;
  return tp::pallas_call(axpb_body{a, b}, tp::grid(cdiv(rows, BR), cdiv(cols, BC)),
                         tp::in_specs(tp::spec<tile>(tp::axes_map<0, 1>{})),
                         tp::out_specs(tp::spec<tile>(tp::axes_map<0, 1>{}, tp::buffered<2>)),
                         tp::out_shape(tp::out_type<T>(rows, cols)),
                         tp::dimension_semantics<tp::parallel, tp::sequential>, tp::max_concurrent_steps<In>);
}

/// C = A * B, grid (m, n, k) (or (tile, k): KAxis says where k is): each of the WGs
/// warpgroups accumulates BM / WGs rows of the C block in registers (its scratch) and
/// writes them to the output block at the last k step. One wgmma stays in flight across
/// steps, hence delay_release<1>.
template <int BM, int BN, int WGs, int KAxis = 2>
struct matmul_body {
  static constexpr int num_threads = WGs;
  static constexpr int WM = BM / WGs;
  int k_steps;

  TP_HD tp::accumulator<WM, BN> scratch(tp::kernel_context&) const { return tp::zeros<float, WM, BN>(); }

  template <int N>
  TP_HD void operator()(tp::kernel_context& ctx, tp::index<N> at, auto a, auto b, auto c,
                        tp::accumulator<WM, BN>& acc) const {
    const int rows = ctx.thread_index() * WM;
    tp::wgmma(acc, tp::rows<WM>(a, rows), b, at[KAxis] > 0);  // the first k step overwrites
    tp::wgmma_wait<1>();
    if (at[KAxis] + 1 == k_steps) {
      tp::wgmma_wait<0>(acc);
      tp::store(tp::rows<WM>(c, rows), acc);
    }
  }
};

/// C (M x N) = A (M x K) * B (K x N), row-major bf16 or f16. Semantics picks which of the
/// m and n axes are parallel (k is sequential: it accumulates into one output block). BK
/// columns of A per step: 64 (128-byte swizzled rows) or 32 (64-byte rows, half the SMEM
/// per stage).
template <class T, int BM = 128, int BN = 256, int Stages = 4, int WGs = 2,
          class Semantics = tp::dimension_semantics_t<tp::parallel, tp::parallel, tp::sequential>, int BK = 64>
auto matmul(long long M, long long N, long long K) {
  using a_tile = tp::tile<tp::block<BM, BK>, tp::swizzle<BK * sizeof(T)>>;
  using b_tile = tp::tile<tp::block<BK, BN>, tp::swizzle<128>>;
  using c_tile = tp::tile<tp::block<BM, BN>, tp::swizzle<128>>;
  const int k_steps = cdiv(K, BK);
  return tp::pallas_call(matmul_body<BM, BN, WGs>{k_steps}, tp::grid(cdiv(M, BM), cdiv(N, BN), k_steps),
                         tp::in_specs(tp::spec<a_tile>(tp::axes_map<0, 2>{}), tp::spec<b_tile>(tp::axes_map<2, 1>{})),
                         tp::out_specs(tp::spec<c_tile>(tp::axes_map<0, 1>{}, tp::buffered<1>)),
                         tp::out_shape(tp::out_type<T>(M, N)), Semantics{}, tp::max_concurrent_steps<Stages>,
                         tp::delay_release<1>);
}

/// The grouped tile order (tp::grouped_tile_order) as index maps, written with operations
/// the axis analysis follows: tile t of a one-axis parallel grid is C block (m(t), n(t)),
/// bands of `group` block rows walked column by column, so that the CTAs running at once
/// share blocks of A and B in L2.
struct grouped_tiles {
  int tiles_m, tiles_n, group;
  template <class I>
  TP_HD constexpr auto band_rows(I t) const {  // rows of t's band: group, fewer in the last
    return tp::min(group, tiles_m - (t / (group * tiles_n)) * group);
  }
  template <class I>
  TP_HD constexpr auto in_band(I t) const {
    return t - (t / (group * tiles_n)) * (group * tiles_n);
  }
  template <class I>
  TP_HD constexpr auto m(I t) const {
    return (t / (group * tiles_n)) * group + in_band(t) - (in_band(t) / band_rows(t)) * band_rows(t);
  }
  template <class I>
  TP_HD constexpr auto n(I t) const {
    return in_band(t) / band_rows(t);
  }
};
struct grouped_a_map {
  grouped_tiles g;
  TP_HD constexpr auto operator()(auto t, auto k) const { return tp::idx(g.m(t), k); }
};
struct grouped_b_map {
  grouped_tiles g;
  TP_HD constexpr auto operator()(auto t, auto k) const { return tp::idx(k, g.n(t)); }
};
struct grouped_c_map {
  grouped_tiles g;
  TP_HD constexpr auto operator()(auto t, auto) const { return tp::idx(g.m(t), g.n(t)); }
};

/// The same matmul over grid (tile, k), the tiles in grouped order (what the hand-written
/// examples/matmul does).
template <class T, int BM = 128, int BN = 256, int Stages = 4, int WGs = 2, int BK = 64>
auto matmul_grouped(long long M, long long N, long long K, int group = 8) {
  using a_tile = tp::tile<tp::block<BM, BK>, tp::swizzle<BK * sizeof(T)>>;
  using b_tile = tp::tile<tp::block<BK, BN>, tp::swizzle<128>>;
  using c_tile = tp::tile<tp::block<BM, BN>, tp::swizzle<128>>;
  const int k_steps = cdiv(K, BK), tiles_m = cdiv(M, BM), tiles_n = cdiv(N, BN);
  const grouped_tiles g{tiles_m, tiles_n, group < tiles_m ? group : tiles_m};
  return tp::pallas_call(matmul_body<BM, BN, WGs, 1>{k_steps}, tp::grid(tiles_m * tiles_n, k_steps),
                         tp::in_specs(tp::spec<a_tile>(grouped_a_map{g}), tp::spec<b_tile>(grouped_b_map{g})),
                         tp::out_specs(tp::spec<c_tile>(grouped_c_map{g}, tp::buffered<1>)),
                         tp::out_shape(tp::out_type<T>(M, N)), tp::dimension_semantics<tp::parallel, tp::sequential>,
                         tp::max_concurrent_steps<Stages>, tp::delay_release<1>);
}

}  // namespace pallas_examples
