// fp8 matmul with scales (torch._scaled_mm's operation): C = act((A B^T) * scales + bias).
//
//     tp::scaled_matmul(dev, a, b, c, tp::fp8_scaling::per_tensor, scale_a, scale_b);   // scales [1, 1]
//     tp::scaled_matmul(dev, a, b, c, tp::fp8_scaling::row_wise, scale_a, scale_b);     // [M, 1], [N, 1]
//     tp::scaled_matmul(dev, a, b, c, tp::fp8_scaling::block, scale_a, scale_b);        // [M, K/128], [N/128, K/128]
//     tp::scaled_matmul(dev, a, b, c, tp::fp8_scaling::block, tp::m_major_scales(sa_storage, M), scale_b);  // faster
//
// A is [M, K] and B is [N, K], fp8 (e4m3, or e5m2 for gradients, each) with K contiguous: the
// K-major layout fp8 wgmma requires (B as nn.Linear keeps its weights; torch._scaled_mm's
// column-major second operand). The scales are f32 in device memory, x ~= q * scale as
// tp::quantize_fp8 writes them:
//   per_tensor  C(i, j) = sa * sb * sum_k A(i, k) B(j, k)
//   row_wise    C(i, j) = sa(i) * sb(j) * sum_k A(i, k) B(j, k)
//   block       C(i, j) = sum_kb sa(i, kb) * sb(j / 128, kb) * sum_{k in block kb} A(i, k) B(j, k)
// (DeepSeek-V3's 1 x 128 activation and 128 x 128 weight blocks, ceil'd at the edges: a K
// that is not a multiple of 128 ends in a partial block, which TMA zero-fills.)
// C is bf16 or f32. In f32: per-tensor and block scales multiply the sum as their product
// (sa * sb, formed first); row-wise ones one after the other ((sum * sa) * sb), so that each
// tile reads A's scales once per row.
//
// It is tp::matmul's kernel (matmul_ws_kernel) with fp8 operands and 128-wide k-steps: the
// per-tensor and row-wise scales apply in its epilogue; block scales apply at every k-block,
// where promoting_rows_k_step adds each block's product, scaled, to the f32 accumulator in
// registers (the tensor core's fp8 sums keep about 14 bits; kernels/matmul_k_step.cuh). Block
// scales of A stored M-major (M contiguous: [ceil(K/128), M] with 16-byte aligned rows, as
// DeepGEMM and torch._scaled_mm's block-wise mode keep them; tp::m_major_scales) are loaded by
// the memory warpgroup with TMA into each stage beside A's and B's blocks (with_a_scales), and
// the k-step reads them from SMEM; scales of other strides are read from global memory by the
// compute warpgroups, on the k-loop's critical path (slower). B's scale, one per k-block for a
// tile, is read from global memory either way. The other modes
// promote too with scaled_matmul_options::promote (the precision of torch._scaled_mm's
// default), or leave the whole K to the tensor core's accumulator (faster; the default).
#pragma once

#include "matmul.cuh"

#include <cstdint>
#include <optional>

