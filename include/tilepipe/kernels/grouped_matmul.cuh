// A ragged grouped matmul, the expert layer of a mixture of experts (Pallas' ragged_dot,
// PyTorch's _grouped_mm with offs):
//     out[M, N] = lhs[M, K] . rhs[g(row)]     rows of lhs sorted by group, rhs [G, K, N] or [G, N, K]
//
//     tp::grouped_matmul(dev, lhs, rhs, tp::rhs_layout::kn, offsets, out);   // offsets: device int[G]
//     tp::grouped_matmul_masked(dev, lhs, rhs, tp::rhs_layout::nk, counts, out);  // lhs [G, Mmax, K]
//
// The group table (cumulative row ends, or per-group valid rows in the masked decode
// layout) stays on the device: each CTA prefetches it into shared memory (scalar prefetch)
// and derives the tiles from it, so nothing waits for the host and the call can be captured
// in a CUDA graph. Each group's rows are cut into 128-row tiles starting at the group's
// first row (sched/group_tiles.cuh): no tile mixes two groups' rows, so every row is
// multiplied by its own group's weights, and an empty group has no tiles.
//
// The schedule is the persistent warp-specialised matmul's (examples/matmul_ws): one CTA
// per SM loops over the (row tile, column tile) pairs of all groups in a tile_scheduler's
// L2-friendly order; each tile is one warp-specialised pipeline over K on hoisted
// allocations, chained so that the memory warpgroup loads the next tile while the two
// compute warpgroups (64 rows each) finish the last. The epilogue stores a compute
// warpgroup's 64 rows by TMA through two SMEM buffers when they all belong to the group,
// and from registers with the rows clipped to the group when the group ends inside them
// (TMA would write the next group's rows): rows of other groups, and the rows past a
// masked group's count, are never written.
//
// The kernel is also the fp8 grouped matmul's (kernels/scaled_grouped_matmul.cuh): with an
// epilogue that has per-k-block scales (k_block_scales), its k-step is matmul_ws_kernel's
// promoting_k_step (two 128-wide k-blocks a step, each scaled into the f32 accumulator), and
// with_a_scales adds A's M-major scales as a third input of each tile's pipeline.
#pragma once

#include "../sched/group_tiles.cuh"
#include "../tilepipe.cuh"
#include "chunked_store_epilogue.cuh"
#include "matmul.cuh"
#include "matmul_k_step.cuh"

#include <cstdint>

