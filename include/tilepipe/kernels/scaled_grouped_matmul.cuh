// The fp8 grouped matmul of a mixture-of-experts layer (torch._scaled_grouped_mm's operation;
// with block scales, DeepGEMM's m_grouped contiguous and masked kernels):
//     out[M, N] = dequant(a[M, K]) . dequant(b[g(row)])^T     rows of a sorted by group, b [G, N, K]
//
//     tp::scaled_grouped_matmul(dev, a, b, scale_a, scale_b, offsets, out);        // offsets: device int[G]
//     tp::scaled_grouped_matmul_masked(dev, a, b, scale_a, scale_b, counts, out);  // a [G, Mmax, K]
//
// The scales' shapes choose the recipe, as torch._scaled_grouped_mm's do:
//   row-wise  scale_a [M] (masked: [G, Mmax]) and scale_b [G, N]: a scale per token row and per
//             output column of each group's weights, applied to the f32 sums in the epilogue
//             (torch._scaled_grouped_mm's recipe on Hopper; the tensor core's accumulator
//             holds the whole K, as its use_fast_accum=True);
//   block     scale_a [M, ceil(K/128)] and scale_b [G, ceil(N/128), ceil(K/128)]
//             (DeepSeek-V3's 1 x 128 and 128 x 128 blocks; below).
//
// a and b are fp8 (e4m3, or e5m2; one type for both) with K contiguous, the K-major layout
// fp8 wgmma reads (b as nn.Linear keeps each expert's weights); out is bf16. The scales are
// f32 in device memory, x ~= q * scale (tp::quantize_fp8 writes a's): scale_a [M, ceil(K/128)]
// per token row and 128 of K, scale_b [G, ceil(N/128), ceil(K/128)] per group and 128 x 128
// block of its weights:
//     out(i, j) = sum_kb scale_a(i, kb) * scale_b(g, j / 128, kb) * sum_{k in block kb} a(i, k) b(g, j, k)
// with g the group of row i; a K that is not a multiple of 128 ends in a partial block, which
// TMA zero-fills.
//
// Both are tp::grouped_matmul's kernel (grouped_matmul_kernel: the group table prefetched on
// the device, tiles per group, rows past a group's end never stored). Row-wise: 128 x 256
// tiles and 128-wide k-steps, as tp::scaled_matmul's row-wise mode. Block: tp::scaled_matmul's
// block-scaled k-step (promoting_k_step: each 128 of K's product scaled into the f32
// accumulator in registers) and its scales (scale_epilogue<fp8_scaling::block>), in 128 x 128
// tiles. B's scales (one per k-block for a tile) are staged in SMEM by each compute warpgroup
// before the tile's first step (the first 128; later ones are read from global memory);
// A's as tp::scaled_matmul reads them: M-major (tp::m_major_scales: [ceil(K/128), ld] storage,
// ld >= M a multiple of 4) through SMEM, loaded by TMA beside A's block (with_a_scales; the
// box starts at the 16-byte boundary at or before the tile's first row, which may be any
// row), else with plain loads by the compute warpgroups.
#pragma once

#include "grouped_matmul.cuh"
#include "scaled_matmul.cuh"

namespace tilepipe {

struct scaled_grouped_matmul_options {
  void* stream = nullptr;  // cudaStream_t (GPU)
};

/// The row-wise scales of a grouped matmul: out(i, j) = sa(i) * sb(g, j) * sum_k a(i, k) b(g, j, k),
/// g the group of row i, applied to a tile's f32 sums (grouped_matmul_kernel passes the group).
struct group_row_scales {
  scale_matrix a;  // [rows, 1]
  scale_matrix b;  // [G, N]