namespace tilepipe {

/// How scale_a and scale_b of tp::scaled_matmul apply (the shapes they have).
enum class fp8_scaling {
  per_tensor,  // one scale each: [1, 1] and [1, 1]
  row_wise,    // one per row of A and per row of B (column of C): [M, 1] and [N, 1]
  block,       // per 1 x 128 block of A and 128 x 128 block of B: [M, ceil(K/128)] and [ceil(N/128), ceil(K/128)]
};

/// A matrix of f32 scales in device memory, read with plain loads (any strides): B's block
/// scales, A's where they are not M-major, and the scales the epilogue applies.
struct scale_matrix {
  const float* data = nullptr;
  long long rows = 0, cols = 0, row_stride = 0, col_stride = 0;
  /// The scale at (r, c), the indices clamped to the matrix: the edge tiles' rows and columns
  /// past C, whose results are dropped, read the last ones. Loads without a condition: with a
  /// bounds check ptxas kept the row-wise epilogue's 64 column scales a thread live at once and
  /// spilled 140 bytes.
  TP_HD float operator()(long long r, long long c) const {
    return data[(r < rows ? r : rows - 1) * row_stride + (c < cols ? c : cols - 1) * col_stride];
  }
  /// Scales (r, c) to (r, c + n - 1) of a row, or (r, c) to (r + n - 1, c) of a column, as one
  /// address when they are inside and contiguous, else null. An epilogue reading a thread's 64
  /// column scales from it uses one address and constant offsets, where each clamped index of
  /// operator() cost about 10 instructions (a sixth of the epilogue).
  TP_HD const float* contiguous_in_row(long long r, long long c, int n) const {
    return r >= 0 && r < rows && c >= 0 && c + n <= cols && col_stride == 1 ? data + r * row_stride + c : nullptr;
  }
  TP_HD const float* contiguous_in_column(long long r, long long c, int n) const {
    return c >= 0 && c < cols && r >= 0 && r + n <= rows && row_stride == 1 ? data + c * col_stride + r : nullptr;
  }
};

/// The scales of one mode, and `then` (bias, activation) after them. Per-tensor and row-wise
/// scales multiply the accumulator in the epilogue, read once per tile (per-tensor:
/// acc * (sa * sb)) or once per row a thread holds (row-wise: (acc * sa(row)) * sb(col)); called
/// element by element, ptxas loaded them again for every element. Block scales are per
/// k-block (k_block_scales): the kernel's k-step applies them. Promote: the kernel promotes
/// every 128 of K (k_block_scales), with scale 1 for the modes whose scales the epilogue applies.
template <fp8_scaling Mode, class Then, bool Promote = Mode == fp8_scaling::block>
struct scale_epilogue {
  static_assert(Promote || Mode != fp8_scaling::block, "tilepipe: block scales are applied by promotion");
  static constexpr fp8_scaling mode = Mode;
  scale_matrix a, b;
  Then then;

  TP_HD float a_scale(long long row, int kb) const
    requires Promote
  {
    return Mode == fp8_scaling::block ? a(row, kb) : 1.0f;
  }
  TP_HD float b_scale(long long col, int kb) const
    requires Promote
  {
    return Mode == fp8_scaling::block ? b(col / 128, kb) : 1.0f;
  }

