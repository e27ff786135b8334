// Moving register fragments to and from shared memory (any layout, swizzled included).
#pragma once

#include "../core/refs.cuh"
#include "../core/static_for.cuh"
#include "fragment.cuh"
#include "smem_access.cuh"

#include <cstring>

namespace tilepipe {

namespace detail {
/// Two floats rounded to a 16-bit T and packed into one register, x in the low half (one cvt).
template <class T>
TP_HD TP_FORCEINLINE std::uint32_t pack_pair(float x, float y) {
  std::uint32_t u;
  if constexpr (std::is_same_v<T, bf16>) {
    const __nv_bfloat162 p = __floats2bfloat162_rn(x, y);
    memcpy(&u, &p, sizeof u);
  } else {
    const __half2 p = __floats2half2_rn(x, y);
    memcpy(&u, &p, sizeof u);
  }
  return u;
}

template <int Row0, int Col0, int M, int N, class Ref>
TP_HD constexpr void check_store_block() {
  static_assert(is_smem_ref_v<Ref> && !Ref::transposed, "tilepipe: store_block writes to an untransposed SMEM view");
  static_assert(Row0 % 64 == 0 && Ref::rows % 64 == 0 && Row0 + Ref::rows <= M,
                "tilepipe: store_block: rows must be whole 64-row blocks inside the fragment");
  static_assert(Col0 % 8 == 0 && Ref::cols % 8 == 0 && Col0 + Ref::cols <= N,
                "tilepipe: store_block: columns must be multiples of 8 inside the fragment");
}

#if TP_DEVICE_PASS
/// Writes a block of 16-bit pairs with one stmatrix per 16 rows x 16 columns of each warp.
/// pair(b, i) is the packed pair of fragment registers i and i + 1 of block b. Registers
/// 4 j, 4 j + 2, 4 j + 4 and 4 j + 6 hold this lane's pair of the 8 x 8 matrices at (rows
/// 0-7, columns group j), (rows 8-15, j), (0-7, j + 1) and (8-15, j + 1) of the warp's 16
/// rows; lane l names row l % 8 of matrix l / 8.
template <int Row0, int Col0, class Ref, class Pair>
TP_DEVICE TP_FORCEINLINE void stmatrix_block(const Ref& dst, Pair&& pair) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x % warpgroup_size) / 32;
  const int m = lane / 8, row = 16 * warp + 8 * (m % 2) + lane % 8;
  const std::uint32_t base = prim::smem_address(dst.base);
#pragma unroll
  for (int b = 0; b < Ref::rows / 64; ++b)
#pragma unroll
    for (int j = 0; j < Ref::cols / 8; j += 2) {
      constexpr int fb = Row0 / 64, fi = Col0 / 2;
      prim::stmatrix_x4(base + Ref::layout::offset(dst.row0 + 64 * b + row, dst.col0 + 8 * (j + m / 2)), pair(fb + b, fi + 4 * j),
                        pair(fb + b, fi + 4 * j + 2), pair(fb + b, fi + 4 * j + 4), pair(fb + b, fi + 4 * j + 6));
    }
}
#endif
}  // namespace detail

/// Writes the block of rows [Row0, Row0 + Ref::rows) and columns [Col0, Col0 + Ref::cols)
/// of a fragment into an SMEM view: a tiled epilogue stores a large accumulator through a
/// small buffer, chunk by chunk (see tp::static_for). Row0 is a multiple of 64 (one
/// warpgroup's accumulator block), Col0 of 8.
template <int Row0, int Col0, class T, int M, int N, class Ref>
TP_HD TP_FORCEINLINE void store_block(const Ref& dst, const fragment<T, M, N>& f) {
  detail::check_store_block<Row0, Col0, M, N, Ref>();
  using U = typename Ref::value_type;
  detail::note_view(dst, true, "tp::store_block");
#if TP_DEVICE_PASS
  if constexpr (sizeof(U) == 2 && Ref::cols % 16 == 0) {
    detail::stmatrix_block<Row0, Col0>(
        dst, [&](int b, int i) { return detail::pack_pair<U>(to_float(f.v[b][i]), to_float(f.v[b][i + 1])); });
  } else {
    // Registers 4 j .. 4 j + 3 of a block hold columns 8 j .. 8 j + 7: the slice starts at
    // register Col0 / 2 of fragment block Row0 / 64.
#pragma unroll
    for (int b = 0; b < Ref::rows / 64; ++b)
#pragma unroll
      for (int i = 0; i < Ref::cols / 2; ++i)
        *dst.ptr(detail::frag_row(b, i), detail::frag_col(i)) = from_float<U>(to_float(f.v[Row0 / 64 + b][i + Col0 / 2]));
  }
#else
  for (int r = 0; r < Ref::rows; ++r)
    for (int c = 0; c < Ref::cols; ++c) *dst.ptr(r, c) = from_float<U>(to_float(f.v[(Row0 + r) * N + Col0 + c]));
#endif
}

/// Writes a fragment into an SMEM view of the same shape, converting to the view's type.
/// Follow it with commit_smem() before TMA or wgmma read the view.
template <class T, int M, int N, class Ref>
TP_HD TP_FORCEINLINE void store(const Ref& dst, const fragment<T, M, N>& f) {
  static_assert(is_smem_ref_v<Ref>, "tilepipe: store(dst, fragment) writes to an SMEM view");
  static_assert(Ref::rows == M && Ref::cols == N, "tilepipe: store: the view and the fragment differ in shape");
  if constexpr (!Ref::transposed) {
    store_block<0, 0>(dst, f);
  } else {
    using U = typename Ref::value_type;
    detail::note_view(dst, true, "tp::store");
    f.for_each([&](const T& x, int r, int c) { *dst.ptr(r, c) = from_float<U>(to_float(x)); });
  }
}

/// Reads an SMEM view into a fragment of type T.
template <class T, class Ref>
TP_HD TP_FORCEINLINE fragment<T, Ref::rows, Ref::cols> load(const Ref& src) {
  static_assert(is_smem_ref_v<Ref>, "tilepipe: load(src) reads an SMEM view");
  detail::note_view(src, false, "tp::load");
  fragment<T, Ref::rows, Ref::cols> f;
  f.for_each([&](T& x, int r, int c) { x = from_float<T>(to_float(*src.ptr(r, c))); });
  return f;
}

}  // namespace tilepipe
