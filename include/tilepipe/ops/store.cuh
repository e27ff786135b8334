// Moving register fragments to and from shared memory (any layout, swizzled included).
#pragma once

#include "../core/refs.cuh"
#include "../core/static_for.cuh"
#include "fragment.cuh"
#include "smem_access.cuh"

namespace tilepipe {

/// Writes a fragment into an SMEM view of the same shape, converting to the view's type.
/// Follow it with commit_smem() before TMA or wgmma read the view.
template <class T, int M, int N, class Ref>
TP_HD TP_FORCEINLINE void store(const Ref& dst, const fragment<T, M, N>& f) {
  static_assert(is_smem_ref_v<Ref>, "tilepipe: store(dst, fragment) writes to an SMEM view");
  static_assert(Ref::rows == M && Ref::cols == N, "tilepipe: store: the view and the fragment differ in shape");
  using U = typename Ref::value_type;
  detail::note_view(dst, true, "tp::store");
#if TP_DEVICE_PASS
  // Each thread holds pairs of neighbouring columns: one 4- or 8-byte store per pair.
#pragma unroll
  for (int b = 0; b < M / 64; ++b)
#pragma unroll
    for (int i = 0; i < N / 2; i += 2) {
      const int r = detail::frag_row(b, i), c = detail::frag_col(i);
      if constexpr (sizeof(U) == 2 && !Ref::transposed) {
        struct alignas(4) pair { U x, y; };
        *reinterpret_cast<pair*>(dst.ptr(r, c)) = pair{from_float<U>(to_float(f.v[b][i])), from_float<U>(to_float(f.v[b][i + 1]))};
      } else {
        *dst.ptr(r, c) = from_float<U>(to_float(f.v[b][i]));
        *dst.ptr(r, c + 1) = from_float<U>(to_float(f.v[b][i + 1]));
      }
    }
#else
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) *dst.ptr(r, c) = from_float<U>(to_float(f.v[r * N + c]));
#endif
}

/// Writes the block of rows [Row0, Row0 + Ref::rows) and columns [Col0, Col0 + Ref::cols)
/// of a fragment into an SMEM view: a tiled epilogue stores a large accumulator through a
/// small buffer, chunk by chunk (see tp::static_for). Row0 is a multiple of 64 (one
/// warpgroup's accumulator block), Col0 of 8.
template <int Row0, int Col0, class T, int M, int N, class Ref>
TP_HD TP_FORCEINLINE void store_block(const Ref& dst, const fragment<T, M, N>& f) {
  static_assert(is_smem_ref_v<Ref> && !Ref::transposed, "tilepipe: store_block writes to an untransposed SMEM view");
  static_assert(Row0 % 64 == 0 && Ref::rows % 64 == 0 && Row0 + Ref::rows <= M,
                "tilepipe: store_block: rows must be whole 64-row blocks inside the fragment");
  static_assert(Col0 % 8 == 0 && Ref::cols % 8 == 0 && Col0 + Ref::cols <= N,
                "tilepipe: store_block: columns must be multiples of 8 inside the fragment");
  using U = typename Ref::value_type;
  detail::note_view(dst, true, "tp::store_block");
#if TP_DEVICE_PASS
  // Registers 4 j .. 4 j + 3 of a block hold columns 8 j .. 8 j + 7: the slice starts at
  // register Col0 / 2 of fragment block Row0 / 64.
#pragma unroll
  for (int b = 0; b < Ref::rows / 64; ++b)
#pragma unroll
    for (int i = 0; i < Ref::cols / 2; i += 2) {
      const float x = to_float(f.v[Row0 / 64 + b][i + Col0 / 2]), y = to_float(f.v[Row0 / 64 + b][i + Col0 / 2 + 1]);
      const int r = detail::frag_row(b, i), c = detail::frag_col(i);
      if constexpr (sizeof(U) == 2) {
        struct alignas(4) pair { U x, y; };
        *reinterpret_cast<pair*>(dst.ptr(r, c)) = pair{from_float<U>(x), from_float<U>(y)};
      } else {
        *dst.ptr(r, c) = from_float<U>(x);
        *dst.ptr(r, c + 1) = from_float<U>(y);
      }
    }
#else
  for (int r = 0; r < Ref::rows; ++r)
    for (int c = 0; c < Ref::cols; ++c) *dst.ptr(r, c) = from_float<U>(to_float(f.v[(Row0 + r) * N + Col0 + c]));
#endif
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