  template <int M, int N>
  TP_HD accumulator<M, N> apply(const accumulator<M, N>& acc, long long row0, long long col0) const {
    if constexpr (Mode == fp8_scaling::per_tensor) {
      const float s = a(0, 0) * b(0, 0);
      return map(acc, [&](float v, int r, int c) { return then(v * s, row0 + r, col0 + c); });
    } else if constexpr (Mode == fp8_scaling::row_wise) {
      const auto sa = map(full<row_vector<M>>(0.0f), [&](float, int r) { return a(row0 + r, 0); });
      const accumulator<M, N> by_rows = broadcast_rows(acc, sa, [](float v, float s) { return v * s; });
      if (const float* sb = b.contiguous_in_column(col0, 0, N))  // all but the last tile column
        return map(by_rows, [&](float v, int r, int c) { return then(v * sb[c], row0 + r, col0 + c); });
      return map(by_rows, [&](float v, int r, int c) { return then(v * b(col0 + c, 0), row0 + r, col0 + c); });
    } else {
      return map(acc, [&](float v, int r, int c) { return then(v, row0 + r, col0 + c); });
    }
  }
};

/// The kernels tp::scaled_matmul launches: 128 x 256 tiles for scales in the epilogue (as
/// tp::matmul); where the sums are promoted, a tile's columns lie in one block of B's scales
/// (128) and the registers hold the partial products: 128 x 128 tiles with two k-blocks a step
/// (64 + 2 x 64 registers a thread) for per-tensor and row-wise scales, 256 x 128 tiles with
/// one k-block a step promoted 64 rows at a time (128 + 64) for block scales, which read B
/// once for twice the rows (6-10% faster than 128 x 128 on an H200, docs/benchmarks.md; the
/// scale-free promoted modes ran slower at 256 x 128). 128-wide k-blocks, as many stages as
/// SMEM holds beside the epilogue's buffers (4 x 48 KB, 3 x 64 KB, 4 x 48 KB; one fewer for
/// f32 output, whose buffers are twice as large).
template <class TA, class TB, class TC, class Epilogue>
using scaled_matmul_kernel = std::conditional_t<
    !k_block_scales<Epilogue>,
    matmul_ws_kernel<TA, TC, 128, 256, sizeof(TC) == 4 ? 3 : 4, b_layout::col_major, Epilogue, 128, 1, TB>,
    std::conditional_t<Epilogue::mode == fp8_scaling::block,
                       matmul_ws_kernel<TA, TC, 256, 128, sizeof(TC) == 4 ? 3 : 4, b_layout::col_major, Epilogue, 128, 1, TB>,
                       matmul_ws_kernel<TA, TC, 128, 128, sizeof(TC) == 4 ? 2 : 3, b_layout::col_major, Epilogue, 128, 1, TB>>>;

struct scaled_matmul_options {
  const void* bias = nullptr;  // optional [N] vector of c's element type, added after the scales
  activation act = activation::none;
  // Per-tensor and row-wise scales: promote the sums into f32 every 128 of K (128 x 128 tiles,
  // as torch._scaled_mm with use_fast_accum=False), or keep them in the tensor core's
  // accumulator of about 14 bits over all of K (128 x 256 tiles, use_fast_accum=True). Block
  // scales always promote.
  bool promote = false;
  void* stream = nullptr;      // cudaStream_t (GPU)
};

namespace scaled_matmul_detail {
inline scale_matrix scales_of(const tensor_view<float, 2>& s) {
  return {s.data, s.shape[0], s.shape[1], s.stride[0], s.stride[1]};
}

/// scale_a of block scales as the [ceil(K/128), M] view with_a_scales loads by TMA, when it is
/// M-major and aligned for it (M contiguous, the k-blocks' stride and the data 16-byte
/// aligned); else none, and the k-step reads it from global memory.
inline std::optional<tensor_view<float, 2>> tma_a_scales(const tensor_view<float, 2>& s) {
  const tensor_view<float, 2> t{s.data, {s.shape[1], s.shape[0]}, {s.stride[1], s.stride[0]}, s.on_gpu};
  const long long ld = host::effective_stride(t, 0);
  if (host::effective_stride(t, 1) != 1 || ld <= 0 || ld % 4 != 0 || reinterpret_cast<std::uintptr_t>(s.data) % 16 != 0)
    return std::nullopt;
  return t;
}

/// Launches Kernel (scaled_matmul_kernel, or with_a_scales of it given the A scales' view).
template <class Kernel, class TA, class TB, class TC, class Epilogue, class... AScales>
void launch(const device& dev, const tensor_view<TA, 2>& a, const tensor_view<TB, 2>& b, const tensor_view<TC, 2>& c,
            Epilogue epi, void* stream, const AScales&... a_scales) {
  const int sms = dev.is_gpu() ? dev.multiprocessors() : 4;
  const auto kern = Kernel::make(a.shape[0], b.shape[0], a.shape[1], epi);
  auto cfg = kern.config(sms);
  cfg.stream = stream;
  kernel(kern, cfg)(dev, a, b, a_scales..., c);
}
}  // namespace scaled_matmul_detail

/// scale_a of block scales in the layout the block-scaled kernel loads with TMA: `storage`
/// [ceil(K/128), ld] row-major (M-major: DeepGEMM's layout, and torch._scaled_mm's for
/// block-wise scales), ld >= M a multiple of 4 (16-byte rows), seen as the [M, ceil(K/128)]
/// view with strides (1, ld) that tp::quantize_fp8 writes and tp::scaled_matmul reads.
///     tp::tensor<float, 2> storage(dev, {(K + 127) / 128, (M + 3) / 4 * 4});
///     const auto scale_a = tp::m_major_scales(storage, M);
inline tensor_view<float, 2> m_major_scales(const tensor<float, 2>& storage, long long m) {
  tensor_view<float, 2> v = storage.view();
  if (m > v.shape[1]) detail::throw_formatted("m_major_scales: %lld rows of scales in rows of %lld", m, v.shape[1]);
  return {v.data, {m, v.shape[0]}, {1, v.stride[0]}, v.on_gpu};
}

/// c[M, N] = act(scaled(a[M, K] b[N, K]^T) + bias), a and b fp8 (e4m3 or e5m2 each: e5m2
/// gradients times e4m3 weights in a backward pass), c bf16 or f32, with f32 scales as
/// `scaling` says (the top of this file). a, b and c are read and written with TMA: last
/// dimension contiguous, other strides and the data 16-byte aligned (K a multiple of 16); the
/// scales may have any strides, and A's block scales are read fastest M-major
/// (tp::m_major_scales: strides (1, ld), ld a multiple of 4, the data 16-byte aligned).
template <class TA, class TB, class TC>
void scaled_matmul(const device& dev, const tensor_view<TA, 2>& a, const tensor_view<TB, 2>& b,
                   const tensor_view<TC, 2>& c, fp8_scaling scaling, const tensor_view<float, 2>& scale_a,
                   const tensor_view<float, 2>& scale_b, const scaled_matmul_options& opt = {}) {
  static_assert(wgmma_fp8_type<TA> && wgmma_fp8_type<TB>,
                "tilepipe: scaled_matmul multiplies fp8 operands (fp8_e4m3 or fp8_e5m2)");
  static_assert(std::is_same_v<TC, bf16> || std::is_same_v<TC, float>, "tilepipe: scaled_matmul writes bf16 or f32");
  const long long M = a.shape[0], K = a.shape[1], N = b.shape[0];
  if (b.shape[1] != K)
    detail::throw_formatted("scaled_matmul: a is [M, K] with K = %lld, b is [N, K] with K = %lld", K, b.shape[1]);
  if (c.shape[0] != M || c.shape[1] != N)
    detail::throw_formatted("scaled_matmul: c is %lld x %lld, expected %lld x %lld", c.shape[0], c.shape[1], M, N);
  if (K < 1 || N < 1) detail::throw_formatted("scaled_matmul: K = %lld and N = %lld must be positive", K, N);
  const long long kb = (K + 127) / 128;
  const char* names[] = {"per_tensor", "row_wise", "block"};
  const long long want[3][4] = {{1, 1, 1, 1}, {M, 1, N, 1}, {M, kb, (N + 127) / 128, kb}};
  const auto& w = want[static_cast<int>(scaling)];
  if (scale_a.shape[0] != w[0] || scale_a.shape[1] != w[1] || scale_b.shape[0] != w[2] || scale_b.shape[1] != w[3])
    detail::throw_formatted("scaled_matmul: %s scales are scale_a [%lld, %lld] and scale_b [%lld, %lld], got [%lld, %lld] "
                            "and [%lld, %lld]",
                            names[static_cast<int>(scaling)], w[0], w[1], w[2], w[3], scale_a.shape[0],
                            scale_a.shape[1], scale_b.shape[0], scale_b.shape[1]);
  if (!scale_a.data || !scale_b.data) detail::throw_formatted("scaled_matmul: scale_a or scale_b is null");
  if (M == 0) return;
  host::require_tma_rows(a, "scaled_matmul", "a"), host::require_tma_rows(b, "scaled_matmul", "b");
  host::require_tma_rows(c, "scaled_matmul", "c");
  const scale_matrix sa = scaled_matmul_detail::scales_of(scale_a), sb = scaled_matmul_detail::scales_of(scale_b);
  const auto tma_a_scales = scaling == fp8_scaling::block ? scaled_matmul_detail::tma_a_scales(scale_a) : std::nullopt;
  auto run = [&](auto then) {
    using then_t = decltype(then);
    auto launch = [&](auto epi) {
      scaled_matmul_detail::launch<scaled_matmul_kernel<TA, TB, TC, decltype(epi)>>(dev, a, b, c, epi, opt.stream);
    };
    constexpr auto tensor = fp8_scaling::per_tensor, rows = fp8_scaling::row_wise, blocks = fp8_scaling::block;
    using block_kernel_t = scaled_matmul_kernel<TA, TB, TC, scale_epilogue<blocks, then_t>>;
    const scale_epilogue<blocks, then_t> block_epilogue{sa, sb, then};
    if (scaling == blocks && tma_a_scales) {
      scaled_matmul_detail::launch<with_a_scales<block_kernel_t>>(dev, a, b, c, block_epilogue, opt.stream, *tma_a_scales);
    } else if (scaling == blocks) launch(block_epilogue);
    else if (scaling == tensor && opt.promote) launch(scale_epilogue<tensor, then_t, true>{sa, sb, then});
    else if (scaling == tensor) launch(scale_epilogue<tensor, then_t>{sa, sb, then});
    else if (opt.promote) launch(scale_epilogue<rows, then_t, true>{sa, sb, then});
    else launch(scale_epilogue<rows, then_t>{sa, sb, then});
  };
  if (!opt.bias && opt.act == activation::none) run(no_epilogue{});
  else run(bias_activation_epilogue<TC>{static_cast<const TC*>(opt.bias), N, opt.act});
}

}  // namespace tilepipe
