// A non-specialised matmul: C = A * B, one CTA per output tile, a pipeline over K.
//
// Every warpgroup of the CTA computes BM / WGs rows of the tile with asynchronous wgmma
// and leaves one wgmma group in flight across steps, so the specs carry delay_release<1>:
// a slot is refilled only once the wgmma that read it has finished.
#pragma once

#include <tilepipe/kernels/matmul.cuh>  // b_layout
#include <tilepipe/tilepipe.cuh>

namespace tp = tilepipe;

/// How B is stored: row-major K x N, or column-major (row-major N x K, i.e. B transposed).
using tilepipe::b_layout;

template <class T, int BM, int BN, int Stages, int WGs, b_layout BL = b_layout::row_major>
struct matmul_kernel {
  static constexpr int num_threads = WGs;
  static constexpr int BK = 64;            // 64 x 16-bit elements: one 128-byte swizzled row
  static constexpr int WM = BM / WGs;      // rows per warpgroup
  using a_tile = tp::tile<tp::block<BM, BK>, tp::swizzle<128>>;
  using b_tile = std::conditional_t<BL == b_layout::row_major, tp::tile<tp::block<BK, BN>, tp::swizzle<128>>,
                                    tp::tile<tp::block<BN, BK>, tp::swizzle<128>>>;
  using c_tile = tp::tile<tp::block<WM, BN>, tp::swizzle<128>>;
  static_assert(WM % 64 == 0, "each warpgroup computes a multiple of 64 rows");

  int tiles_m, tiles_n, k_steps, group;

  TP_HD void operator()(tp::kernel_context& ctx, tp::gmem<T, 2, a_tile> a, tp::gmem<T, 2, b_tile> b,
                        tp::gmem<T, 2, c_tile> c) const {
    const tp::tile_coord t = tp::grouped_tile_order(ctx.axis_index(0), tiles_m, tiles_n, group);
    const int wg = ctx.thread_index();

    tp::accumulator<WM, BN> acc = tp::zeros<float, WM, BN>();
    auto step = [&](auto, auto a_smem, auto b_smem) {
      auto b_kn = [&] {  // B as a K x N operand
        if constexpr (BL == b_layout::row_major) return b_smem;
        else return tp::transpose(b_smem);
      }();
      tp::wgmma(acc, tp::rows<WM>(a_smem, wg * WM), b_kn);
      tp::wgmma_wait<1>();  // keep one group in flight: the previous step's is done
    };
    const int m = t.m, n = t.n;
    auto b_index = [=](auto k) {
      if constexpr (BL == b_layout::row_major) return tp::idx(k, n);
      else return tp::idx(n, k);
    };
    auto pipe = tp::emit_pipeline(step, tp::grid(k_steps),
                                  tp::in_specs(tp::spec<a_tile>([=](auto k) { return tp::idx(m, k); }, tp::delay_release<1>),
                                               tp::spec<b_tile>(b_index, tp::delay_release<1>)),
                                  tp::max_concurrent_steps<Stages>);
    static_assert(decltype(pipe)::template smem_bytes<decltype(a), decltype(b)> <= smem_bytes);
    pipe(ctx, a, b);
    tp::wgmma_wait<0>(acc);

    // Epilogue: registers -> swizzled SMEM -> TMA store (clipped at the matrix edge).
    auto c_smem = ctx.alloc_per_warpgroup<tp::smem<T, c_tile>>();
    tp::store(c_smem, acc);
    tp::commit_smem();
    tp::copy_smem_to_gmem(c_smem, c, tp::idx(t.m * WGs + wg, t.n));
    tp::wait_smem_to_gmem<0>();
  }

  /// Shared memory per CTA: the pipeline's slots and barriers (checked against the
  /// pipeline's own count above), which the epilogue's C tiles reuse once the pipeline has
  /// ended. Asking for no more lets small tiles share an SM.
  static constexpr std::size_t pipeline_bytes = Stages * (BM * BK + BK * BN) * sizeof(T) + 2 * 1024;
  static constexpr std::size_t epilogue_bytes = WGs * WM * BN * sizeof(T);
  static constexpr std::size_t smem_bytes = pipeline_bytes > epilogue_bytes ? pipeline_bytes : epilogue_bytes;

  /// The kernel and launch configuration for C (M x N) = A (M x K) * B.
  static matmul_kernel make(long long M, long long N, long long K, int group = 8) {
    return {static_cast<int>((M + BM - 1) / BM), static_cast<int>((N + BN - 1) / BN),
            static_cast<int>((K + BK - 1) / BK), group};
  }
  tp::launch_config config() const { return {.grid = {tiles_m * tiles_n}, .smem_bytes = smem_bytes}; }
};