namespace tilepipe {

/// How rhs holds each group's K x N matrix: [G, K, N] (row-major) or [G, N, K] (each
/// matrix transposed, as nn.Linear weights are stored).
enum class rhs_layout { kn, nk };

struct grouped_matmul_options {
  void* stream = nullptr;  // cudaStream_t (GPU)
};

/// An epilogue that takes a tile's group: apply(acc, row0, col0 within the group, group).
template <class E, int M, int N>
concept group_epilogue = requires(const E& e, const accumulator<M, N>& acc, long long row0, long long col0, int g) {
  { e.apply(acc, row0, col0, g) } -> std::same_as<accumulator<M, N>>;
};

/// T: lhs's and rhs's element type; TC: out's. Epilogue: no_epilogue, (fp8) scales applied
/// to a tile's sums with apply(acc, row0, col0, group) (group_row_scales: col0 within the
/// group), or scales per k-block (k_block_scales: scale_epilogue<fp8_scaling::block, ...>),
/// which switch the k-step to promoting_k_step; those and other epilogues are asked for the
/// column of the groups' weights side by side, each as wide as the column
/// tiles rounded up to 128 (group g's column j is g * group_columns() + j; group_columns() is
/// ceil(N / 128) * 128 with the block-scaled kernel's 128-wide tiles): B's block scales
/// [G, ceil(N/128), ceil(K/128)] stacked as [G * ceil(N/128), ceil(K/128)] read each group's
/// own. MemRegs: the memory warpgroup's registers. EpilogueCols, EpilogueBuffers: the
/// epilogue's SMEM chunks (64 rows x EpilogueCols) and how many a compute warpgroup has.
template <class T, rhs_layout L, int BM = 128, int BN = 256, int Stages = 3, int BK = 64, class TC = T,
          class Epilogue = no_epilogue, int MemRegs = 56, int EpilogueCols = 64, int EpilogueBuffers = 2>
struct grouped_matmul_kernel {
  static constexpr int max_groups = 256;
  static constexpr bool promotes = k_block_scales<Epilogue>;  // scales per k-block, applied every block
  static constexpr int KS = promotes ? 2 * BK : BK;            // K per step: promoting_k_step takes two k-blocks
  static constexpr int block_n = BN, block_k = KS;
  // Two compute warpgroups, the memory one last with MemRegs registers: 56 for the bf16
  // kernel (at matmul_ws' 40, the group index and rhs's 3-D coordinates spill in its TMA issue
  // loop, ptxas: 28 bytes for [G, K, N]; at 56 nothing spills and the compute warpgroups keep
  // 224); the fp8 kernel's choice is in kernels/scaled_grouped_matmul.cuh.
  static constexpr warp_specialization<2, MemRegs> ws{};
  static constexpr int num_threads = ws.num_threads;
  static constexpr int compute_wgs = ws.compute_wgs;
  // promotes: B's scales of a tile's first 128 k-blocks, staged in SMEM per compute warpgroup
  // before the tile's first step (promoting_k_step reads them there).
  static constexpr int staged_b_scales = promotes ? 128 : 0;
  static constexpr std::uint32_t staged_b_scale_bytes = compute_wgs * staged_b_scales * sizeof(float);
  static constexpr int SK = BK * static_cast<int>(sizeof(T));  // swizzle of K-major tiles: one row of K
  static constexpr int WM = BM / compute_wgs;                  // rows per compute warpgroup
  // Epilogue chunks of 64 x EpilogueCols in EpilogueBuffers buffers a warpgroup: by default
  // 64 x 64 in two (8 KB each) beside 3 stages of 48 KB. Measured against 4 stages and
  // 64 x 32 chunks (docs/benchmarks.md): +1-5% (bf16), +3-5% (fp8 row-wise): a tile's
  // epilogue waits for its chunk buffers half as often, and 3 stages keep the tensor core fed.
  static constexpr int EM = 64, EN = EpilogueCols;
  // lhs tiles start at any row (a group's first): the row index is an element offset.
  using a_tile = tile<block<element(BM), KS>, swizzle<SK>>;
  using b_tile = std::conditional_t<L == rhs_layout::kn, tile<block<squeezed, KS, BN>, swizzle<128>>,
                                    tile<block<squeezed, BN, KS>, swizzle<SK>>>;
  using c_tile = tile<block<element(EM), EN>, swizzle<EN * static_cast<int>(sizeof(TC))>>;
  // A's k-block scales as a pipeline input (with_a_scales): a step's k-blocks (rows) of the
  // tile's BM rows (columns), from M-major scales [ceil(K/128), rows of lhs]. A TMA box's
  // innermost start must be 16-byte aligned (the GPU faults otherwise) and a tile starts at
  // any row: the box starts at the multiple of 4 rows at or before the tile's first row
  // (an element offset) and is 4 columns wider; the k-step reads from the tile's column.
  using a_scale_tile = tile<block<KS / BK, element(BM + 4)>>;
  using c_view = smem<TC, c_tile>;
  using a_ref = gmem<T, 2, a_tile>;
  using b_ref = gmem<T, 3, b_tile>;
  using c_ref = gmem<TC, 2, c_tile>;
  static_assert(WM % 64 == 0 && BN % EN == 0, "tilepipe: grouped_matmul tiles: 64-row multiples per warpgroup");
  static_assert(!promotes || (BK == 128 && 128 % BN == 0 && L == rhs_layout::nk),
                "tilepipe: promoting grouped matmul (per-k-block scales): k-blocks of 128 (BK = 128), a tile's columns "
                "in one 128-column block of B's scales (BN divides 128), rhs [G, N, K]");

  scalar_source group_table;  // offsets (cumulative row ends) or, masked, valid rows per group
  int masked_stride = 0;      // masked layout: rows per group (Mmax); 0: offsets
  int total_rows = 0;         // rows of lhs (G * Mmax when masked)
  int tiles_n = 1, k_steps = 1;
  Epilogue epilogue{};        // the scales (promoting kernels)
  int k_blocks = 1;           // promoting kernels: k-blocks of BK in K

