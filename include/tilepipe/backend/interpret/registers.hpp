// Register tiles in the interpreter: the host thread that runs a warpgroup holds the whole
// tile, row-major, and a row vector holds every row.
#pragma once

#include "../../core/config.cuh"
#include "../../core/dtypes.cuh"
#include "../primitives.cuh"  // the declarations defined here

#include <cstring>

namespace tilepipe::prim {

template <int M>
struct row_registers {
  static constexpr int slots = M;
  TP_HD static TP_FORCEINLINE int row(int s) { return s; }
  TP_HD static TP_FORCEINLINE void pin(float (&)[slots]) {}
  template <class F>
  TP_HD static TP_FORCEINLINE void combine(float (&)[slots], F&&) {}  // one thread holds every row
};

template <int M, int N>
struct tile_registers {
  template <class T>
  using storage = T[M * N];

  template <class T>
  TP_HD static TP_FORCEINLINE T* block(storage<T>& v, int b) {
    return v + b * 64 * N;
  }

  template <int R0, int C0, int Rows, int Cols, class F, class... S>
  TP_HD static TP_FORCEINLINE void for_each(F&& f, S&... s) {
    for (int r = 0; r < Rows; ++r)
      for (int c = 0; c < Cols; ++c) f(s[(R0 + r) * N + C0 + c]..., tile_index{r, c, R0 + r});
  }

  template <class F, class T>
  TP_HD static TP_FORCEINLINE void for_each_pair(F&& f, const storage<T>& v) {
    for (int r = 0; r < M; ++r)
      for (int c = 0; c < N; c += 2) f(v[r * N + c], v[r * N + c + 1], tile_index{r, c, r});
  }

  template <class T, class F>
  TP_HD static TP_FORCEINLINE void reduce_rows(const storage<T>& v, float init, F&& f, float (&out)[M]) {
    for (int row = 0; row < M; ++row) {
      float acc = init;
      for (int c = 0; c < N; ++c) acc = f(acc, to_float(v[row * N + c]));
      out[row] = acc;
    }
  }

  template <class T, class F>
  TP_HD static TP_FORCEINLINE void reduce_rows_in_thread(const storage<T>& v, float init, F&& f, float (&out)[M]) {
    reduce_rows(v, init, f, out);  // the thread holds whole rows
  }

  TP_HD static TP_FORCEINLINE int first_column() { return 0; }

  template <class T>
  TP_HD static TP_FORCEINLINE void pin(storage<T>&) {}

  // Row-major, as the thread holds the tile.
  template <class T>
  TP_HD static TP_FORCEINLINE void store_packed(T* p, const storage<T>& v) {
    std::memcpy(p, v, sizeof(storage<T>));
  }
  template <class T>
  TP_HD static TP_FORCEINLINE void load_packed(const T* p, storage<T>& v) {
    std::memcpy(v, p, sizeof(storage<T>));
  }

  static constexpr bool has_matrix_store = false;
};

}  // namespace tilepipe::prim
