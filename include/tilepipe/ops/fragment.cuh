// Register tiles in the wgmma accumulator layout.
//
// A fragment<T, M, N> is an M x N tile held by one warpgroup. On the GPU each of the 128
// threads holds M * N / 128 elements in the layout wgmma writes its accumulators in
// (PTX ISA "Matrix fragments for wgmma"): for the 64-row block b, thread t = 32 w + l and
// its register i = 4 j + q hold
//     row = 64 b + 16 w + l / 4 + 8 (q / 2),   col = 8 j + 2 (l % 4) + q % 2.
// In the interpreter one host thread holds the whole tile, row-major. Every operation
// below gives the same values on both.
#pragma once

#include "../backend/primitives.cuh"
#include "../core/config.cuh"
#include "../core/dtypes.cuh"

#include <cmath>
#include <type_traits>

namespace tilepipe {

namespace detail {
#if TP_DEVICE_PASS
TP_DEVICE TP_FORCEINLINE int frag_row(int b, int i) {
  const int t = static_cast<int>(threadIdx.x % warpgroup_size);
  return 64 * b + 16 * (t / 32) + (t % 32) / 4 + 8 * ((i % 4) / 2);
}
TP_DEVICE TP_FORCEINLINE int frag_col(int i) {
  const int t = static_cast<int>(threadIdx.x % warpgroup_size);
  return 8 * (i / 4) + 2 * (t % 4) + i % 2;
}
/// A row vector of M rows: a thread holds the rows of its fragment registers, two per
/// 64-row block (slot 2 b + h is row 64 b + 16 w + l / 4 + 8 h).
template <int M>
inline constexpr int row_slots = 2 * (M / 64);
TP_HD TP_FORCEINLINE int row_of_slot(int s) { return frag_row(s / 2, 2 * (s % 2)); }
#else
/// A row vector of M rows: the interpreter's one thread holds every row.
template <int M>
inline constexpr int row_slots = M;
TP_HD TP_FORCEINLINE int row_of_slot(int s) { return s; }
#endif
}  // namespace detail

/// One value per row of an M-row fragment (row maxima, row sums, softmax statistics),
/// held like the fragment's rows. Combine them with + - * / (row vectors or scalars),
/// tp::max, tp::exp2, tp::map, tp::zip; make one with tp::full<tp::row_vector<M>>(x).
template <int M>
struct row_vector {
  static_assert(M % 64 == 0, "tilepipe: a row vector has the rows of a fragment: a multiple of 64");
  static constexpr int rows = M;
  static constexpr int slots = detail::row_slots<M>;  // values this thread holds
  float v[slots];

  /// Calls f(value&, row) for every value this thread holds.
  template <class F>
  TP_HD TP_FORCEINLINE void for_each(F&& f) {
#pragma unroll
    for (int s = 0; s < slots; ++s) f(v[s], detail::row_of_slot(s));
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
  static constexpr int blocks = M / 64;
  static constexpr int per_block = N / 2;  // registers per thread per 64-row block

#if TP_DEVICE_PASS
  T v[blocks][per_block];
  /// Accumulator block b as wgmma sees it.
  TP_HD TP_FORCEINLINE auto& block(int b) { return v[b]; }
#else
  T v[M * N];
  TP_HD TP_FORCEINLINE T* block(int b) { return v + b * 64 * N; }
#endif

  /// Calls f(value&, row, col) for every element this thread holds.
  template <class F>
  TP_HD TP_FORCEINLINE void for_each(F&& f) {
#if TP_DEVICE_PASS
#pragma unroll
    for (int b = 0; b < blocks; ++b)
#pragma unroll
      for (int i = 0; i < per_block; ++i) f(v[b][i], detail::frag_row(b, i), detail::frag_col(i));
#else
    for (int r = 0; r < M; ++r)
      for (int c = 0; c < N; ++c) f(v[r * N + c], r, c);
#endif
  }
  template <class F>
  TP_HD TP_FORCEINLINE void for_each(F&& f) const {
    const_cast<fragment*>(this)->for_each([&](T& x, int r, int c) { f(x, r, c); });
  }

  /// Element (r, c) in the interpreter (tests); not available on the GPU.
  TP_HD T at(int r, int c) const {
#if TP_DEVICE_PASS
    (void)r, (void)c;
    return T{};
#else
    return v[r * N + c];
#endif
  }
};

/// The f32 accumulator wgmma writes.
template <int M, int N>
using accumulator = fragment<float, M, N>;

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
#if TP_DEVICE_PASS
#pragma unroll
  for (int b = 0; b < M / 64; ++b)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) r.v[b][i] = from_float<T>(f(to_float(x.v[b][i]), to_float(y.v[b][i])));
#else
  for (int i = 0; i < M * N; ++i) r.v[i] = from_float<T>(f(to_float(x.v[i]), to_float(y.v[i])));
#endif
  return r;
}

