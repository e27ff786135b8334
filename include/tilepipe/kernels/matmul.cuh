// A persistent, warp-specialised matmul: C = epilogue(A * B).
//
//     tp::matmul(dev, a, b, tp::b_layout::row_major, c);                        // C = A B
//     tp::matmul(dev, a, b, tp::b_layout::col_major, c, {.bias = bias.data(), .act = tp::activation::gelu});
//
// One CTA per SM loops over output tiles, as a tile_scheduler deals them out: in an
// L2-friendly order, and with the last wave split by stream-K when a workspace for partial
// sums is given (a tile split between CTAs is finished by the CTA that runs its last step,
// after adding the others' partial sums). Each tile is one emit_pipeline_warp_specialized
// over K; the tiles' pipelines form a chain on hoisted allocations, so the memory warpgroup
// fetches the next tile's first blocks while the two compute warpgroups run the previous
// tile's epilogue. The epilogue applies a hook (bias, activation), converts to the output
// type and stores the accumulator in 64 x 64 chunks through two SMEM buffers with TMA,
// without waiting for the stores: they drain while the next tile computes.
//
// With Cluster = 2 (or 4), clusters of CTAs work on vertically adjacent tiles, which share
// their B block: each CTA loads 1/Cluster of it and multicasts it to the others, so L2
// serves B once per cluster, as cuBLAS's kernels for these shapes do.
//
// fp8 operands (T = fp8_e4m3 / fp8_e5m2, and B's type TB either of them) need
// b_layout::col_major (wgmma reads fp8 K-major) and BK = 128 (one 128-byte swizzled row of
// K). An epilogue with per-k-block scales (k_block_scales: block-scaled fp8) switches the
// k-step to promoting_k_step, which scales each k-block's product into the accumulator (a
// step then holds two k-blocks);
// kernels/scaled_matmul.cuh is the fp8 front end.
// (This kernel was examples/matmul_ws/matmul_ws_kernel.cuh; CHANGELOG.md.)
#pragma once

#include "../tilepipe.cuh"
#include "chunked_store_epilogue.cuh"
#include "matmul_k_step.cuh"

#include <cmath>

