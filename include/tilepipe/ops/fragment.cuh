// Register tiles: a fragment<T, M, N> is an M x N tile held by one warpgroup, in the
// registers of its threads as the backend lays them out (prim::tile_registers: on the GPU
// the layout wgmma writes its accumulators in, in the interpreter the whole tile in one
// host thread). Every operation below is written against that trait and gives the same
// values on both.
#pragma once

#include "../backend/primitives.cuh"
#include "../core/config.cuh"
#include "../core/dtypes.cuh"

#include <cmath>
#include <type_traits>

namespace tilepipe {

/// One value per row of an M-row fragment (row maxima, row sums, softmax statistics),
/// held like the fragment's rows. Combine them with + - * / (row vectors or scalars),
/// tp::max, tp::exp2, tp::map, tp::zip; make one with tp::full<tp::row_vector<M>>(x).
template <int M>
struct row_vector {
  static_assert(M % 64 == 0, "tilepipe: a row vector has the rows of a fragment: a multiple of 64");
  static constexpr int rows = M;
  using registers = prim::row_registers<M>;
  static constexpr int slots = registers::slots;  // values this thread holds
  float v[slots];

  /// Calls f(value&, row) for every value this thread holds.
  template <class F>
  TP_HD TP_FORCEINLINE void for_each(F&& f) {
#pragma unroll
    for (int s = 0; s < slots; ++s) f(v[s], registers::row(s));
  }
  template <class F>
  TP_HD TP_FORCEINLINE void for_each(F&& f) const {
#pragma unroll
    for (int s = 0; s < slots; ++s) f(v[s], registers::row(s));
  }
};

template <class V>
inline constexpr bool is_row_vector_v = false;
template <int M>
inline constexpr bool is_row_vector_v<row_vector<M>> = true;

template <class T, int M, int N>
struct fragment {
  static_assert(M % 64 == 0, "tilepipe: a fragment has a multiple of 64 rows (one wgmma M block per 64)");
  static_assert(N % 8 == 0, "tilepipe: a fragment has a multiple of 8 columns");
  using value_type = T;
  static constexpr int rows = M;
  static constexpr int cols = N;
  static constexpr int blocks = M / 64;  // wgmma's 64-row blocks
  static constexpr int per_block = N / 2;  // registers per thread per 64-row block on the GPU
  using registers = prim::tile_registers<M, N>;

  typename registers::template storage<T> v;  // this thread's elements

  /// Accumulator block b (rows 64 b .. 64 b + 63) as wgmma takes it.
  TP_HD TP_FORCEINLINE auto block(int b) -> decltype(registers::block(v, b)) { return registers::block(v, b); }

