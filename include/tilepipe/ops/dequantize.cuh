// fp8 (e4m3) blocks in shared memory turned into the 16-bit blocks wgmma multiplies: an fp8
// KV cache lands by TMA as e4m3 (half the bytes of bf16 to read from HBM) and each block is
// converted once, in SMEM, into a bf16 / f16 block of the layout a wgmma operand needs
// (kernels/attention_decode.cuh). Scales are not applied: a scale per tensor or per head
// factors out of the products and is folded in where it costs one multiply per row.
#pragma once

#include "../backend/primitives.cuh"
#include "../core/dtypes.cuh"
#include "../core/refs.cuh"
#include "smem_access.cuh"

#include <algorithm>
#include <type_traits>

namespace tilepipe {

/// Writes the e4m3 block src into the bf16 / f16 block dst (the same rows and columns, any
/// layouts, swizzled or not), exactly, with the calling warpgroup's ordinary loads and
/// stores; rows from zero_from on get zeros instead (the rows of a KV cache block past a
/// sequence's keys, which may hold anything, NaN codes too). Eight elements at a time: 8
/// bytes in, one 16-byte chunk out (a chunk of any swizzle holds 8 consecutive 16-bit
/// elements of a row). Call commit_smem() before a wgmma or TMA reads dst.
template <class Src, class Dst>
TP_HD void dequantize(const Src& src, const Dst& dst, int zero_from = Src::rows) {
  static_assert(is_smem_ref_v<Src> && is_smem_ref_v<Dst>, "tilepipe: dequantize converts one SMEM block into another");
  static_assert(std::is_same_v<std::remove_cv_t<typename Src::value_type>, fp8_e4m3>,
                "tilepipe: dequantize reads fp8_e4m3 blocks");
  using T = std::remove_cv_t<typename Dst::value_type>;
  static_assert(wgmma_operand_type<T>, "tilepipe: dequantize writes bf16 or f16 blocks");
  static_assert(!Src::transposed && !Dst::transposed && Src::full_width && Dst::full_width,
                "tilepipe: dequantize converts whole, untransposed blocks");
  static_assert(Src::rows == Dst::rows && Src::cols == Dst::cols, "tilepipe: dequantize: the blocks differ in shape");
  static_assert(Src::cols % 8 == 0, "tilepipe: dequantize converts rows of a multiple of 8 elements");
  constexpr int per_row = Src::cols / 8, units = Src::rows * per_row;
  detail::note_view(src, false, "tp::dequantize");
  detail::note_view(dst, true, "tp::dequantize");
  const int first = prim::thread_in_warpgroup(), threads = prim::warpgroup_threads();
  // Consecutive threads take consecutive 8-element units of a row: their 8-byte loads are
  // contiguous, and the 16-byte stores of a quarter warp land in eight different chunks of
  // one row, which no swizzle maps to the same banks. A batch's loads all come before its
  // stores: the compiler cannot move a load above a store to SMEM it may alias, and one
  // unit at a time waited for every load's latency (16 times a block at head dim 128).
  constexpr int batch = std::clamp(units / warpgroup_size, 1, 8);
  for (int u0 = first; u0 < units; u0 += batch * threads) {
    uint2 in[batch];
#pragma unroll
    for (int i = 0; i < batch; ++i) {
      const int u = u0 + i * threads, r = u / per_row, c = (u - r * per_row) * 8;
      in[i] = u < units && r < zero_from ? *reinterpret_cast<const uint2*>(src.ptr(r, c)) : uint2{0, 0};
    }
#pragma unroll
    for (int i = 0; i < batch; ++i) {
      const int u = u0 + i * threads, r = u / per_row, c = (u - r * per_row) * 8;
      if (u < units) *reinterpret_cast<uint4*>(dst.ptr(r, c)) = prim::e4m3x8_to<T>(in[i]);  // code 0 is +0
    }
  }
}

}  // namespace tilepipe
