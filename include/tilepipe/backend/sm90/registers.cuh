// Register tiles on sm_90: an M x N tile is spread over the warpgroup's 128 threads in the
// layout wgmma writes its accumulators in (PTX ISA "Matrix fragments for wgmma"): for the
// 64-row block b, thread t = 32 w + l and its register i = 4 j + q hold
//     row = 64 b + 16 w + l / 4 + 8 (q / 2),   col = 8 j + 2 (l % 4) + q % 2.
// A thread thus holds two rows of each block (q / 2 = 0, 1), which the four lanes
// l / 4 = const share; a row vector keeps one value per such row (slot 2 b + q / 2).
#pragma once

#include "../../core/config.cuh"
#include "../../core/dtypes.cuh"
#include "../primitives.cuh"  // the declarations defined here
#include "stmatrix.cuh"
#include "sync.cuh"
#include "wgmma.cuh"

#include <cstring>

namespace tilepipe::sm90 {

/// The row and column of this thread's register i of 64-row block b.
TP_HD TP_FORCEINLINE int tile_row(int b, int i) {
  const int t = static_cast<int>(threadIdx.x % warpgroup_size);
  return 64 * b + 16 * (t / 32) + (t % 32) / 4 + 8 * ((i % 4) / 2);
}
TP_HD TP_FORCEINLINE int tile_col(int i) {
  const int t = static_cast<int>(threadIdx.x % warpgroup_size);
  return 8 * (i / 4) + 2 * (t % 4) + i % 2;
}

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

}  // namespace tilepipe::sm90

namespace tilepipe::prim {

template <int M>
struct row_registers {
  static constexpr int slots = 2 * (M / 64);
  TP_HD static TP_FORCEINLINE int row(int s) { return sm90::tile_row(s / 2, 2 * (s % 2)); }
  TP_HD static TP_FORCEINLINE void pin(float (&v)[slots]) {
#pragma unroll
    for (int s = 0; s < slots; ++s) sm90::fence_register(v[s]);
  }
  /// The four lanes l / 4 = const share a row: two butterfly exchanges.
  template <class F>
  TP_HD static TP_FORCEINLINE void combine(float (&v)[slots], F&& f) {
#pragma unroll
    for (int s = 0; s < slots; ++s) {
      v[s] = f(v[s], __shfl_xor_sync(0xffffffffu, v[s], 1));
      v[s] = f(v[s], __shfl_xor_sync(0xffffffffu, v[s], 2));
    }
  }
};

template <int M, int N>
struct tile_registers {
  static constexpr int blocks = M / 64;
  static constexpr int per_block = N / 2;  // registers per thread per 64-row block

  template <class T>
  using storage = T[blocks][per_block];

  template <class T>
  TP_HD static TP_FORCEINLINE T (&block(storage<T>& v, int b))[per_block] {
    return v[b];
  }

  /// Window columns start at a multiple of 8: registers 4 j .. 4 j + 3 of a block hold
  /// columns 8 j .. 8 j + 7, so the window starts at register C0 / 2 of block R0 / 64.
  template <int R0, int C0, int Rows, int Cols, class F, class... S>
  TP_HD static TP_FORCEINLINE void for_each(F&& f, S&... s) {
#pragma unroll
    for (int b = 0; b < Rows / 64; ++b)
#pragma unroll
      for (int i = 0; i < Cols / 2; ++i)
        f(s[R0 / 64 + b][C0 / 2 + i]...,
          tile_index{sm90::tile_row(b, i), sm90::tile_col(i), 2 * (R0 / 64 + b) + (i % 4) / 2});
  }

  /// Registers 2 k and 2 k + 1 hold columns c and c + 1 of one row.
  template <class F, class T>
  TP_HD static TP_FORCEINLINE void for_each_pair(F&& f, const storage<T>& v) {
#pragma unroll
    for (int b = 0; b < blocks; ++b)
#pragma unroll
      for (int i = 0; i < per_block; i += 2)
        f(v[b][i], v[b][i + 1], tile_index{sm90::tile_row(b, i), sm90::tile_col(i), 2 * b + (i % 4) / 2});
  }