namespace tilepipe {

/// How B is stored: row-major K x N, or column-major (row-major N x K, i.e. B transposed,
/// as nn.Linear keeps its weights).
enum class b_layout { row_major, col_major };

/// The identity epilogue: C = A * B.
struct no_epilogue {
  TP_HD float operator()(float acc, long long, long long) const { return acc; }
};

/// C = max(A * B + bias[col], 0): a per-column bias from global memory, then ReLU.
template <class T>
struct bias_relu_epilogue {
  const T* bias;
  long long n;
  TP_HD float operator()(float acc, long long, long long col) const {
    const float v = acc + (col < n ? to_float(bias[col]) : 0.0f);
    return v > 0.0f ? v : 0.0f;
  }
};

/// An epilogue on a warpgroup's accumulator whose element (0, 0) is C(row0, col0): epi(v, row,
/// col) element by element, or epi.apply(acc, row0, col0) for an epilogue that reads once per
/// tile what its elements share (a scale: read per element, the loads are not merged).
template <class Epilogue, int M, int N>
TP_HD TP_FORCEINLINE accumulator<M, N> apply_epilogue(const Epilogue& epi, const accumulator<M, N>& acc, long long row0,
                                                      long long col0) {
  if constexpr (requires { epi.apply(acc, row0, col0); }) return epi.apply(acc, row0, col0);
  else return map(acc, [&](float v, int r, int c) { return epi(v, row0 + r, col0 + c); });
}

template <class T, class TC, int BM, int BN, int Stages, b_layout BL = b_layout::row_major, class Epilogue = no_epilogue,
          int BK = 64, int Cluster = 1, class TB = T>
struct matmul_ws_kernel {
  static constexpr warp_specialization<2, 40> ws{};       // 2 compute warpgroups, the memory one last
  static constexpr int num_threads = ws.num_threads;
  static constexpr int compute_wgs = ws.compute_wgs;
  static constexpr int SK = BK * static_cast<int>(sizeof(T));  // swizzle of K-major tiles: one row of K
  static constexpr bool promotes = k_block_scales<Epilogue>;   // scales per k-block, applied every block
  static constexpr int WM = BM / compute_wgs;                  // rows per compute warpgroup
  // Promoting: 64 rows a warpgroup take two k-blocks a step (promoting_k_step), more rows one
  // k-block 64 rows at a time (promoting_rows_k_step).
  static constexpr bool promotes_by_rows = promotes && WM > 64;
  static constexpr int KS = promotes && !promotes_by_rows ? 2 * BK : BK;  // K per step
  // promotes_by_rows: B's scales of a tile's first 128 k-blocks (K up to 16384; SMEM holds no
  // more), staged in SMEM per compute warpgroup before the tile's first step (promoting_rows_k_step).
  static constexpr int staged_b_scales = promotes_by_rows ? 128 : 0;
  static constexpr std::uint32_t staged_b_scale_bytes = compute_wgs * staged_b_scales * sizeof(float);
  static constexpr int EM = 64, EN = 64;                       // epilogue chunk: 64 x 64
  static constexpr long long partial_floats = WM * BN;         // one compute warpgroup's partial sum
  static_assert(!promotes || (BK == 128 && 128 % BN == 0 && BL == b_layout::col_major),
                "tilepipe: promoting matmul (per-k-block scales): k-blocks of 128 (BK = 128), a tile's columns in one "
                "128-column block of B's scales (BN divides 128), B K-major");
  using a_tile = tile<block<BM, KS>, swizzle<SK>>;
  // A K-major B block is one column panel per k-block: split into Cluster row boxes for multicast.
  using b_tile = std::conditional_t<BL == b_layout::row_major, tile<block<KS, BN>, swizzle<128>>,
                                    tile<block<BN, KS>, swizzle<SK>, box_rows<BN / Cluster>>>;
  using c_tile = tile<block<EM, EN>, swizzle<128>>;
  // A's k-block scales as a pipeline input (with_a_scales): a step's k-blocks (rows) of the
  // tile's BM rows (columns), from M-major scales [ceil(K/128), M]; 1 KB a stage.
  using a_scale_tile = tile<block<KS / BK, BM>>;
  using c_view = smem<TC, c_tile>;
  using a_ref = gmem<T, 2, a_tile>;
  using b_ref = gmem<TB, 2, b_tile>;
  using c_ref = gmem<TC, 2, c_tile>;
  static_assert(WM % 64 == 0 && BN % EN == 0, "tiles: 64-row multiples per warpgroup, 64-column multiples");
  static_assert(sizeof(TB) == sizeof(T), "tilepipe: matmul_ws_kernel: A and B of one element size (B's type differs "
                                         "from A's only among the fp8 types)");

  tile_scheduler<> sched;   // the tiles of (cluster row, tile column) and their k-steps
  Epilogue epilogue{};
  partials_ref partials{};  // stream-K workspace: a slot per compute warpgroup of the grid

  TP_HD void operator()(kernel_context& ctx, a_ref a, b_ref b, c_ref c) const { run(ctx, a, b, c); }