  /// Fails when group g's entry is impossible (only the device sees the table): in the
  /// interpreter and in TILEPIPE_DEBUG GPU builds. The inlined failure paths cost the release
  /// kernel spilled registers; there an impossible table gives wrong rows but writes nothing
  /// outside out (counts clipped to the group, stores to out's rows).
  TP_HD void check_group([[maybe_unused]] const kernel_context& ctx, [[maybe_unused]] const group_rows<scalar_table>& rows,
                         [[maybe_unused]] int g) const {
    if constexpr (debug_checks) {
      const int n = masked_stride ? rows.table[g] : rows.count(g);
      if (n < 0) prim::fail(ctx.failure(), "grouped_matmul: group %d has %d rows (group sizes must not be negative)", g, n);
      if (masked_stride && n > masked_stride)
        prim::fail(ctx.failure(), "grouped_matmul: group %d has %d valid rows, more than the %d rows per group of lhs", g,
                   n, masked_stride);
      if (!masked_stride && g == rows.groups() - 1 && rows.table[g] != total_rows)
        prim::fail(ctx.failure(), "grouped_matmul: the group sizes add up to %d rows, but lhs has %d", rows.table[g],
                   total_rows);
    }
  }

  /// The epilogue's and B's scales' column of group g's column tile n: the groups' weights
  /// side by side, each padded to whole 128-column blocks (the comment above the class).
  TP_HD long long group_columns() const { return static_cast<long long>((tiles_n * BN + 127) / 128) * 128; }
  TP_HD long long group_col(int g, int n) const { return g * group_columns() + static_cast<long long>(n) * BN; }

  /// One item of the persistent loop: a group's tile of rows and a tile of columns.
  struct placed_tile {
    group_tile rows;
    int n;
  };

  TP_HD void operator()(kernel_context& ctx, a_ref a, b_ref b, c_ref c) const { run(ctx, a, b, c); }