/// Converts every element to U.
template <class U, class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<U, M, N> cast(const fragment<T, M, N>& x) {
  fragment<U, M, N> r;
#if TP_DEVICE_PASS
#pragma unroll
  for (int b = 0; b < M / 64; ++b)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) r.v[b][i] = from_float<U>(to_float(x.v[b][i]));
#else
  for (int i = 0; i < M * N; ++i) r.v[i] = from_float<U>(to_float(x.v[i]));
#endif
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

TP_HD TP_FORCEINLINE float fast_exp2(float x) {
#if TP_DEVICE_PASS
  return exp2f(x);
#else
  return std::exp2(x);
#endif
}

template <class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<T, M, N> max(const fragment<T, M, N>& x, const fragment<T, M, N>& y) {
  return zip(x, y, [](float a, float b) { return a > b ? a : b; });
}
template <class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<T, M, N> max(const fragment<T, M, N>& x, float s) {
  return map(x, [s](float a) { return a > s ? a : s; });
}
template <class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<T, M, N> exp2(const fragment<T, M, N>& x) {
  return map(x, [](float a) { return fast_exp2(a); });
}

// ---- row reductions and row broadcasts -------------------------------------------------

namespace detail {
template <class F, class T, int M, int N>
TP_HD TP_FORCEINLINE row_vector<M> reduce_rows(const fragment<T, M, N>& x, float init, F&& f) {
  row_vector<M> r;
#if TP_DEVICE_PASS
#pragma unroll
  for (int b = 0; b < M / 64; ++b) {
    float acc[2] = {init, init};
#pragma unroll
    for (int i = 0; i < N / 2; ++i) acc[(i % 4) / 2] = f(acc[(i % 4) / 2], to_float(x.v[b][i]));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      acc[h] = f(acc[h], __shfl_xor_sync(0xffffffffu, acc[h], 1));
      acc[h] = f(acc[h], __shfl_xor_sync(0xffffffffu, acc[h], 2));
      r.v[2 * b + h] = acc[h];
    }
  }
#else
  for (int row = 0; row < M; ++row) {
    float acc = init;
    for (int c = 0; c < N; ++c) acc = f(acc, to_float(x.v[row * N + c]));
    r.v[row] = acc;
  }
#endif
  return r;
}
}  // namespace detail

template <class T, int M, int N>
TP_HD TP_FORCEINLINE row_vector<M> row_max(const fragment<T, M, N>& x) {
  return detail::reduce_rows(x, -INFINITY, [](float a, float b) { return a > b ? a : b; });
}
template <class T, int M, int N>
TP_HD TP_FORCEINLINE row_vector<M> row_sum(const fragment<T, M, N>& x) {
  return detail::reduce_rows(x, 0.0f, [](float a, float b) { return a + b; });
}

/// out(r, c) = f(x(r, c), rv(r)): broadcasts a row vector along the columns.
template <class F, class T, int M, int N>
TP_HD TP_FORCEINLINE fragment<T, M, N> broadcast_rows(const fragment<T, M, N>& x, const row_vector<M>& rv, F&& f) {
  fragment<T, M, N> r;
#if TP_DEVICE_PASS
#pragma unroll
  for (int b = 0; b < M / 64; ++b)
#pragma unroll
    for (int i = 0; i < N / 2; ++i) r.v[b][i] = from_float<T>(f(to_float(x.v[b][i]), rv.v[2 * b + (i % 4) / 2]));
#else
  for (int row = 0; row < M; ++row)
    for (int c = 0; c < N; ++c) r.v[row * N + c] = from_float<T>(f(to_float(x.v[row * N + c]), rv.v[row]));
#endif
  return r;
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
  return zip(x, y, [](float a, float b) { return a > b ? a : b; });
}
template <int M>
TP_HD TP_FORCEINLINE row_vector<M> max(const row_vector<M>& x, float s) {
  return map(x, [s](float a) { return a > s ? a : s; });
}
template <int M>
TP_HD TP_FORCEINLINE row_vector<M> exp2(const row_vector<M>& x) {
  return map(x, [](float a) { return fast_exp2(a); });
}

}  // namespace tilepipe