  /// The kernel; a_scales: nothing, or (with_a_scales) A's scales, a third input of each
  /// tile's pipeline that the promoting k-step reads from SMEM.
  template <class... AScales>
  TP_HD TP_FORCEINLINE void run(kernel_context& ctx, a_ref a, b_ref b, c_ref c, AScales... a_scales) const {
    static_assert(sizeof...(AScales) == 0 || promotes, "tilepipe: A's k-block scales are read by promoting k-steps");
    const int ci = ws.compute_index(ctx);
    const int rank = ctx.cluster_rank(), worker = ctx.axis_index(0) / Cluster, workers = ctx.axis_size(0) / Cluster;
    const int a_row_blocks = static_cast<int>((a.shape[0] + BM - 1) / BM);
    auto slot = [&](int w) { return (w * Cluster + rank) * compute_wgs + ci; };  // this warpgroup's in worker w
    accumulator<WM, BN> acc;  // lives in the compute warpgroups only
    // One chunk buffer per compute warpgroup where A's scales take SMEM beside the stages.
    chunked_store_epilogue<c_view, compute_wgs, sizeof...(AScales) == 1 ? 1 : 2> c_chunks;
    // promoting_k_step's products of a step's k-blocks, promoting_rows_k_step's of 64 rows
    [[maybe_unused]] std::conditional_t<promotes_by_rows, accumulator<64, BN>, accumulator<WM, BN>> first, second;
    const matmul_k_step<WM, BN, BL == b_layout::col_major> step{acc, ci};
    [[maybe_unused]] float* b_scales = nullptr;  // this warpgroup's staged B scales (promotes_by_rows)
    auto tile_pipeline = [&](work_tile u) {  // u.tile: this CTA's tile
      auto context = compute_context([&, u](auto pipeline) {
        acc = zeros<float, WM, BN>();
        if constexpr (promotes_by_rows) {  // once the last tile's steps have read theirs
          prim::warpgroup_sync();
          const long long col0 = static_cast<long long>(u.tile.n) * BN;
          const int n = min(u.k_end - u.k_begin, staged_b_scales);
          for (int i = prim::thread_in_warpgroup(); i < n; i += prim::warpgroup_threads())
            b_scales[i] = epilogue.b_scale(col0, u.k_begin + i);
          prim::warpgroup_sync();
        }
        pipeline();
        wgmma_wait<0>(acc);
        if (u.publishes) return publish_partial(acc, partials, slot(worker));  // another CTA finishes the tile
        for (int w = u.first_contributor; w < worker; ++w) accumulate_partial(acc, partials, slot(w));
        const long long row0 = static_cast<long long>(u.tile.m) * BM + ci * WM, col0 = static_cast<long long>(u.tile.n) * BN;
        acc = apply_epilogue(epilogue, acc, row0, col0);
        c_chunks.store(acc, c, [&](int rb, int cb) {
          return idx((u.tile.m * BM + ci * WM) / EM + rb, u.tile.n * (BN / EN) + cb);
        });
      });
      // A tile row past the matrix's edge (the last cluster's spare CTAs) reads the last
      // row block instead: its results are never stored, and an index map must stay inside.
      const int m = u.tile.m < a_row_blocks ? u.tile.m : a_row_blocks - 1;
      auto a_map = [m, k0 = u.k_begin](auto k) { return idx(m, k0 + k); };
      auto b_map = [n = u.tile.n, k0 = u.k_begin](auto k) {
        if constexpr (BL == b_layout::row_major) return idx(k0 + k, n);
        else return idx(n, k0 + k);
      };
      constexpr int delay = promotes ? 0 : 1;  // the blocks a wgmma left in flight still reads
      auto pipeline = [&](auto k_step, auto... a_scale_spec) {
        return emit_pipeline_warp_specialized(
            k_step, grid(u.k_end - u.k_begin),
            in_specs(spec<a_tile>(a_map, delay_release<delay>),
                         spec<b_tile>(b_map, delay_release<delay>, multicast<Cluster>), a_scale_spec...),
            out_specs(), ws, max_concurrent_steps<Stages>, context);
      };
      if constexpr (promotes) {
        const long long row0 = static_cast<long long>(u.tile.m) * BM + ci * WM, col0 = static_cast<long long>(u.tile.n) * BN;
        auto with_scales = [&](auto k_step) {
          if constexpr (sizeof...(AScales) == 1) {  // the scales of A's block: its rows, the step's k-blocks
            auto a_scale_map = [m, k0 = u.k_begin](auto k) { return idx(k0 + k, m); };
            return pipeline(k_step, spec<a_scale_tile>(a_scale_map, delay_release<delay>));
          } else {
            return pipeline(k_step);
          }
        };
        if constexpr (promotes_by_rows)
          return with_scales(promoting_rows_k_step<WM, BN, BK, Epilogue>{acc, first, ci, epilogue, row0, col0, u.k_begin,
                                                                         b_scales, staged_b_scales});
        else
          return with_scales(promoting_k_step<WM, BN, BK, Epilogue>{acc, first, second, ci, epilogue, row0, col0,
                                                                    2 * u.k_begin,
                                                                    static_cast<int>((a.shape[1] + BK - 1) / BK)});
      } else {
        return pipeline(step);
      }
    };
    auto loop = persistent_pipelines<work_tile, c_chunks.smem_bytes + staged_b_scale_bytes>(ws, ctx, tile_pipeline, a, b,
                                                                                            a_scales...);
    c_chunks.allocate(ctx, ci);
    if constexpr (promotes_by_rows)
      b_scales = reinterpret_cast<float*>(ctx.allocate(staged_b_scale_bytes, "B's scales of the tile")) + ci * staged_b_scales;

    // The persistent loop: this cluster's tiles (a column of Cluster tiles each) and pieces
    // of tiles, one pipeline of the chain each. The stores of tile rows past the end fall
    // outside C, and TMA drops them.
    const auto work = sched.worker(worker, workers);
    if (work.streams()) partials.require(partial_slots(workers * Cluster), partial_floats);
    loop.run(0, work.size(), 1, [&](int j) {
      work_tile u = work[j];
      u.tile.m = u.tile.m * Cluster + rank;
      return u;
    });
    if (!ws.is_memory(ctx)) wait_smem_to_gmem<0>();  // the last tile's stores
    if constexpr (Cluster > 1) ctx.cluster_sync();  // no CTA leaves while its peers multicast into it
  }

