// Activations to fp8 (e4m3) with f32 scales, the input of an fp8 GEMM:
//     scale(r, g) = amax(r, g) / 448,   q(r, c) = e4m3(x(r, c) * 448 / amax(r, g)),   x ~= q * scale
// amax(r, g) is the largest |x| of row r in column group g: 128 columns (DeepSeek-V3's 1 x 128
// activation blocks, DeepGEMM's scales [M, ceil(K / 128)]) or the whole row (torch._scaled_mm's
// row-wise scale_a [M, 1]). The conversion rounds to nearest even and saturates at +-448
// (cvt.rn.satfinite on the GPU, the same rounding in the interpreter). A group of zeros gets
// scale 0 and q 0.
//
//     tp::quantize_fp8(dev, x, q, scales);                     // x [M, K] bf16, f16 or f32
//     tp::quantize_fp8(dev, x, q, scales, {.group = 0});        // one scale per row
//
// The kernel streams x through SMEM in blocks of 64 rows x 128 columns (one warpgroup per
// block of rows; the CTAs of a row block split its column blocks between them when the rows
// alone do not fill the GPU). With 128-column groups one pass suffices: the block is its
// group. With row-wise scales a first pipeline finds each row's amax, a second converts (x is
// read twice, as the softmax example's statistics and output passes).
#pragma once

#include "../tilepipe.cuh"

#include <cmath>

namespace tilepipe {

struct quantize_options {
  int group = 128;         // columns per scale: 128, or 0 for one scale per row
  void* stream = nullptr;  // cudaStream_t (GPU)
};

template <class T, bool RowWise>
struct quantize_fp8_kernel {
  static constexpr int num_threads = 1;  // one warpgroup: 64 rows
  static constexpr int BR = 64, BC = 128, InSlots = 4, OutSlots = 2;
  static constexpr float fp8_max = 448.0f;  // e4m3's largest finite value
  using x_tile = tile<block<BR, BC>, swizzle<128>>;
  using q_tile = tile<block<BR, BC>, swizzle<128>>;

  int rows = 0, col_blocks = 0, blocks_per_cta = 0;
  float* scales = nullptr;
  long long scale_row_stride = 0, scale_group_stride = 0;

  TP_HD void operator()(kernel_context& ctx, gmem<T, 2, x_tile> x, gmem<fp8_e4m3, 2, q_tile> q) const {
    const int row_block = ctx.axis_index(0), first = ctx.axis_index(1) * blocks_per_cta;
    const int blocks = min(blocks_per_cta, col_blocks - first);
    if (blocks <= 0) return;
    auto block_of = [=](auto j) { return idx(row_block, first + j); };
    const auto in_spec = spec<x_tile>(block_of, buffered<InSlots>);
    const auto out_spec = spec<q_tile>(block_of, buffered<OutSlots>);
    const int row0 = row_block * BR;
    auto scales_of = [&](int group) {  // this block's rows of one column group's scales
      gmem_ref<float, 1> dst;
      dst.data = scales + row0 * scale_row_stride + group * scale_group_stride;
      dst.shape[0] = rows - row0, dst.stride[0] = scale_row_stride;
      return dst;
    };
    auto abs_max = [](const auto& f) { return row_max(map(f, [](float v) { return fabsf(v); })); };
    auto convert = [](const auto& f, const row_vector<BR>& amax, auto q_smem) {
      const auto inv = map(amax, [](float a) { return a > 0.0f ? fp8_max / a : 0.0f; });
      store(q_smem, broadcast_rows(f, inv, [](float v, float s) { return v * s; }));
    };

    if constexpr (!RowWise) {
      auto step = [&](index<1> at, auto x_smem, auto q_smem) {
        const auto f = load<float>(x_smem);
        const row_vector<BR> amax = abs_max(f);
        convert(f, amax, q_smem);
        store(scales_of(first + at[0]), amax / fp8_max);
      };
      emit_pipeline(step, grid(blocks), in_specs(in_spec), out_specs(out_spec))(ctx, x, q);
    } else {
      auto running_max = [&](index<1>, auto x_smem, row_vector<BR> m) { return max(m, abs_max(load<float>(x_smem))); };
      const row_vector<BR> amax =
          emit_pipeline(running_max, grid(blocks), in_specs(in_spec))(ctx, carry(full<row_vector<BR>>(0.0f)), x);
      auto step = [&](index<1>, auto x_smem, auto q_smem) { convert(load<float>(x_smem), amax, q_smem); };
      emit_pipeline(step, grid(blocks), in_specs(in_spec), out_specs(out_spec))(ctx, x, q);
      store(scales_of(0), amax / fp8_max);
    }
  }

