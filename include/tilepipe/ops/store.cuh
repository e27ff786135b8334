// Moving register fragments to and from shared memory (any layout, swizzled included), and
// to global memory.
#pragma once

#include "../core/refs.cuh"
#include "../core/static_for.cuh"
#include "fragment.cuh"
#include "smem_access.cuh"

#include <cstdint>
#include <type_traits>

namespace tilepipe {

namespace detail {
template <int Row0, int Col0, int M, int N, class Ref>
TP_HD constexpr void check_store_block() {
  static_assert(is_smem_ref_v<Ref> && !Ref::transposed, "tilepipe: store_block writes to an untransposed SMEM view");
  static_assert(Row0 % 64 == 0 && Ref::rows % 64 == 0 && Row0 + Ref::rows <= M,
                "tilepipe: store_block: rows must be whole 64-row blocks inside the fragment");
  static_assert(Col0 % 8 == 0 && Ref::cols % 8 == 0 && Col0 + Ref::cols <= N,
                "tilepipe: store_block: columns must be multiples of 8 inside the fragment");
}
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
  using registers = prim::tile_registers<M, N>;
  if constexpr (sizeof(U) == 2 && Ref::cols % 16 == 0 && registers::has_matrix_store) {
    registers::template matrix_store<Row0, Col0, U>(dst, f.v);
  } else {
    registers::template for_each<Row0, Col0, Ref::rows, Ref::cols>(
        [&](const T& x, prim::tile_index e) { *dst.ptr(e.row, e.col) = from_float<U>(to_float(x)); }, f.v);
  }
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

/// Writes a fragment into a 2-D GMEM view, converting to the view's type; rows and columns
/// past the view's extent are dropped, as TMA drops them. For epilogues that cannot use TMA
/// (the rows of a packed sequence end anywhere): each thread stores its own elements.
/// Where rows are contiguous and aligned for it, two neighbouring 16-bit elements of a row
/// go out in one 4-byte store.
template <class T, int M, int N, class U, class... Tiles>
TP_HD TP_FORCEINLINE void store(const gmem_ref<U, 2, Tiles...>& dst, const fragment<T, M, N>& f) {
  const long long rows = dst.shape[0], cols = dst.shape[1];
  if constexpr (sizeof(U) == 2) {
    const bool paired = dst.stride[1] == 1 && dst.stride[0] % 2 == 0 && reinterpret_cast<std::uintptr_t>(dst.data) % 4 == 0;
    if (paired) {
      struct alignas(4) pair {
        U x, y;
      };
      prim::tile_registers<M, N>::for_each_pair(
          [&](const T& x, const T& y, prim::tile_index e) {
            if (e.row >= rows || e.col >= cols) return;
            U* p = dst.data + e.row * dst.stride[0] + e.col;
            if (e.col + 1 < cols) *reinterpret_cast<pair*>(p) = {from_float<U>(to_float(x)), from_float<U>(to_float(y))};
            else *p = from_float<U>(to_float(x));
          },
          f.v);
      return;
    }
  }
  f.for_each([&](const T& x, int r, int c) {
    if (r < rows && c < cols) dst.data[r * dst.stride[0] + c * dst.stride[1]] = from_float<U>(to_float(x));
  });
}

/// Writes a row vector into a 1-D GMEM view (rows past its extent dropped).
template <int M, class... Tiles>
TP_HD TP_FORCEINLINE void store(const gmem_ref<float, 1, Tiles...>& dst, const row_vector<M>& rv) {
  rv.for_each([&](float x, int r) {
    if (r < dst.shape[0]) dst.data[r * dst.stride[0]] = x;
  });
}

/// Writes rows r < rows of a fragment to global memory, row r to row_of(r) (a pointer to
/// the row's first column; its N elements contiguous), converting to the pointee's type:
/// epilogues whose rows form no strided view (attention's grouped-query rows interleave
/// heads and sequence positions). Two neighbouring 16-bit elements go out in one 4-byte
/// store where the row allows it.
template <class T, int M, int N, class RowOf>
TP_HD TP_FORCEINLINE void store_rows(const fragment<T, M, N>& f, int rows, RowOf&& row_of) {
  using U = std::remove_pointer_t<decltype(row_of(0))>;
  if constexpr (sizeof(U) == 2) {
    struct alignas(4) pair {
      U x, y;
    };
    prim::tile_registers<M, N>::for_each_pair(
        [&](const T& x, const T& y, prim::tile_index e) {
          if (e.row >= rows) return;
          U* p = row_of(e.row) + e.col;
          if (reinterpret_cast<std::uintptr_t>(p) % 4 == 0) {
            *reinterpret_cast<pair*>(p) = {from_float<U>(to_float(x)), from_float<U>(to_float(y))};
          } else {
            p[0] = from_float<U>(to_float(x)), p[1] = from_float<U>(to_float(y));
          }
        },
        f.v);
  } else {
    f.for_each([&](const T& x, int r, int c) {
      if (r < rows) row_of(r)[c] = from_float<U>(to_float(x));
    });
  }
}

/// Reads rows r < rows of an M x N fragment of type T from global memory, row r from
/// row_of(r) as store_rows writes them; rows past `rows` are 0.
template <class T, int M, int N, class RowOf>
TP_HD TP_FORCEINLINE fragment<T, M, N> load_rows(int rows, RowOf&& row_of) {
  fragment<T, M, N> f;
  f.for_each([&](T& x, int r, int c) { x = from_float<T>(r < rows ? to_float(row_of(r)[c]) : 0.0f); });
  return f;
}

/// Writes a fragment to M x N consecutive elements of shared memory at dst (16-byte aligned)
/// in the backend's register order (prim::tile_registers::store_packed): on the GPU 16-byte
/// stores without bank conflicts, for a buffer that a bulk copy moves as it is
/// (reduce_add_smem_to_gmem) and load_packed reads back. Follow it with commit_smem().
template <class T, int M, int N>
TP_HD TP_FORCEINLINE void store_packed(T* dst, const fragment<T, M, N>& f) {
  prim::note_smem_write(dst, sizeof(T) * M * N, "tp::store_packed");
  prim::tile_registers<M, N>::store_packed(dst, f.v);
}

/// Reads a fragment from M x N consecutive elements of global memory at src (16-byte aligned)
/// in the order store_packed writes them.
template <class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<T, M, N> load_packed(const T* src) {
  fragment<T, M, N> f;
  prim::tile_registers<M, N>::load_packed(src, f.v);
  return f;
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

/// Reads a row vector from an SMEM view of one column (M x 1): row r from src(r, 0). Values
/// stored along a row (one per row of a tile: A's M-major scales) are read through its
/// transpose: tp::load_row_vector(tp::transpose(tp::cols<64>(tp::rows<1>(s, j), c0))).
template <class Ref>
TP_HD TP_FORCEINLINE row_vector<Ref::rows> load_row_vector(const Ref& src) {
  static_assert(is_smem_ref_v<Ref> && Ref::cols == 1, "tilepipe: load_row_vector reads an M x 1 SMEM view");
  detail::note_view(src, false, "tp::load_row_vector");
  row_vector<Ref::rows> v;
  v.for_each([&](float& x, int r) { x = to_float(*src.ptr(r, 0)); });
  return v;
}

/// Reads N rows of an SMEM view of one column from row `first` on: row r from src(first + r,
/// 0). `first` may be any row (the values are read one by one; a column slice, tp::cols,
/// starts at a 16-byte boundary): a tile's rows inside a block that TMA loaded from the
/// 16-byte boundary at or before the tile's first row (the grouped fp8 matmul's A scales).
template <int N, class Ref>
TP_HD TP_FORCEINLINE row_vector<N> load_row_vector(const Ref& src, int first) {
  static_assert(is_smem_ref_v<Ref> && Ref::cols == 1 && N <= Ref::rows,
                "tilepipe: load_row_vector<N> reads N rows of an M x 1 SMEM view (N <= M)");
  if constexpr (debug_checks)
    TP_REQUIRE(first >= 0 && first + N <= Ref::rows, "load_row_vector: rows [%d, %d) of an SMEM view of %d rows", first,
               first + N, Ref::rows);
  detail::note_view(src, false, "tp::load_row_vector");
  row_vector<N> v;
  v.for_each([&](float& x, int r) { x = to_float(*src.ptr(first + r, 0)); });
  return v;
}

}  // namespace tilepipe
