// A persistent, warp-specialised matmul: C = epilogue(A * B).
//
// One CTA per SM loops over output tiles, as a tp::tile_scheduler deals them out: in an
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
#pragma once

#include <tilepipe/tilepipe.cuh>

#include "../matmul/matmul_kernel.cuh"  // b_layout

namespace tp = tilepipe;

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
    const float v = acc + (col < n ? tp::to_float(bias[col]) : 0.0f);
    return v > 0.0f ? v : 0.0f;
  }
};

template <class T, class TC, int BM, int BN, int Stages, b_layout BL = b_layout::row_major, class Epilogue = no_epilogue,
          int BK = 64, int Cluster = 1>
struct matmul_ws_kernel {
  static constexpr tp::warp_specialization<2, 40> ws{};       // 2 compute warpgroups, the memory one last
  static constexpr int num_threads = ws.num_threads;
  static constexpr int compute_wgs = ws.compute_wgs;
  static constexpr int SK = BK * static_cast<int>(sizeof(T));  // swizzle of K-major tiles: one row of K
  static constexpr int WM = BM / compute_wgs;                  // rows per compute warpgroup
  static constexpr int EM = 64, EN = 64;                       // epilogue chunk: 64 x 64
  static constexpr long long partial_floats = WM * BN;         // one compute warpgroup's partial sum
  using a_tile = tp::tile<tp::block<BM, BK>, tp::swizzle<SK>>;
  // A K-major B block is one column panel: split into Cluster row boxes for multicast.
  using b_tile = std::conditional_t<BL == b_layout::row_major, tp::tile<tp::block<BK, BN>, tp::swizzle<128>>,
                                    tp::tile<tp::block<BN, BK>, tp::swizzle<SK>, tp::box_rows<BN / Cluster>>>;
  using c_tile = tp::tile<tp::block<EM, EN>, tp::swizzle<128>>;
  using c_view = tp::smem<TC, c_tile>;
  static_assert(WM % 64 == 0 && BN % EN == 0, "tiles: 64-row multiples per warpgroup, 64-column multiples");

  tp::tile_scheduler<> sched;   // the tiles of (cluster row, tile column) and their k-steps
  Epilogue epilogue{};
  tp::partials_ref partials{};  // stream-K workspace: a slot per compute warpgroup of the grid