  static constexpr std::size_t smem_bytes = InSlots * BR * BC * sizeof(T) + OutSlots * BR * BC + 1024;
};

/// Quantises x [M, K] (bf16, f16 or f32) to q [M, K] e4m3 with f32 scales [M, ceil(K / 128)]
/// (opt.group 128) or [M, 1] (opt.group 0); see the top of this file. K is a multiple of 16
/// (TMA's 16-byte rows of q).
template <class T>
void quantize_fp8(const device& dev, const tensor_view<T, 2>& x, const tensor_view<fp8_e4m3, 2>& q,
                  const tensor_view<float, 2>& scales, const quantize_options& opt = {}) {
  const long long m = x.shape[0], k = x.shape[1];
  if (opt.group != 0 && opt.group != 128)
    detail::throw_formatted("quantize_fp8: group is 128 (1 x 128 blocks) or 0 (one scale per row), got %d", opt.group);
  if (q.shape[0] != m || q.shape[1] != k)
    detail::throw_formatted("quantize_fp8: q is %lld x %lld, x %lld x %lld", q.shape[0], q.shape[1], m, k);
  const long long groups = opt.group == 0 ? 1 : (k + 127) / 128;
  if (scales.shape[0] != m || scales.shape[1] != groups)
    detail::throw_formatted("quantize_fp8: scales must be %lld x %lld (rows x %s), got %lld x %lld", m, groups,
                            opt.group == 0 ? "1" : "column groups of 128", scales.shape[0], scales.shape[1]);
  if (k % 16 != 0) detail::throw_formatted("quantize_fp8: K = %lld is not a multiple of 16 (q's rows for TMA)", k);
  if (m == 0 || k == 0) return;
  host::require_tma_rows(x, "quantize_fp8", "x"), host::require_tma_rows(q, "quantize_fp8", "q");
  const int row_blocks = static_cast<int>((m + 63) / 64), col_blocks = static_cast<int>((k + 127) / 128);
  auto run = [&](auto kern) {
    // Split the column blocks over CTAs until the grid covers the GPU twice (128-column groups only).
    const int sms = dev.is_gpu() ? dev.multiprocessors() : 4;
    int splits = 1;
    if (opt.group != 0)
      while (splits < col_blocks && row_blocks * splits < 2 * sms) splits *= 2;
    kern.rows = static_cast<int>(m), kern.col_blocks = col_blocks;
    kern.blocks_per_cta = (col_blocks + splits - 1) / splits;
    kern.scales = scales.data, kern.scale_row_stride = scales.stride[0], kern.scale_group_stride = scales.stride[1];
    const int ctas_per_row = (col_blocks + kern.blocks_per_cta - 1) / kern.blocks_per_cta;
    kernel(kern, launch_config{.grid = {row_blocks, ctas_per_row}, .smem_bytes = decltype(kern)::smem_bytes,
                               .stream = opt.stream})(dev, x, q);
  };
  if (opt.group == 0) run(quantize_fp8_kernel<T, true>{});
  else run(quantize_fp8_kernel<T, false>{});
}

}  // namespace tilepipe