  /// Partial-sum slots a grid of `ctas` CTAs needs.
  static constexpr int partial_slots(int ctas) { return ctas * compute_wgs; }
  /// Split the last wave only when that saves each CTA this many steps.
  static constexpr int stream_k_min_steps = stream_k_min_steps_128x256;

  /// C (M x N) = epilogue(A (M x K) * B), tiles in bands of 8 tile rows. `partials`: a
  /// workspace of partial_slots(grid) slots of partial_floats floats, which lets the last
  /// wave be split by stream-K; without one, it runs whole tiles.
  static matmul_ws_kernel make(long long M, long long N, long long K, Epilogue epi = {}, partials_ref partials = {}) {
    const tile_order_plan tiles(static_cast<int>((M + BM * Cluster - 1) / (BM * Cluster)),
                                    static_cast<int>((N + BN - 1) / BN), 8);
    return {{tiles, static_cast<int>((K + KS - 1) / KS), partials.empty() ? stream_k_off : stream_k_min_steps},
            epi, partials};
  }
  /// One CTA per SM (or per tile, when there are fewer tiles and no stream-K split), in
  /// clusters of Cluster.
  launch_config config(int sms) const {
    const int tiles = sched.order.tiles() * Cluster;
    const bool streams = sched.plan(sms / Cluster).streams();
    if (streams) partials.require(partial_slots(sms / Cluster * Cluster), partial_floats);
    // One CTA per SM: it gets all the shared memory (the pipeline and the epilogue buffers
    // fit: checked in operator() from the pipeline's smem_bytes).
    return {.grid = {tiles < sms && !streams ? tiles : sms / Cluster * Cluster}, .cluster = Cluster};
  }
};

/// A promoting matmul_ws_kernel given A's k-block scales as an input, M-major: a
/// [ceil(K/128), M] view contiguous along M (as DeepGEMM and torch._scaled_mm's block-wise
/// mode store them), which TMA loads a step's k-blocks of a tile's rows at a time. The memory
/// warpgroup loads them into each stage beside A's and B's blocks, so the k-step reads them
/// from SMEM: loaded from global memory by the compute warpgroups, they waited on the k-loop's
/// critical path. Launched with (a, b, a_scales, c).
template <class Kernel>
struct with_a_scales : Kernel {
  static_assert(Kernel::promotes, "tilepipe: with_a_scales: A's k-block scales are read by promoting kernels");
  TP_HD void operator()(kernel_context& ctx, typename Kernel::a_ref a, typename Kernel::b_ref b,
                        gmem<float, 2, typename Kernel::a_scale_tile> a_scales, typename Kernel::c_ref c) const {
    this->run(ctx, a, b, c, a_scales);
  }
  /// Kernel::make's kernel (the same arguments).
  template <class... Args>
  static with_a_scales make(const Args&... args) {
    return {Kernel::make(args...)};
  }
};

/// The activation the epilogue applies after the bias (PyTorch's names: relu, gelu with the
/// exact erf, gelu with approximate='tanh', silu).
enum class activation { none, relu, gelu, gelu_tanh, silu };

/// C = act(A * B + bias[col]): one epilogue for every activation, chosen at run time (a
/// uniform branch per element of the epilogue, not of the k-loop); bias may be null.
template <class T>
struct bias_activation_epilogue {
  const T* bias = nullptr;
  long long n = 0;
  activation act = activation::none;
  TP_HD float operator()(float acc, long long, long long col) const {
    const float v = acc + (bias && col < n ? to_float(bias[col]) : 0.0f);
    switch (act) {
      case activation::relu: return v > 0.0f ? v : 0.0f;
      case activation::gelu: return 0.5f * v * (1.0f + erff(v * 0.70710678f));
      case activation::gelu_tanh: return 0.5f * v * (1.0f + tanhf(0.79788456f * (v + 0.044715f * v * v * v)));
      case activation::silu: return v / (1.0f + expf(-v));
      default: return v;
    }
  }
};

struct matmul_options {
  const void* bias = nullptr;        // optional [N] vector of the operands' element type, added to every row
  activation act = activation::none;
  void* stream = nullptr;            // cudaStream_t (GPU)
  partials_ref partials{};           // stream-K workspace (partials_buffer of matmul_partial_slots(dev) slots);
                                     // empty: the last wave runs whole tiles
};

/// The configuration tp::matmul launches: 128 x 256 tiles, 4 stages of 64, no clusters.
template <class T, b_layout L, class Epilogue>
using matmul_default_kernel = matmul_ws_kernel<T, T, 128, 256, 4, L, Epilogue, 64, 1>;

/// Slots of partial sums (each matmul_partial_floats floats) a stream-K workspace for
/// tp::matmul on `dev` needs.
inline int matmul_partial_slots(const device& dev) {
  return matmul_default_kernel<bf16, b_layout::row_major, no_epilogue>::partial_slots(dev.is_gpu() ? dev.multiprocessors() : 4);
}
inline constexpr long long matmul_partial_floats = matmul_default_kernel<bf16, b_layout::row_major, no_epilogue>::partial_floats;

namespace matmul_detail {
template <class T, b_layout L, class Epilogue>
void launch(const device& dev, const tensor_view<T, 2>& a, const tensor_view<T, 2>& b, const tensor_view<T, 2>& c,
            long long K, Epilogue epi, const matmul_options& opt) {
  using kernel_t = matmul_default_kernel<T, L, Epilogue>;
  const int sms = dev.is_gpu() ? dev.multiprocessors() : 4;
  const auto kern = kernel_t::make(a.shape[0], c.shape[1], K, epi, opt.partials);
  auto cfg = kern.config(sms);
  cfg.stream = opt.stream;
  kernel(kern, cfg)(dev, a, b, c);
}
}  // namespace matmul_detail

/// c[M, N] = act(a[M, K] b + bias): b is [K, N] (b_layout::row_major) or [N, K]
/// (b_layout::col_major); bf16 or f16 with f32 accumulation. Every tensor is read and
/// written with TMA: last dimension contiguous, other strides and the data 16-byte aligned.
template <class T>
void matmul(const device& dev, const tensor_view<T, 2>& a, const tensor_view<T, 2>& b, b_layout layout,
            const tensor_view<T, 2>& c, const matmul_options& opt = {}) {
  const long long M = a.shape[0], K = a.shape[1];
  const long long bk = layout == b_layout::row_major ? b.shape[0] : b.shape[1];
  const long long N = layout == b_layout::row_major ? b.shape[1] : b.shape[0];
  if (bk != K)
    detail::throw_formatted("matmul: a has K = %lld columns, b has K = %lld (%s)", K, bk,
                            layout == b_layout::row_major ? "b is [K, N]" : "b is [N, K]");
  if (c.shape[0] != M || c.shape[1] != N)
    detail::throw_formatted("matmul: c is %lld x %lld, expected %lld x %lld", c.shape[0], c.shape[1], M, N);
  if (K < 1 || N < 1) detail::throw_formatted("matmul: K = %lld and N = %lld must be positive", K, N);
  if (M == 0) return;
  host::require_tma_rows(a, "matmul", "a"), host::require_tma_rows(b, "matmul", "b");
  host::require_tma_rows(c, "matmul", "c");
  auto run = [&](auto epi) {
    if (layout == b_layout::row_major) matmul_detail::launch<T, b_layout::row_major>(dev, a, b, c, K, epi, opt);
    else matmul_detail::launch<T, b_layout::col_major>(dev, a, b, c, K, epi, opt);
  };
  if (!opt.bias && opt.act == activation::none) run(no_epilogue{});
  else run(bias_activation_epilogue<T>{static_cast<const T*>(opt.bias), N, opt.act});
}

}  // namespace tilepipe
