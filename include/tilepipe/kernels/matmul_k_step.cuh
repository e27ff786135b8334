// The k-steps the warp-specialised matmul kernels' pipelines run (CUTLASS's mainloop): the
// body of one step over K, for one compute warpgroup.
#pragma once

#include "../ops/fragment.cuh"
#include "../ops/store.cuh"
#include "../ops/wgmma.cuh"

namespace tilepipe {

/// Compute warpgroup ci adds its WM rows of the A block times the B block to its
/// accumulator; a K-major B block (stored N x K) is read transposed. One wgmma group stays
/// in flight: the pipeline's specs release their blocks a step late (delay_release<1>).
template <int WM, int BN, bool KMajorB>
struct matmul_k_step {
  accumulator<WM, BN>& acc;
  int ci;

  template <class At, class A, class B>
  TP_HD void operator()(At, A a_smem, B b_smem) const {
    if constexpr (KMajorB) wgmma(acc, rows<WM>(a_smem, ci * WM), transpose(b_smem));
    else wgmma(acc, rows<WM>(a_smem, ci * WM), b_smem);
    wgmma_wait<1>();
  }
};

/// Scales per block of K: a(row, kb) * b(col, kb) multiplies the product of k-block kb (one
/// step of the pipeline) before it is added to the accumulator: block-scaled fp8, where each
/// 128 of K of A's rows and of 128 x 128 blocks of B have their own scale.
template <class S>
concept k_block_scales = requires(const S& s, long long i, int kb) {
  { s.a_scale(i, kb) } -> std::convertible_to<float>;
  { s.b_scale(i, kb) } -> std::convertible_to<float>;
};

/// The k-step of block-scaled matmuls (DeepGEMM's promotion): each k-block's product goes
/// into a fresh partial accumulator, then is multiplied by its scales and added to acc in f32
/// registers. The tensor core sums fp8 products with about 14 significant bits; a whole K
/// summed there loses what block scales keep. A step holds two k-blocks of BK, whose wgmmas
/// are issued together, so a step waits once for two blocks' products (the other compute
/// warpgroup's wgmmas keep the tensor core busy meanwhile). The first block's promotion is
/// written between the two waits, to run under the second block's wgmmas, but ptxas places
/// the second wait before it (SASS: DEPBAR.LE 1 then .LE 0, the FFMAs after both; the PTX has
/// them between). The step waits for all its wgmmas, so its blocks are free
/// when it returns (no delay_release): ptxas serialises every wgmma when a product stays in
/// flight into the next step while this one reads the other (C7514). When K has an odd number
/// of k-blocks, the last step's second block lies past K (TMA fills it with zeros) and is not
/// promoted. B's scale is one per k-block: the tile's BN columns lie in one block of B's scales.
/// A's scales come from the step's SMEM block when the pipeline loads them (a third input:
/// row j the step's j-th k-block, a column per row of the tile from column a_scale_shift on),
/// else from the epilogue.
/// ShiftedAScales: A's SMEM scales block starts at the 16-byte boundary at or before the
/// tile's first row (the grouped kernel), and the step reads from column a_scale_shift; else
/// the block's columns are the tile's rows (the dense kernel, whose code is unchanged by it).
/// B's scales of k-blocks 0 .. staged - 1 are read from SMEM where the kernel staged them
/// (the grouped block-scaled kernel; promoting_rows_k_step says why).
template <int WM, int BN, int BK, k_block_scales Scales, bool ShiftedAScales = false>
struct promoting_k_step {
  accumulator<WM, BN>& acc;
  accumulator<WM, BN>& first;   // a step's first k-block's product
  accumulator<WM, BN>& second;  // and its second's
  int ci;
  const Scales& scales;
  long long row0, col0;  // this warpgroup's first row, the tile's first column
  int k0;                // the k-block of the pipeline's first step
  int k_blocks;          // k-blocks of the whole K
  // ShiftedAScales: the column of A's SMEM scales block that holds the tile's first row, the
  // row's distance from the 16-byte boundary where the block's TMA box starts (a box's
  // innermost start must be 16-byte aligned; the grouped kernel's tiles start at any row).
  int a_scale_shift = 0;
  const float* staged_b_scales = nullptr;
  int staged = 0;