  /// Calls f(value&, row, col) for every element this thread holds.
  template <class F>
  TP_HD TP_FORCEINLINE void for_each(F&& f) {
    registers::template for_each<0, 0, M, N>([&](T& x, prim::tile_index e) { f(x, e.row, e.col); }, v);
  }
  template <class F>
  TP_HD TP_FORCEINLINE void for_each(F&& f) const {
    const_cast<fragment*>(this)->for_each([&](T& x, int r, int c) { f(x, r, c); });
  }
};

/// The f32 accumulator wgmma writes.
template <int M, int N>
using accumulator = fragment<float, M, N>;

/// Rows 64 b .. 64 b + 63 of x as a 64-row fragment (a reference into x): wgmma's M blocks
/// are laid out alike in both backends, a 64-row block of a taller fragment as a 64-row one.
template <class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<T, 64, N>& row_block(fragment<T, M, N>& x, int b) {
  return *reinterpret_cast<fragment<T, 64, N>*>(&x.block(b)[0]);
}

// ---- construction and elementwise math ---------------------------------------------------

template <class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<T, M, N> full(float x) {
  fragment<T, M, N> f;
  const T t = from_float<T>(x);
  f.for_each([t](T& e, int, int) { e = t; });
  return f;
}

template <class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<T, M, N> zeros() {
  return full<T, M, N>(0.0f);
}

/// out = f(x) elementwise, computed in float; f may also take (value, row, col).
template <class F, class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<T, M, N> map(const fragment<T, M, N>& x, F&& f) {
  fragment<T, M, N> r = x;
  r.for_each([&](T& e, int row, int col) {
    if constexpr (std::is_invocable_v<F, float, int, int>) e = from_float<T>(f(to_float(e), row, col));
    else e = from_float<T>(f(to_float(e)));
  });
  return r;
}

template <class F, class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<T, M, N> zip(const fragment<T, M, N>& x, const fragment<T, M, N>& y, F&& f) {
  fragment<T, M, N> r;
  prim::tile_registers<M, N>::template for_each<0, 0, M, N>(
      [&](T& out, const T& a, const T& b, prim::tile_index) { out = from_float<T>(f(to_float(a), to_float(b))); }, r.v,
      x.v, y.v);
  return r;
}

/// Converts every element to U.
template <class U, class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<U, M, N> cast(const fragment<T, M, N>& x) {
  fragment<U, M, N> r;
  prim::tile_registers<M, N>::template for_each<0, 0, M, N>(
      [](U& out, const T& a, prim::tile_index) { out = from_float<U>(to_float(a)); }, r.v, x.v);
  return r;
}

#define TP_FRAGMENT_OPERATOR(op)                                                                  \
  template <class T, int M, int N>                                                                \
  TP_HD TP_FORCEINLINE fragment<T, M, N> operator op(const fragment<T, M, N>& x, const fragment<T, M, N>& y) { \
    return zip(x, y, [](float a, float b) { return a op b; });                                     \
  }                                                                                               \
  template <class T, int M, int N>                                                                \
  TP_HD TP_FORCEINLINE fragment<T, M, N> operator op(const fragment<T, M, N>& x, float s) {       \
    return map(x, [s](float a) { return a op s; });                                               \
  }                                                                                               \
  template <class T, int M, int N>                                                                \
  TP_HD TP_FORCEINLINE fragment<T, M, N> operator op(float s, const fragment<T, M, N>& x) {       \
    return map(x, [s](float a) { return s op a; });                                               \
  }
TP_FRAGMENT_OPERATOR(+)
TP_FRAGMENT_OPERATOR(-)
TP_FRAGMENT_OPERATOR(*)
TP_FRAGMENT_OPERATOR(/)
#undef TP_FRAGMENT_OPERATOR

template <class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<T, M, N> max(const fragment<T, M, N>& x, const fragment<T, M, N>& y) {
  return zip(x, y, [](float a, float b) { return fmaxf(a, b); });
}
template <class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<T, M, N> max(const fragment<T, M, N>& x, float s) {
  return map(x, [s](float a) { return fmaxf(a, s); });
}
template <class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<T, M, N> exp2(const fragment<T, M, N>& x) {
  return map(x, [](float a) { return prim::exp2(a); });
}

// ---- row reductions and row broadcasts -------------------------------------------------

namespace detail {
template <class F, class T, int M, int N>
TP_HD TP_FORCEINLINE row_vector<M> reduce_rows(const fragment<T, M, N>& x, float init, F&& f) {
  row_vector<M> r;
  prim::tile_registers<M, N>::reduce_rows(x.v, init, f, r.v);
  return r;
}
}  // namespace detail

template <class T, int M, int N>
TP_HD TP_FORCEINLINE row_vector<M> row_max(const fragment<T, M, N>& x) {
  return detail::reduce_rows(x, -INFINITY, [](float a, float b) { return fmaxf(a, b); });
}
template <class T, int M, int N>
TP_HD TP_FORCEINLINE row_vector<M> row_sum(const fragment<T, M, N>& x) {
  return detail::reduce_rows(x, 0.0f, [](float a, float b) { return a + b; });
}

/// Row sums left unfinished: this thread's share of each of its rows (on the GPU, the four
/// threads that share a row hold a quarter of its columns each; in the interpreter the whole
/// sum). Scaling and adding such partial sums step after step and finishing them once with
/// tp::finish_row_sum gives the row sums: an online softmax saves the exchange between
/// threads at every step (FlashAttention-3 defers its row-sum reduction the same way).
///     l = l * alpha + tp::partial_row_sum(p);   ...   l = tp::finish_row_sum(l);
template <class T, int M, int N>
TP_HD TP_FORCEINLINE row_vector<M> partial_row_sum(const fragment<T, M, N>& x) {
  row_vector<M> r;
  prim::tile_registers<M, N>::reduce_rows_in_thread(x.v, 0.0f, [](float a, float b) { return a + b; }, r.v);
  return r;
}
/// The row sums of partial sums (tp::partial_row_sum) the threads sharing each row hold.
template <int M>
TP_HD TP_FORCEINLINE row_vector<M> finish_row_sum(row_vector<M> partial) {
  prim::row_registers<M>::combine(partial.v, [](float a, float b) { return a + b; });
  return partial;
}

/// out(r, c) = f(x(r, c), rv(r)): broadcasts a row vector along the columns.
template <class F, class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<T, M, N> broadcast_rows(const fragment<T, M, N>& x, const row_vector<M>& rv, F&& f) {
  fragment<T, M, N> r;
  prim::tile_registers<M, N>::template for_each<0, 0, M, N>(
      [&](T& out, const T& a, prim::tile_index e) { out = from_float<T>(f(to_float(a), rv.v[e.row_slot])); }, r.v, x.v);
  return r;
}

/// The columns [begin, end) of one row of a fragment.
struct column_range {
  int begin, end;
};

/// Keeps x(r, c) for c in bounds(r) (a column_range) and sets the rest to fill: ragged
/// edges, causal and local-window masks. bounds runs once per row a thread holds (two per
/// 64 rows on the GPU), so an element costs two integer compares and a select.
template <class T, int M, int N, class Bounds>
TP_HD TP_FORCEINLINE void mask_columns(fragment<T, M, N>& x, Bounds&& bounds, float fill) {
  using rows = prim::row_registers<M>;
  using tiles = prim::tile_registers<M, N>;
  // The bounds move by the thread's first column once per row, so that each element compares
  // a compile-time column offset (FlashAttention-3's mask) instead of its column index.
  const int first = tiles::first_column();
  column_range kept[rows::slots];
#pragma unroll
  for (int s = 0; s < rows::slots; ++s) {
    const column_range b = bounds(rows::row(s));
    kept[s] = {b.begin - first, b.end - first};
  }
  tiles::template for_each<0, 0, M, N>(
      [&](T& e, prim::tile_index i) {
        const column_range k = kept[i.row_slot];
        const int c = i.col - first;
        e = c >= k.begin && c < k.end ? e : from_float<T>(fill);
      },
      x.v);
}

#define TP_ROW_OPERATOR(op)                                                                        \
  template <class T, int M, int N>                                                                 \
  TP_HD TP_FORCEINLINE fragment<T, M, N> operator op(const fragment<T, M, N>& x, const row_vector<M>& rv) { \
    return broadcast_rows(x, rv, [](float a, float b) { return a op b; });                         \
  }
TP_ROW_OPERATOR(+)
TP_ROW_OPERATOR(-)
TP_ROW_OPERATOR(*)
TP_ROW_OPERATOR(/)
#undef TP_ROW_OPERATOR

// ---- row vectors: online statistics ----------------------------------------------------
//   m_new = tp::max(m, tp::row_max(s));
//   l = l * tp::exp2(m - m_new) + tp::row_sum(tp::exp2(s - m_new));

/// A row vector with every row x: tp::full<tp::row_vector<64>>(-INFINITY).
template <class V>
  requires is_row_vector_v<V>
TP_HD TP_FORCEINLINE V full(float x) {
  V r;
  r.for_each([x](float& e, int) { e = x; });
  return r;
}

/// out(r) = f(x(r)); f may also take (value, row).
template <int M, class F>
TP_HD TP_FORCEINLINE row_vector<M> map(const row_vector<M>& x, F&& f) {
  row_vector<M> r = x;
  r.for_each([&](float& e, int row) {
    if constexpr (std::is_invocable_v<F, float, int>) e = f(e, row);
    else e = f(e);
  });
  return r;
}

/// out(r) = f(x(r), y(r)).
template <int M, class F>
TP_HD TP_FORCEINLINE row_vector<M> zip(const row_vector<M>& x, const row_vector<M>& y, F&& f) {
  row_vector<M> r;
#pragma unroll
  for (int s = 0; s < row_vector<M>::slots; ++s) r.v[s] = f(x.v[s], y.v[s]);
  return r;
}

#define TP_ROW_VECTOR_OPERATOR(op)                                                                 \
  template <int M>                                                                                 \
  TP_HD TP_FORCEINLINE row_vector<M> operator op(const row_vector<M>& x, const row_vector<M>& y) { \
    return zip(x, y, [](float a, float b) { return a op b; });                                     \
  }                                                                                                \
  template <int M>                                                                                 \
  TP_HD TP_FORCEINLINE row_vector<M> operator op(const row_vector<M>& x, float s) {                \
    return map(x, [s](float a) { return a op s; });                                                \
  }                                                                                                \
  template <int M>                                                                                 \
  TP_HD TP_FORCEINLINE row_vector<M> operator op(float s, const row_vector<M>& x) {                \
    return map(x, [s](float a) { return s op a; });                                                \
  }
TP_ROW_VECTOR_OPERATOR(+)
TP_ROW_VECTOR_OPERATOR(-)
TP_ROW_VECTOR_OPERATOR(*)
TP_ROW_VECTOR_OPERATOR(/)
#undef TP_ROW_VECTOR_OPERATOR

template <int M>
TP_HD TP_FORCEINLINE row_vector<M> max(const row_vector<M>& x, const row_vector<M>& y) {
  return zip(x, y, [](float a, float b) { return fmaxf(a, b); });
}
template <int M>
TP_HD TP_FORCEINLINE row_vector<M> max(const row_vector<M>& x, float s) {
  return map(x, [s](float a) { return fmaxf(a, s); });
}
template <int M>
TP_HD TP_FORCEINLINE row_vector<M> exp2(const row_vector<M>& x) {
  return map(x, [](float a) { return prim::exp2(a); });
}

}  // namespace tilepipe
