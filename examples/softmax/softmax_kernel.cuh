// Row softmax of a bf16 [rows, cols] tensor with any column count:
//     y(r, c) = exp(x(r, c) - m(r)) / l(r),   m(r) = max_c x(r, c),   l(r) = sum_c exp(x(r, c) - m(r)).
//
// Each CTA owns one block of 64 * WGs rows (64 per warpgroup: the rows of one fragment) and
// runs two pipelines over its column blocks, as Pallas' softmax examples do with
// emit_pipeline:
//   1. online statistics: for each column block, the running row max m and the running sum
//      l of exp(x - m), rescaled by exp(m_old - m_new) when the max grows; the pipeline's
//      carry holds (m, l) between steps;
//   2. output: y = exp(x - m) / l for each column block.
// x is read twice and y written once; rows of any length take one pass of statistics, not
// a whole row in SMEM. Everything is computed in log2 units (exp2 is the GPU's instruction).
// Columns past the end of a row are zero-filled by TMA in the last column block: pass 1
// sets them to -inf so that they add nothing, and TMA drops them when pass 2 stores.
#pragma once

#include <tilepipe/tilepipe.cuh>

#include <cmath>

namespace tp = tilepipe;

template <int WGs, int BC, int InSlots, int OutSlots>
struct softmax_kernel {
  static constexpr int num_threads = WGs;
  static constexpr int BR = 64 * WGs;  // rows per CTA
  using x_tile = tp::tile<tp::block<BR, BC>, tp::swizzle<128>>;

  int rows, cols, col_blocks;

  /// Running statistics of this warpgroup's 64 rows, in log2 units.
  struct stats {
    tp::row_vector<64> m, l;
  };

  TP_HD void operator()(tp::kernel_context& ctx, tp::gmem<tp::bf16, 2, x_tile> x, tp::gmem<tp::bf16, 2, x_tile> y) const {
    const int row_block = ctx.axis_index(0), wg = ctx.thread_index(), n = cols;
    // x * log2(e) for this warpgroup's rows of the column block the step `at` reads;
    // columns past the end of the row are -inf.
    auto scaled_block = [=](tp::index<1> at, auto x_smem) {
      const int col0 = at[0] * BC;
      return tp::map(tp::load<float>(tp::rows<64>(x_smem, 64 * wg)),
                     [=](float v, int, int c) { return col0 + c < n ? v * 1.44269504f : -INFINITY; });
    };
    auto block_of = [=](auto j) { return tp::idx(row_block, j); };
    const auto in_spec = tp::spec<x_tile>(block_of, tp::buffered<InSlots>);
    const auto out_spec = tp::spec<x_tile>(block_of, tp::buffered<OutSlots>);

    auto statistics = [=](tp::index<1> at, auto x_smem, stats st) {
      const auto s = scaled_block(at, x_smem);
      const auto m = tp::max(st.m, tp::row_max(s));
      return stats{m, st.l * tp::exp2(st.m - m) + tp::row_sum(tp::exp2(s - m))};
    };
    const stats start{tp::full<tp::row_vector<64>>(-INFINITY), tp::full<tp::row_vector<64>>(0.0f)};
    const stats st = tp::emit_pipeline(statistics, tp::grid(col_blocks), tp::in_specs(in_spec))(ctx, tp::carry(start), x);

    const auto inv_l = 1.0f / st.l;
    auto output = [=](tp::index<1> at, auto x_smem, auto y_smem) {
      tp::store(tp::rows<64>(y_smem, 64 * wg), tp::exp2(scaled_block(at, x_smem) - st.m) * inv_l);
    };
    auto writer = tp::emit_pipeline(output, tp::grid(col_blocks), tp::in_specs(in_spec), tp::out_specs(out_spec));
    static_assert(decltype(writer)::template smem_bytes<decltype(x), decltype(y)> <= smem_bytes);
    writer(ctx, x, y);
  }

  /// Dynamic SMEM per CTA: the second pipeline's input and output slots and its barriers
  /// (checked above; the first needs less), so that small configurations share an SM.
  static constexpr std::size_t smem_bytes = (InSlots + OutSlots) * BR * BC * sizeof(tp::bf16) + 1024;

  /// The kernel for a rows x cols tensor: one CTA per block of BR rows.
  static softmax_kernel make(long long rows, long long cols) {
    return {static_cast<int>(rows), static_cast<int>(cols), static_cast<int>((cols + BC - 1) / BC)};
  }
  tp::launch_config config() const { return {.grid = {(rows + BR - 1) / BR}, .smem_bytes = smem_bytes}; }
};
