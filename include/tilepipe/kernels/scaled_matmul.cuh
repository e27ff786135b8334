// fp8 matmul with scales (torch._scaled_mm's operation): C = act((A B^T) * scales + bias).
//
//     tp::scaled_matmul(dev, a, b, c, tp::fp8_scaling::per_tensor, scale_a, scale_b);   // scales [1, 1]
//     tp::scaled_matmul(dev, a, b, c, tp::fp8_scaling::row_wise, scale_a, scale_b);     // [M, 1], [N, 1]
//     tp::scaled_matmul(dev, a, b, c, tp::fp8_scaling::block, scale_a, scale_b);        // [M, K/128], [N/128, K/128]
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
// where promoting_k_step adds each block's product, scaled, to the f32 accumulator in registers
// (the tensor core's fp8 sums keep about 14 bits; kernels/matmul_k_step.cuh). The other modes
// promote too with scaled_matmul_options::promote (the precision of torch._scaled_mm's
// default), or leave the whole K to the tensor core's accumulator (faster; the default).
#pragma once

#include "matmul.cuh"

namespace tilepipe {

/// How scale_a and scale_b of tp::scaled_matmul apply (the shapes they have).
enum class fp8_scaling {
  per_tensor,  // one scale each: [1, 1] and [1, 1]
  row_wise,    // one per row of A and per row of B (column of C): [M, 1] and [N, 1]
  block,       // per 1 x 128 block of A and 128 x 128 block of B: [M, ceil(K/128)] and [ceil(N/128), ceil(K/128)]
};

/// A matrix of f32 scales in device memory, read with plain loads (any strides).
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
      return map(broadcast_rows(acc, sa, [](float v, float s) { return v * s; }),
                 [&](float v, int r, int c) { return then(v * b(col0 + c, 0), row0 + r, col0 + c); });
    } else {
      return map(acc, [&](float v, int r, int c) { return then(v, row0 + r, col0 + c); });
    }
  }
};

/// The kernels tp::scaled_matmul launches: 128 x 256 tiles for scales in the epilogue (as
/// tp::matmul), 128 x 128 where the sums are promoted (a tile's columns in one block of B's
/// scales, and room for the two partial accumulators: 64 + 2 x 64 registers a thread).
/// 128-wide k-blocks, one a step (two when promoted), as many stages as SMEM holds beside the
/// epilogue's buffers (4 x 48 KB, 3 x 64 KB; one fewer for f32 output, whose buffers are twice
/// as large).
template <class TA, class TB, class TC, class Epilogue>
using scaled_matmul_kernel = std::conditional_t<
    k_block_scales<Epilogue>,
    matmul_ws_kernel<TA, TC, 128, 128, sizeof(TC) == 4 ? 2 : 3, b_layout::col_major, Epilogue, 128, 1, TB>,
    matmul_ws_kernel<TA, TC, 128, 256, sizeof(TC) == 4 ? 3 : 4, b_layout::col_major, Epilogue, 128, 1, TB>>;

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

template <class TA, class TB, class TC, class Epilogue>
void launch(const device& dev, const tensor_view<TA, 2>& a, const tensor_view<TB, 2>& b, const tensor_view<TC, 2>& c,
            Epilogue epi, void* stream) {
  using kernel_t = scaled_matmul_kernel<TA, TB, TC, Epilogue>;
  const int sms = dev.is_gpu() ? dev.multiprocessors() : 4;
  const auto kern = kernel_t::make(a.shape[0], b.shape[0], a.shape[1], epi);
  auto cfg = kern.config(sms);
  cfg.stream = stream;
  kernel(kern, cfg)(dev, a, b, c);
}
}  // namespace scaled_matmul_detail

/// c[M, N] = act(scaled(a[M, K] b[N, K]^T) + bias), a and b fp8 (e4m3 or e5m2 each: e5m2
/// gradients times e4m3 weights in a backward pass), c bf16 or f32, with f32 scales as
/// `scaling` says (the top of this file). a, b and c are read and written with TMA: last
/// dimension contiguous, other strides and the data 16-byte aligned (K a multiple of 16); the
/// scales may have any strides.
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
  auto run = [&](auto then) {
    using then_t = decltype(then);
    auto launch = [&](auto epi) { scaled_matmul_detail::launch(dev, a, b, c, epi, opt.stream); };
    constexpr auto tensor = fp8_scaling::per_tensor, rows = fp8_scaling::row_wise, blocks = fp8_scaling::block;
    if (scaling == blocks) launch(scale_epilogue<blocks, then_t>{sa, sb, then});
    else if (scaling == tensor && opt.promote) launch(scale_epilogue<tensor, then_t, true>{sa, sb, then});
    else if (scaling == tensor) launch(scale_epilogue<tensor, then_t>{sa, sb, then});
    else if (opt.promote) launch(scale_epilogue<rows, then_t, true>{sa, sb, then});
    else launch(scale_epilogue<rows, then_t>{sa, sb, then});
  };
  if (!opt.bias && opt.act == activation::none) run(no_epilogue{});
  else run(bias_activation_epilogue<TC>{static_cast<const TC*>(opt.bias), N, opt.act});
}

}  // namespace tilepipe