  /// The kernel; a_scales: nothing, or (with_a_scales) A's scales, a third input of each
  /// tile's pipeline that the promoting k-step reads from SMEM.
  template <class... AScales>
  TP_HD TP_FORCEINLINE void run(kernel_context& ctx, a_ref a, b_ref b, c_ref c, AScales... a_scales) const {
    static_assert(sizeof...(AScales) == 0 || promotes, "tilepipe: A's k-block scales are read by promoting k-steps");
    const int ci = ws.compute_index(ctx);
    const group_rows<scalar_table> where{
        prefetch_scalars(ctx, group_table, masked_stride ? "group_counts" : "group_offsets", max_groups), masked_stride};
    const int groups = where.groups();
    const scalar_table tile_starts =
        fill_scalars(ctx, allocate_scalars(ctx, max_groups + 1, "group tile starts"), groups + 1, "group tile starts",
                     [&](int g) {
                       if (g < groups) check_group(ctx, where, g);
                       return group_tiles_before(where, g, BM);
                     });
    const int row_tiles = tile_starts[groups];
    if (row_tiles == 0) return;  // every group empty (masked decode)

    accumulator<WM, BN> acc;  // lives in the compute warpgroups only
    chunked_store_epilogue<c_view, compute_wgs, EpilogueBuffers> c_chunks;
    [[maybe_unused]] accumulator<WM, BN> first, second;  // promoting_k_step's products of a step's k-blocks
    const matmul_k_step<WM, BN, L == rhs_layout::nk> step{acc, ci};
    [[maybe_unused]] float* b_scales = nullptr;  // this warpgroup's staged B scales (promotes)
    auto tile_pipeline = [&](placed_tile p) {
      const group_tile t = p.rows;
      const int n = p.n;
      auto context = compute_context([&, t, n](auto pipeline) {
        acc = zeros<float, WM, BN>();
        if constexpr (promotes) {  // once the last tile's steps have read theirs
          prim::warpgroup_sync();
          const long long col0 = group_col(t.group, n);
          const int count = k_blocks < staged_b_scales ? k_blocks : staged_b_scales;
          for (int i = prim::thread_in_warpgroup(); i < count; i += prim::warpgroup_threads())
            b_scales[i] = epilogue.b_scale(col0, i);
          prim::warpgroup_sync();
        }
        pipeline();
        wgmma_wait<0>(acc);
        const int row0 = t.row0 + ci * WM, my_rows = t.rows - ci * WM;  // this warpgroup's rows of the group
        if constexpr (group_epilogue<Epilogue, WM, BN>)  // per-group scales: the group, its column
          acc = epilogue.apply(acc, row0, static_cast<long long>(n) * BN, t.group);
        else if constexpr (!std::is_same_v<Epilogue, no_epilogue>)
          acc = apply_epilogue(epilogue, acc, row0, group_col(t.group, n));
        if (my_rows >= WM) {
          c_chunks.store(acc, c, [&](int rb, int cb) { return idx(row0 + rb * EM, n * (BN / EN) + cb); });
        } else if (my_rows > 0 && row0 >= 0) {  // the group ends inside these rows: store only its own
          const long long col0 = static_cast<long long>(n) * BN, cols = c.shape[1] - col0, rows_left = c.shape[0] - row0;
          gmem_ref<TC, 2> dst;
          dst.data = c.data + row0 * c.stride[0] + col0;
          dst.shape[0] = my_rows < rows_left ? my_rows : rows_left, dst.shape[1] = cols < BN ? cols : BN;
          dst.stride[0] = c.stride[0], dst.stride[1] = 1;
          store(dst, acc);
        }
      });
      auto a_map = [row0 = t.row0](auto k) { return idx(row0, k); };
      auto b_map = [g = t.group, n](auto k) {
        if constexpr (L == rhs_layout::kn) return idx(g, k, n);
        else return idx(g, n, k);
      };
      constexpr int delay = promotes ? 0 : 1;  // the blocks a wgmma left in flight still reads
      auto pipeline = [&](auto k_step, auto... a_scale_spec) {
        return emit_pipeline_warp_specialized(
            k_step, grid(k_steps),
            in_specs(spec<a_tile>(a_map, delay_release<delay>), spec<b_tile>(b_map, delay_release<delay>),
                     a_scale_spec...),
            out_specs(), ws, max_concurrent_steps<Stages>, context);
      };
      if constexpr (promotes) {
        const promoting_k_step<WM, BN, BK, Epilogue, true> k_step{acc,
                                                                  first,
                                                                  second,
                                                                  ci,
                                                                  epilogue,
                                                                  static_cast<long long>(t.row0) + ci * WM,
                                                                  group_col(t.group, n),
                                                                  0,
                                                                  k_blocks,
                                                                  t.row0 & 3,
                                                                  b_scales,
                                                                  staged_b_scales};
        if constexpr (sizeof...(AScales) == 1) {  // the scales of the step's k-blocks, from the tile's rows' 16-byte boundary
          auto a_scale_map = [row0 = t.row0 & ~3](auto k) { return idx(k, row0); };
          return pipeline(k_step, spec<a_scale_tile>(a_scale_map, delay_release<delay>));
        } else {
          return pipeline(k_step);
        }
      } else {
        return pipeline(step);
      }
    };
    auto loop = persistent_pipelines<placed_tile, c_chunks.smem_bytes + table_smem_bytes + staged_b_scale_bytes>(
        ws, ctx, tile_pipeline, a, b, a_scales...);
    c_chunks.allocate(ctx, ci);
    if constexpr (promotes)
      b_scales = reinterpret_cast<float*>(ctx.allocate(staged_b_scale_bytes, "B's scales of the tile")) + ci * staged_b_scales;

    // The persistent loop over (row tile, column tile) in bands of 8 row tiles.
    const tile_scheduler<> sched{tile_order_plan(row_tiles, tiles_n, 8), k_steps, stream_k_off};
    const auto work = sched.worker(ctx.axis_index(0), ctx.axis_size(0));
    loop.run(0, work.size(), 1, [&](int j) {
      const work_tile u = work[j];
      return placed_tile{locate_group_tile(where, tile_starts, BM, u.tile.m), u.tile.n};
    });
    if (!ws.is_memory(ctx)) wait_smem_to_gmem<0>();  // the last tile's stores
  }