  /// Each thread folds its registers of each of its two rows per block, then the four
  /// lanes that share a row exchange their partial results.
  template <class T, class F>
  TP_HD static TP_FORCEINLINE void reduce_rows(const storage<T>& v, float init, F&& f, float (&out)[2 * blocks]) {
    reduce_rows_in_thread(v, init, f, out);
    row_registers<M>::combine(out, f);
  }
  template <class T, class F>
  TP_HD static TP_FORCEINLINE void reduce_rows_in_thread(const storage<T>& v, float init, F&& f,
                                                         float (&out)[2 * blocks]) {
#pragma unroll
    for (int b = 0; b < blocks; ++b) {
      float acc[2] = {init, init};
#pragma unroll
      for (int i = 0; i < per_block; ++i) acc[(i % 4) / 2] = f(acc[(i % 4) / 2], to_float(v[b][i]));
      out[2 * b] = acc[0], out[2 * b + 1] = acc[1];
    }
  }

  TP_HD static TP_FORCEINLINE int first_column() { return sm90::tile_col(0); }

  template <class T>
  TP_HD static TP_FORCEINLINE void pin(storage<T>& v) {
#pragma unroll
    for (int b = 0; b < blocks; ++b)
#pragma unroll
      for (int i = 0; i < per_block; ++i) sm90::fence_register(v[b][i]);
  }

  /// Register group j (registers 4 j' .. 4 j' + 3 of a block, j counted over the blocks) of
  /// thread t at elements 4 (128 j + t) ..: a warp's access is 512 contiguous bytes.
  template <class T>
  struct alignas(4 * sizeof(T)) quad {
    T v[4];
  };
  template <class T>
  TP_HD static TP_FORCEINLINE void store_packed(T* p, const storage<T>& v) {
    const int t = static_cast<int>(threadIdx.x % warpgroup_size);
#pragma unroll
    for (int b = 0; b < blocks; ++b)
#pragma unroll
      for (int j = 0; j < per_block / 4; ++j)
        reinterpret_cast<quad<T>*>(p)[(b * per_block / 4 + j) * warpgroup_size + t] = {
            {v[b][4 * j], v[b][4 * j + 1], v[b][4 * j + 2], v[b][4 * j + 3]}};
  }
  template <class T>
  TP_HD static TP_FORCEINLINE void load_packed(const T* p, storage<T>& v) {
    const int t = static_cast<int>(threadIdx.x % warpgroup_size);
#pragma unroll
    for (int b = 0; b < blocks; ++b)
#pragma unroll
      for (int j = 0; j < per_block / 4; ++j) {
        const quad<T> q = reinterpret_cast<const quad<T>*>(p)[(b * per_block / 4 + j) * warpgroup_size + t];
#pragma unroll
        for (int e = 0; e < 4; ++e) v[b][4 * j + e] = q.v[e];
      }
  }

  static constexpr bool has_matrix_store = true;

  /// One stmatrix per 16 rows x 16 columns of each warp. Registers 4 j, 4 j + 2, 4 j + 4
  /// and 4 j + 6 hold this lane's pair of the 8 x 8 matrices at (rows 0-7, columns group
  /// j), (rows 8-15, j), (0-7, j + 1) and (8-15, j + 1) of the warp's 16 rows; lane l names
  /// row l % 8 of matrix l / 8.
  template <int R0, int C0, class U, class Ref, class T>
  TP_HD static TP_FORCEINLINE void matrix_store(const Ref& dst, const storage<T>& v) {
    auto pair = [&](int b, int i) { return sm90::pack_pair<U>(to_float(v[b][i]), to_float(v[b][i + 1])); };
    const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x % warpgroup_size) / 32;
    const int m = lane / 8, row = 16 * warp + 8 * (m % 2) + lane % 8;
    const std::uint32_t base = sm90::smem_address(dst.base);
#pragma unroll
    for (int b = 0; b < Ref::rows / 64; ++b)
#pragma unroll
      for (int j = 0; j < Ref::cols / 8; j += 2) {
        constexpr int fb = R0 / 64, fi = C0 / 2;
        sm90::stmatrix_x4(base + Ref::layout::offset(dst.row0 + 64 * b + row, dst.col0 + 8 * (j + m / 2)),
                          pair(fb + b, fi + 4 * j), pair(fb + b, fi + 4 * j + 2), pair(fb + b, fi + 4 * j + 4),
                          pair(fb + b, fi + 4 * j + 6));
      }
  }
};

}  // namespace tilepipe::prim