  TP_HD void operator()(tp::kernel_context& ctx, tp::gmem<T, 2, a_tile> a, tp::gmem<T, 2, b_tile> b,
                        tp::gmem<TC, 2, c_tile> c) const {
    const int ci = ws.compute_index(ctx);
    const int rank = ctx.cluster_rank(), worker = ctx.axis_index(0) / Cluster, workers = ctx.axis_size(0) / Cluster;
    const int a_row_blocks = static_cast<int>((a.shape[0] + BM - 1) / BM);
    auto slot = [&](int w) { return (w * Cluster + rank) * compute_wgs + ci; };  // this warpgroup's in worker w
    tp::accumulator<WM, BN> acc;  // lives in the compute warpgroups only
    c_view c_buf[2];              // epilogue buffers

    auto step = [&acc, ci](auto, auto a_smem, auto b_smem) {
      auto b_kn = [&] {
        if constexpr (BL == b_layout::row_major) return b_smem;
        else return tp::transpose(b_smem);
      }();
      tp::wgmma(acc, tp::rows<WM>(a_smem, ci * WM), b_kn);
      tp::wgmma_wait<1>();  // one group stays in flight: delay_release<1>
    };
    auto tile_pipeline = [&](tp::work_tile u) {  // u.tile: this CTA's tile
      auto context = tp::compute_context([&, u](auto pipeline) {
        acc = tp::zeros<float, WM, BN>();
        pipeline();
        tp::wgmma_wait<0>(acc);
        if (u.publishes) return tp::publish_partial(acc, partials, slot(worker));  // another CTA finishes the tile
        for (int w = u.first_contributor; w < worker; ++w) tp::accumulate_partial(acc, partials, slot(w));
        const long long row0 = static_cast<long long>(u.tile.m) * BM + ci * WM, col0 = static_cast<long long>(u.tile.n) * BN;
        acc = tp::map(acc, [&](float v, int r, int cc) { return epilogue(v, row0 + r, col0 + cc); });
        tp::static_for<(WM / EM) * (BN / EN)>([&](auto chunk) {
          constexpr int rb = chunk.value / (BN / EN), cb = chunk.value % (BN / EN);
          const c_view& buf = c_buf[chunk.value % 2];
          tp::wait_smem_to_gmem<1>(tp::reads_done);  // the store that last read this buffer is done reading
          tp::store_block<rb * EM, cb * EN>(buf, acc);
          tp::commit_smem();
          tp::copy_smem_to_gmem(buf, c, tp::idx((u.tile.m * BM + ci * WM) / EM + rb, u.tile.n * (BN / EN) + cb));
        });
      });
      // A tile row past the matrix's edge (the last cluster's spare CTAs) reads the last
      // row block instead: its results are never stored, and an index map must stay inside.
      auto a_map = [m = u.tile.m < a_row_blocks ? u.tile.m : a_row_blocks - 1, k0 = u.k_begin](auto k) {
        return tp::idx(m, k0 + k);
      };
      auto b_map = [n = u.tile.n, k0 = u.k_begin](auto k) {
        if constexpr (BL == b_layout::row_major) return tp::idx(k0 + k, n);
        else return tp::idx(n, k0 + k);
      };
      return tp::emit_pipeline_warp_specialized(
          step, tp::grid(u.k_end - u.k_begin),
          tp::in_specs(tp::spec<a_tile>(a_map, tp::delay_release<1>),
                       tp::spec<b_tile>(b_map, tp::delay_release<1>, tp::multicast<Cluster>)),
          tp::out_specs(), ws, tp::max_concurrent_steps<Stages>, context);
    };
    using pipeline = decltype(tile_pipeline(tp::work_tile{}));
    static_assert(tp::diagnostic::smem_over_budget<pipeline::template smem_bytes<decltype(a), decltype(b)> +
                                                       2 * compute_wgs * c_view::bytes,
                                                   tp::smem_capacity>::ok);

    auto alloc = tile_pipeline({{0, 0}, 0, sched.steps, false, 0}).get_allocations(ctx, a, b);
    unsigned char* bufs = ctx.allocate(2 * compute_wgs * c_view::bytes, "epilogue buffers");
    for (int i = 0; i < 2; ++i) c_buf[i] = c_view{reinterpret_cast<TC*>(bufs + (2 * ci + i) * c_view::bytes), 0};

    // The persistent loop: this cluster's tiles (a column of Cluster tiles each) and pieces
    // of tiles, one pipeline of the chain each. The stores of tile rows past the end fall
    // outside C, and TMA drops them.
    const auto work = sched.worker(worker, workers);
    if (work.streams()) partials.require(partial_slots(workers * Cluster), partial_floats);
    tp::warp_specialized_for(ws, ctx, 0, work.size(), 1, [&](int j, tp::pipeline_state state, auto role) {
      tp::work_tile u = work[j];
      u.tile.m = u.tile.m * Cluster + rank;
      tile_pipeline(u)(ctx, alloc, state, role, a, b);
    });
    if (!ws.is_memory(ctx)) tp::wait_smem_to_gmem<0>();  // the last tile's stores
    if constexpr (Cluster > 1) ctx.cluster_sync();  // no CTA leaves while its peers multicast into it
  }

  /// Partial-sum slots a grid of `ctas` CTAs needs.
  static constexpr int partial_slots(int ctas) { return ctas * compute_wgs; }
  /// Split the last wave only when that saves each CTA this many steps: handing a partial
  /// sum over costs about 8, and a split wave realises only part of its nominal saving
  /// (measured on an H100; docs/design.md, "Stream-K for the last wave").
  static constexpr int stream_k_min_steps = 24;

  /// C (M x N) = epilogue(A (M x K) * B), tiles in bands of 8 tile rows. `partials`: a
  /// workspace of partial_slots(grid) slots of partial_floats floats, which lets the last
  /// wave be split by stream-K; without one, it runs whole tiles.
  static matmul_ws_kernel make(long long M, long long N, long long K, Epilogue epi = {}, tp::partials_ref partials = {}) {
    const tp::tile_order_plan tiles(static_cast<int>((M + BM * Cluster - 1) / (BM * Cluster)),
                                    static_cast<int>((N + BN - 1) / BN), 8);
    return {{tiles, static_cast<int>((K + BK - 1) / BK), partials.empty() ? tp::stream_k_off : stream_k_min_steps},
            epi, partials};
  }
  /// One CTA per SM (or per tile, when there are fewer tiles and no stream-K split), in
  /// clusters of Cluster.
  tp::launch_config config(int sms) const {
    const int tiles = sched.order.tiles() * Cluster;
    const bool streams = sched.plan(sms / Cluster).streams();
    if (streams) partials.require(partial_slots(sms / Cluster * Cluster), partial_floats);
    // One CTA per SM: it gets all the shared memory (the pipeline and the epilogue buffers
    // fit: checked in operator() from the pipeline's smem_bytes).
    return {.grid = {tiles < sms && !streams ? tiles : sms / Cluster * Cluster}, .cluster = Cluster};
  }
};