  template <class At, class A, class B, class... AScales>
  TP_HD void operator()(At at, A a_smem, B b_smem, AScales... a_scales) const {
    const int kb = k0 + 2 * static_cast<int>(at[0]);
    wgmma(first, rows<WM>(cols<BK>(a_smem, 0), ci * WM), transpose(cols<BK>(b_smem, 0)), false);
    wgmma(second, rows<WM>(cols<BK>(a_smem, BK), ci * WM), transpose(cols<BK>(b_smem, BK)), false);
    const row_vector<WM> first_scales = scales_of(kb, 0, a_scales...),  // load under the wgmmas
        second_scales = scales_of(kb + 1, 1, a_scales...);
    wgmma_wait<1>(first);
    promote(first, first_scales);
    wgmma_wait<0>(second);
    if (kb + 1 < k_blocks) promote(second, second_scales);
  }

 private:
  /// a(row, kb) * b(col0, kb) for this warpgroup's rows; kb is the step's j-th k-block.
  template <class... AScales>
  TP_HD row_vector<WM> scales_of(int kb, int j, AScales... a_scales) const {
    const float sb = kb < staged ? staged_b_scales[kb] : scales.b_scale(col0, kb);
    if constexpr (sizeof...(AScales) == 1 && ShiftedAScales)
      return load_row_vector<WM>(transpose(rows<1>(a_scales..., j)), a_scale_shift + ci * WM) * sb;
    else if constexpr (sizeof...(AScales) == 1)
      return load_row_vector(transpose(cols<WM>(rows<1>(a_scales..., j), ci * WM))) * sb;
    else return map(full<row_vector<WM>>(sb), [&](float v, int r) { return v * scales.a_scale(row0 + r, kb); });
  }
  TP_HD void promote(const accumulator<WM, BN>& product, const row_vector<WM>& s) const {
    acc = zip(acc, broadcast_rows(product, s, [](float p, float f) { return p * f; }),
              [](float a, float p) { return a + p; });
  }
};

/// The k-step of block-scaled matmuls whose compute warpgroups own 128 rows or more
/// (DeepGEMM's 256 x 128 tiles): a step is one k-block, multiplied 64 rows at a time into one
/// partial accumulator (wgmma's M block), each 64 rows' product scaled and added to their
/// rows of acc once it is done: the registers hold acc and 64 rows of product (128 + 64 a
/// thread at 128 x 128), where a whole second product would not fit. The warpgroup waits
/// for each 64 rows' wgmmas, the other compute warpgroup's keep the tensor core busy
/// meanwhile. The step waits for all its wgmmas: its blocks are free when it returns.
/// Scales as promoting_k_step's, but B's: the first `staged` steps' are read from SMEM, where
/// the kernel put the tile's before its first step (a load from global memory each step
/// waited on L2 after the 64 rows' product: 4-6% of the kernel).
template <int WM, int BN, int BK, k_block_scales Scales>
struct promoting_rows_k_step {
  static_assert(WM % 64 == 0, "tilepipe: promoting_rows_k_step: a warpgroup's rows in blocks of 64");
  accumulator<WM, BN>& acc;
  accumulator<64, BN>& product;  // the product of 64 rows of the step's k-block
  int ci;
  const Scales& scales;
  long long row0, col0;  // this warpgroup's first row, the tile's first column
  int k0;                // the k-block of the pipeline's first step
  const float* staged_b_scales = nullptr;  // B's scales of steps 0 .. staged - 1 in SMEM
  int staged = 0;

  template <class At, class A, class B, class... AScales>
  TP_HD void operator()(At at, A a_smem, B b_smem, AScales... a_scales) const {
    const int step = static_cast<int>(at[0]), kb = k0 + step;
    const float sb = step < staged ? staged_b_scales[step] : scales.b_scale(col0, kb);
#pragma unroll
    for (int w = 0; w < WM / 64; ++w) {
      wgmma(product, rows<64>(a_smem, ci * WM + 64 * w), transpose(b_smem), false);
      row_vector<64> s;  // loaded under the wgmmas
      if constexpr (sizeof...(AScales) == 1)
        s = load_row_vector(transpose(cols<64>(rows<1>(a_scales..., 0), ci * WM + 64 * w))) * sb;
      else s = map(full<row_vector<64>>(sb), [&](float v, int r) { return v * scales.a_scale(row0 + 64 * w + r, kb); });
      wgmma_wait<0>(product);
      auto& rows_w = row_block(acc, w);
      rows_w = zip(rows_w, broadcast_rows(product, s, [](float p, float f) { return p * f; }),
                   [](float a, float p) { return a + p; });
    }
  }
};

}  // namespace tilepipe