  /// The group table and the tile starts (each allocation 1024-byte aligned).
  static constexpr std::size_t table_smem_bytes = 1024 * ((max_groups * 4 + 1023) / 1024 + ((max_groups + 1) * 4 + 1023) / 1024);

  /// One CTA per SM, or fewer when there are fewer tiles than SMs at most.
  launch_config config(int sms, void* stream) const {
    const long long max_row_tiles =
        masked_stride ? static_cast<long long>(group_table.size) * ((masked_stride + BM - 1) / BM)
                      : (total_rows + BM - 1) / BM + group_table.size;
    const long long max_tiles = max_row_tiles * tiles_n;
    return {.grid = {static_cast<int>(max_tiles < sms ? max_tiles : sms)}, .stream = stream};
  }
};

namespace grouped_matmul_detail {

/// The host's checks of a grouped matmul's operands (`fn` names the call in the messages,
/// lhs_name and rhs_name its operands), and kern's schedule from their shapes. False when
/// lhs has no rows: nothing to launch.
template <class Kernel, class TA, class TB, class TC>
bool prepare(Kernel& kern, const char* fn, const tensor_view<TA, 2>& lhs, const tensor_view<TB, 3>& rhs, rhs_layout L,
             const int* group_table, int groups, int masked_stride, const tensor_view<TC, 2>& out,
             const char* lhs_name = "lhs", const char* rhs_name = "rhs") {
  const long long M = lhs.shape[0], K = lhs.shape[1];
  const long long rk = L == rhs_layout::kn ? rhs.shape[1] : rhs.shape[2];
  const long long N = L == rhs_layout::kn ? rhs.shape[2] : rhs.shape[1];
  if (groups < 1 || groups > Kernel::max_groups)
    detail::throw_formatted("%s: %d groups; 1 to %d are supported", fn, groups, Kernel::max_groups);
  if (rhs.shape[0] != groups)
    detail::throw_formatted("%s: %s has %lld groups, but the group table has %d", fn, rhs_name, rhs.shape[0], groups);
  if (!group_table) detail::throw_formatted("%s: no group table (a device array of %d ints)", fn, groups);
  if (rk != K)
    detail::throw_formatted("%s: %s has K = %lld columns, %s's matrices have K = %lld (layout %s)", fn, lhs_name, K,
                            rhs_name, rk, L == rhs_layout::kn ? "[G, K, N]" : "[G, N, K]");
  if (out.shape[0] != M || out.shape[1] != N)
    detail::throw_formatted("%s: out is %lld x %lld, expected %lld x %lld (rows of %s x N)", fn, out.shape[0],
                            out.shape[1], M, N, lhs_name);
  if (K < 1 || N < 1) detail::throw_formatted("%s: K = %lld and N = %lld must be positive", fn, K, N);
  if (M > 0x7fffffffLL - Kernel::max_groups * 128LL)
    detail::throw_formatted("%s: %lld rows exceed the 32-bit row indices", fn, M);
  host::require_tma_rows(lhs, fn, lhs_name), host::require_tma_rows(rhs, fn, rhs_name);
  host::require_tma_rows(out, fn, "out");
  kern.group_table = {group_table, groups};
  kern.masked_stride = masked_stride;
  kern.total_rows = static_cast<int>(M);
  kern.tiles_n = static_cast<int>((N + Kernel::block_n - 1) / Kernel::block_n);
  kern.k_steps = static_cast<int>((K + Kernel::block_k - 1) / Kernel::block_k);
  return M > 0;
}

/// Launches kern on (lhs, rhs, extra..., out): one CTA per SM at most.
template <class Kernel, class TA, class TB, class TC, class... Extra>
void launch(const device& dev, const Kernel& kern, const tensor_view<TA, 2>& lhs, const tensor_view<TB, 3>& rhs,
            const tensor_view<TC, 2>& out, void* stream, const Extra&... extra) {
  const int sms = dev.is_gpu() ? dev.multiprocessors() : 4;
  kernel(kern, kern.config(sms, stream))(dev, lhs, rhs, extra..., out);
}

template <class T, rhs_layout L>
void run(const device& dev, const tensor_view<T, 2>& lhs, const tensor_view<T, 3>& rhs, const int* group_table,
         int groups, int masked_stride, const tensor_view<T, 2>& out, const grouped_matmul_options& opt) {
  grouped_matmul_kernel<T, L> kern;
  if (prepare(kern, "grouped_matmul", lhs, rhs, L, group_table, groups, masked_stride, out))
    launch(dev, kern, lhs, rhs, out, opt.stream);
}

template <class T>
void dispatch(const device& dev, const tensor_view<T, 2>& lhs, const tensor_view<T, 3>& rhs, rhs_layout layout,
              const int* group_table, int groups, int masked_stride, const tensor_view<T, 2>& out,
              const grouped_matmul_options& opt) {
  if (layout == rhs_layout::kn) run<T, rhs_layout::kn>(dev, lhs, rhs, group_table, groups, masked_stride, out, opt);
  else run<T, rhs_layout::nk>(dev, lhs, rhs, group_table, groups, masked_stride, out, opt);
}

/// [G, Mmax, C] as the [G * Mmax, C] rows it stacks (the groups must lie back to back).
template <class T>
tensor_view<T, 2> stacked(const tensor_view<T, 3>& t, const char* name, const char* fn = "grouped_matmul_masked") {
  if (t.shape[0] > 1 && t.stride[0] != t.shape[1] * t.stride[1])
    detail::throw_formatted("%s: %s's groups must lie back to back (stride %lld in dimension 0, "
                            "expected %lld rows x %lld)",
                            fn, name, t.stride[0], t.shape[1], t.stride[1]);
  return {t.data, {t.shape[0] * t.shape[1], t.shape[2]}, {t.stride[1], t.stride[2]}, t.on_gpu};
}

}  // namespace grouped_matmul_detail

/// out[M, N] = lhs[M, K] . rhs[g]: rows [offsets[g - 1], offsets[g]) of lhs (offsets[-1] = 0)
/// belong to group g. bf16 or f16, f32 accumulation. rhs is [G, K, N] (rhs_layout::kn) or
/// [G, N, K] (rhs_layout::nk); `group_offsets` is a device array of G ints, the cumulative
/// group sizes (PyTorch's offs; the last is M). Groups may be empty; 1 <= G <= 256.
/// Offsets that decrease or do not end at M fail in the kernel (the host does not read them).
template <class T>
void grouped_matmul(const device& dev, const tensor_view<T, 2>& lhs, const tensor_view<T, 3>& rhs, rhs_layout layout,
                    const int* group_offsets, const tensor_view<T, 2>& out, const grouped_matmul_options& opt = {}) {
  grouped_matmul_detail::dispatch(dev, lhs, rhs, layout, group_offsets, static_cast<int>(rhs.shape[0]), 0, out, opt);
}

/// The masked (decode) layout: out[g, i] = lhs[g, i] . rhs[g] for i < group_counts[g] with
/// lhs [G, Mmax, K] and out [G, Mmax, N]; rows i >= group_counts[g] of out are not written.
/// `group_counts` is a device array of G ints in [0, Mmax].
template <class T>
void grouped_matmul_masked(const device& dev, const tensor_view<T, 3>& lhs, const tensor_view<T, 3>& rhs,
                           rhs_layout layout, const int* group_counts, const tensor_view<T, 3>& out,
                           const grouped_matmul_options& opt = {}) {
  using grouped_matmul_detail::stacked;
  if (lhs.shape[0] != rhs.shape[0] || out.shape[0] != lhs.shape[0])
    detail::throw_formatted("grouped_matmul_masked: lhs has %lld groups, rhs %lld and out %lld", lhs.shape[0],
                            rhs.shape[0], out.shape[0]);
  if (out.shape[1] != lhs.shape[1])
    detail::throw_formatted("grouped_matmul_masked: out has %lld rows per group, lhs %lld", out.shape[1], lhs.shape[1]);
  if (lhs.shape[1] < 1) detail::throw_formatted("grouped_matmul_masked: lhs has no rows per group");
  grouped_matmul_detail::dispatch(dev, stacked(lhs, "lhs"), rhs, layout, group_counts, static_cast<int>(lhs.shape[0]),
                                  static_cast<int>(lhs.shape[1]), stacked(out, "out"), opt);
}

}  // namespace tilepipe