  template <int M, int N>
  TP_HD accumulator<M, N> apply(const accumulator<M, N>& acc, long long row0, long long col0, int group) const {
    // A row before the first (a tile of impossible offsets, whose rows are not stored) reads row 0.
    const long long r0 = row0 > 0 ? row0 : 0;
    const auto sa = map(full<row_vector<M>>(0.0f), [&](float, int r) { return a(r0 + r, 0); });
    const accumulator<M, N> by_rows = broadcast_rows(acc, sa, [](float v, float s) { return v * s; });
    if (const float* sb = b.contiguous_in_row(group, col0, N))  // all but the last tile column
      return map(by_rows, [&](float v, int, int c) { return v * sb[c]; });
    return map(by_rows, [&](float v, int, int c) { return v * b(group, col0 + c); });
  }
};

/// The row-wise kernel: tp::scaled_matmul's row-wise tiles (128 x 256, 128 of K a step) in
/// the grouped kernel's 3 stages of 48 KB and 64 x 64 epilogue chunks, the memory warpgroup
/// at 40 registers so that the compute warpgroups keep 232 for the accumulator and a thread's
/// 64 column scales.
template <class T>
using scaled_grouped_matmul_row_wise_kernel =
    grouped_matmul_kernel<T, rhs_layout::nk, 128, 256, 3, 128, bf16, group_row_scales, 40>;

/// The block-scaled kernel: 128 x 128 tiles (a tile's columns in one
/// block of B's scales; three 64 x 128 accumulators a thread: the sum and two k-blocks'
/// products), 2 x 128 of K a step, 3 stages (64 KB each, the epilogue's 16 KB and the group
/// tables' 3 KB beside them), the memory warpgroup at 40 registers so that the compute
/// warpgroups keep 232, as in the dense block-scaled kernel. (At 48 the setmaxnreg pool of a
/// 168-register launch, 3 x 168 a thread, cannot give 48 + 2 x 232: the interpreter reports
/// the deadlock; at the bf16 grouped kernel's 56 the compute warpgroups would get 224, and
/// ptxas spills as much.)
template <class T, class Scales>
using scaled_grouped_matmul_kernel = grouped_matmul_kernel<T, rhs_layout::nk, 128, 128, 3, 128, bf16, Scales, 40, 32>;

namespace scaled_grouped_matmul_detail {

/// Checks the scales' shapes and launches: a is [rows, K] (the masked layout's groups
/// stacked), scale_a [rows, ceil(K/128)], scale_b [G, ceil(N/128), ceil(K/128)].
template <class T>
void run(const char* fn, const device& dev, const tensor_view<T, 2>& a, const tensor_view<T, 3>& b,
         const tensor_view<float, 2>& scale_a, const tensor_view<float, 3>& scale_b, const int* group_table,
         int groups, int masked_stride, const tensor_view<bf16, 2>& out, const scaled_grouped_matmul_options& opt) {
  static_assert(wgmma_fp8_type<T>, "tilepipe: scaled_grouped_matmul multiplies fp8 operands (fp8_e4m3 or fp8_e5m2)");
  using epilogue_t = scale_epilogue<fp8_scaling::block, no_epilogue>;
  using kernel_t = scaled_grouped_matmul_kernel<T, epilogue_t>;
  kernel_t kern;
  const bool any_rows = grouped_matmul_detail::prepare(kern, fn, a, b, rhs_layout::nk, group_table, groups,
                                                       masked_stride, out, "a", "b");
  const long long M = a.shape[0], K = a.shape[1], N = b.shape[1], kb = (K + 127) / 128, nb = (N + 127) / 128;
  if (scale_a.shape[0] != M || scale_a.shape[1] != kb)
    detail::throw_formatted("%s: scale_a is [%lld, %lld], expected [%lld, %lld] (a row's scale per 128 of K = %lld)", fn,
                            scale_a.shape[0], scale_a.shape[1], M, kb, K);
  if (scale_b.shape[0] != groups || scale_b.shape[1] != nb || scale_b.shape[2] != kb)
    detail::throw_formatted("%s: scale_b is [%lld, %lld, %lld], expected [%lld, %lld, %lld] (a group's scale per 128 x "
                            "128 block of its N = %lld x K = %lld weights)",
                            fn, scale_b.shape[0], scale_b.shape[1], scale_b.shape[2], static_cast<long long>(groups), nb,
                            kb, N, K);
  if (!scale_a.data || !scale_b.data) detail::throw_formatted("%s: scale_a or scale_b is null", fn);
  if (groups > 1 && nb > 1 && scale_b.stride[0] != nb * scale_b.stride[1])
    detail::throw_formatted("%s: scale_b's groups must lie back to back (stride %lld in dimension 0, expected %lld "
                            "blocks x %lld)",
                            fn, scale_b.stride[0], nb, scale_b.stride[1]);
  if (!any_rows) return;
  kern.k_blocks = static_cast<int>(kb);
  // B's scales as [G * ceil(N/128), ceil(K/128)]: the kernel asks for group g's column j at
  // g * ceil(N/128) * 128 + j (grouped_matmul_kernel), scale_epilogue reads row col / 128.
  const scale_matrix sb{scale_b.data, groups * nb, kb, nb > 1 ? scale_b.stride[1] : scale_b.stride[0],
                        scale_b.stride[2]};
  kern.epilogue = epilogue_t{scaled_matmul_detail::scales_of(scale_a), sb, {}};
  if (const auto tma_a_scales = scaled_matmul_detail::tma_a_scales(scale_a))
    grouped_matmul_detail::launch(dev, with_a_scales<kernel_t>{kern}, a, b, out, opt.stream, *tma_a_scales);
  else grouped_matmul_detail::launch(dev, kern, a, b, out, opt.stream);
}

/// The row-wise recipe: scale_a [rows] (the masked layout's groups stacked), scale_b [G, N].
/// Kernel: the row-wise kernel, or a variant of it (bench/).
template <class T, class Kernel = scaled_grouped_matmul_row_wise_kernel<T>>
void run_row_wise(const char* fn, const device& dev, const tensor_view<T, 2>& a, const tensor_view<T, 3>& b,
                  const scale_matrix& scale_a, const tensor_view<float, 2>& scale_b, const int* group_table, int groups,
                  int masked_stride, const tensor_view<bf16, 2>& out, const scaled_grouped_matmul_options& opt) {
  static_assert(wgmma_fp8_type<T>, "tilepipe: scaled_grouped_matmul multiplies fp8 operands (fp8_e4m3 or fp8_e5m2)");
  Kernel kern;
  const bool any_rows = grouped_matmul_detail::prepare(kern, fn, a, b, rhs_layout::nk, group_table, groups,
                                                       masked_stride, out, "a", "b");
  const long long M = a.shape[0], N = b.shape[1];
  if (scale_a.rows != M)
    detail::throw_formatted("%s: row-wise scale_a has %lld scales, expected one per row of a (%lld)", fn, scale_a.rows, M);
  if (scale_b.shape[0] != groups || scale_b.shape[1] != N)
    detail::throw_formatted("%s: row-wise scale_b is [%lld, %lld], expected [%lld, %lld] (a scale per group and column "
                            "of out)",
                            fn, scale_b.shape[0], scale_b.shape[1], static_cast<long long>(groups), N);
  if (!scale_a.data || !scale_b.data) detail::throw_formatted("%s: scale_a or scale_b is null", fn);
  if (!any_rows) return;
  kern.epilogue = group_row_scales{scale_a, scaled_matmul_detail::scales_of(scale_b)};
  grouped_matmul_detail::launch(dev, kern, a, b, out, opt.stream);
}

/// The masked layout's shapes: groups of a, b, out and scale_a, rows per group of a, out and
/// scale_a (scale_a [G, Mmax, ...]).
template <class T, int ScaleRank>
void check_masked(const char* fn, const tensor_view<T, 3>& a, const tensor_view<T, 3>& b,
                  const tensor_view<bf16, 3>& out, const tensor_view<float, ScaleRank>& scale_a) {
  if (a.shape[0] != b.shape[0] || out.shape[0] != a.shape[0] || scale_a.shape[0] != a.shape[0])
    detail::throw_formatted("%s: a has %lld groups, b %lld, out %lld and scale_a %lld", fn, a.shape[0], b.shape[0],
                            out.shape[0], scale_a.shape[0]);
  if (out.shape[1] != a.shape[1] || scale_a.shape[1] != a.shape[1])
    detail::throw_formatted("%s: a has %lld rows per group, out %lld and scale_a %lld", fn, a.shape[1], out.shape[1],
                            scale_a.shape[1]);
  if (a.shape[1] < 1) detail::throw_formatted("%s: a has no rows per group", fn);
}

}  // namespace scaled_grouped_matmul_detail

/// out[M, N] = a[M, K] . b[g]^T with block scales (the top of this file): rows
/// [offsets[g - 1], offsets[g]) of a (offsets[-1] = 0) belong to group g; `group_offsets` is a
/// device array of G ints, the cumulative group sizes (torch._scaled_grouped_mm's offs; the
/// last is M). Groups may be empty; 1 <= G <= 256. a, b and out are read and written with TMA:
/// last dimension contiguous, other strides and the data 16-byte aligned (K a multiple of 16,
/// N of 8). scale_a may have any strides, and is read fastest M-major (tp::m_major_scales);
/// scale_b's groups lie back to back (stride[0] = ceil(N/128) * stride[1], as in a contiguous
/// tensor). Offsets that decrease or do not end at M fail in the kernel (the host does not
/// read them).
template <class T>
void scaled_grouped_matmul(const device& dev, const tensor_view<T, 2>& a, const tensor_view<T, 3>& b,
                           const tensor_view<float, 2>& scale_a, const tensor_view<float, 3>& scale_b,
                           const int* group_offsets, const tensor_view<bf16, 2>& out,
                           const scaled_grouped_matmul_options& opt = {}) {
  scaled_grouped_matmul_detail::run("scaled_grouped_matmul", dev, a, b, scale_a, scale_b, group_offsets,
                                    static_cast<int>(b.shape[0]), 0, out, opt);
}

/// The masked (decode) layout: out[g, i] = a[g, i] . b[g]^T for i < group_counts[g], with a
/// [G, Mmax, K], scale_a [G, Mmax, ceil(K/128)] and out [G, Mmax, N]; rows i >= group_counts[g]
/// of out are not written. `group_counts` is a device array of G ints in [0, Mmax]. The groups
/// of a, out and scale_a lie back to back (stride[0] = Mmax * stride[1]); scale_a with strides
/// (Mmax, 1, ld) is M-major over the stacked rows (ld >= G * Mmax a multiple of 4, the
/// storage [ceil(K/128), ld]) and goes through SMEM.
template <class T>
void scaled_grouped_matmul_masked(const device& dev, const tensor_view<T, 3>& a, const tensor_view<T, 3>& b,
                                  const tensor_view<float, 3>& scale_a, const tensor_view<float, 3>& scale_b,
                                  const int* group_counts, const tensor_view<bf16, 3>& out,
                                  const scaled_grouped_matmul_options& opt = {}) {
  using grouped_matmul_detail::stacked;
  constexpr const char* fn = "scaled_grouped_matmul_masked";
  scaled_grouped_matmul_detail::check_masked(fn, a, b, out, scale_a);
  scaled_grouped_matmul_detail::run(fn, dev, stacked(a, "a", fn), b, stacked(scale_a, "scale_a", fn), scale_b,
                                    group_counts, static_cast<int>(a.shape[0]), static_cast<int>(a.shape[1]),
                                    stacked(out, "out", fn), opt);
}

/// Row-wise scales (torch._scaled_grouped_mm's recipe): out(i, j) = scale_a[i] * scale_b[g, j]
/// * sum_k a(i, k) b(g, j, k) for the rows i of group g (rows as above); scale_a [M] and
/// scale_b [G, N], any strides.
template <class T>
void scaled_grouped_matmul(const device& dev, const tensor_view<T, 2>& a, const tensor_view<T, 3>& b,
                           const tensor_view<float, 1>& scale_a, const tensor_view<float, 2>& scale_b,
                           const int* group_offsets, const tensor_view<bf16, 2>& out,
                           const scaled_grouped_matmul_options& opt = {}) {
  const scale_matrix sa{scale_a.data, scale_a.shape[0], 1, scale_a.stride[0], 0};
  scaled_grouped_matmul_detail::run_row_wise("scaled_grouped_matmul", dev, a, b, sa, scale_b, group_offsets,
                                             static_cast<int>(b.shape[0]), 0, out, opt);
}

/// The masked layout with row-wise scales: scale_a [G, Mmax] (its groups back to back,
/// stride[0] = Mmax * stride[1]) and scale_b [G, N].
template <class T>
void scaled_grouped_matmul_masked(const device& dev, const tensor_view<T, 3>& a, const tensor_view<T, 3>& b,
                                  const tensor_view<float, 2>& scale_a, const tensor_view<float, 2>& scale_b,
                                  const int* group_counts, const tensor_view<bf16, 3>& out,
                                  const scaled_grouped_matmul_options& opt = {}) {
  using grouped_matmul_detail::stacked;
  constexpr const char* fn = "scaled_grouped_matmul_masked";
  scaled_grouped_matmul_detail::check_masked(fn, a, b, out, scale_a);
  if (scale_a.shape[0] > 1 && scale_a.stride[0] != scale_a.shape[1] * scale_a.stride[1])
    detail::throw_formatted("%s: scale_a's groups must lie back to back (stride %lld in dimension 0, expected %lld x %lld)",
                            fn, scale_a.stride[0], scale_a.shape[1], scale_a.stride[1]);
  const scale_matrix sa{scale_a.data, scale_a.shape[0] * scale_a.shape[1], 1, scale_a.stride[1], 0};
  scaled_grouped_matmul_detail::run_row_wise(fn, dev, stacked(a, "a", fn), b, sa, scale_b, group_counts,
                                             static_cast<int>(a.shape[0]), static_cast<int>(a.shape[1]),
                                             stacked(out, "out", fn), opt);
}

}  // namespace tilepipe
