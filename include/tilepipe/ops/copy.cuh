// Block copies between global and shared memory through TMA, used by the pipelines and
// directly by kernels (Pallas' copy_gmem_to_smem / copy_smem_to_gmem / commit_smem).
// A block is addressed by its block index, as index maps return it; a block made of
// several TMA boxes (column panels, row chunks) is moved box by box.
#pragma once

#include "../backend/primitives.cuh"
#include "../core/index_map.cuh"
#include "../core/refs.cuh"
#include "../core/static_for.cuh"
#include "../core/tma_desc.cuh"
#include "smem_access.cuh"

#include <cstring>

namespace tilepipe {

/// The pipeline operand a block copy serves, for the report of a block outside its array
/// (operand -1: a kernel's own copy, which TMA clips like any other: it may fall wholly
/// outside, e.g. the rows of a tile past the matrix's edge, and then moves nothing).
struct block_site {
  const char* role = "";  // "input" or "output" of a pipeline
  int operand = -1;
  long long step = -1;
  failure_channel failure{};  // where a failed check reports on the GPU
};

namespace detail {

/// An index map that returns a block wholly outside the array is a bug (off by a block, a
/// negative index): TMA would read zeros or drop the store, silently. Partial edge blocks
/// are fine.
template <class Tile, class G>
TP_HD void check_block_inside(const G& g, const index<G::rank>& bi, const block_site& site) {
  using B = typename Tile::block_type;
  for (int d = 0; d < G::rank; ++d) {
    const long long start = B::kind_at(d) == dim_kind::blocked ? static_cast<long long>(bi.v[d]) * B::size_at(d)
                                                               : static_cast<long long>(bi.v[d]);
    const long long end = start + B::size_at(d);
    if (end <= 0 || start >= g.shape[d])
      prim::fail(site.failure,
                 "%s %d at pipeline step %lld: its index map returns block index %d in dimension %d, elements "
                 "[%lld, %lld), wholly outside the array's extent %lld there (partial edge blocks are fine; this is "
                 "an index map off by a block, or a negative index)",
                 site.role, site.operand, site.step, bi.v[d], d, start, end, g.shape[d]);
  }
}

/// TMA coordinates (innermost first) of the first element of block `bi` of `g`.
template <class Tile, class G>
TP_HD TP_FORCEINLINE void block_coords(const G& g, const index<G::rank>& bi, int (&co)[G::rank],
                                       const block_site& site) {
  using B = typename Tile::block_type;
  if constexpr (debug_checks)
    if (site.operand >= 0) check_block_inside<Tile>(g, bi, site);
#pragma unroll
  for (int d = 0; d < G::rank; ++d) {
    const long long e = B::kind_at(d) == dim_kind::blocked ? static_cast<long long>(bi.v[d]) * B::size_at(d)
                                                           : static_cast<long long>(bi.v[d]);
    co[G::rank - 1 - d] = static_cast<int>(g.origin[d] + e);
  }
  // A block that crosses the end of a slice but not of the tensor would read or write
  // memory outside the slice: TMA bounds are the tensor's. Only whole blocks may overhang
  // a slice that ends at the tensor's edge.
  if constexpr (debug_checks) {
    const tma_desc& m = g.template map<Tile>();
    for (int d = 0; d < G::rank; ++d) {
      const long long start = co[G::rank - 1 - d] - g.origin[d], size = B::size_at(d);
      const long long tensor_end = m.dims[G::rank - 1 - d] - g.origin[d];
      if (start + size > g.shape[d] && g.shape[d] < tensor_end)
        prim::fail(site.failure,
                   "block [%lld, %lld) of dimension %d crosses the end (%lld) of a gmem slice that does not end at "
                   "the tensor's edge: TMA would touch elements outside the slice",
                   start, start + size, d, g.shape[d]);
    }
  }
}

}  // namespace detail

/// Bytes one block of Tile occupies in SMEM (and the transaction bytes its load delivers).
template <class Tile, class T>
inline constexpr std::uint32_t block_bytes_v = tile_layout<Tile, static_cast<int>(sizeof(T))>::bytes;

namespace detail {
/// Calls f(map, coords, smem_byte_offset, box_number) for every TMA box of block `bi` of Tile.
template <class Tile, class G, class F>
TP_HD TP_FORCEINLINE void for_each_box(const G& g, const index<G::rank>& bi, const block_site& site, F&& f) {
  using plan = tma_plan<Tile, static_cast<int>(sizeof(typename G::value_type))>;
  int co[G::rank];
  block_coords<Tile>(g, bi, co, site);
  const tma_desc& map = g.template map<Tile>();
#pragma unroll
  for (int b = 0; b < plan::boxes; ++b) {
    int c[G::rank];
#pragma unroll
    for (int d = 0; d < G::rank; ++d) c[d] = co[d];
    c[0] += plan::box_col(b);
    if constexpr (G::rank > 1) c[plan::row_tma_dim] += plan::box_row(b);
    f(map, c, plan::box_smem(b), b);
  }
}
}  // namespace detail

/// leader: loads block `bi` of `g` into `dst`; completes block_bytes_v transaction bytes on bar.
template <class Tile, class G>
TP_HD TP_FORCEINLINE void issue_block_load(const G& g, const index<G::rank>& bi, void* dst, std::uint64_t* bar,
                                           const block_site& site = {}) {
  detail::for_each_box<Tile>(g, bi, site, [&](const tma_desc& map, const int (&c)[G::rank], int off, int) {
    prim::tma_load(map, static_cast<unsigned char*>(dst) + off, c, bar);
  });
}

/// leader: this CTA's share of a block that `ranks` CTAs of its cluster (the cluster ranks
/// set in cta_mask) load together: the boxes b with b % ranks == position (this CTA's place
/// among them), multicast into `dst` of every one of them (each completes them on its own
/// barrier at bar's offset, which expects the whole block's bytes).
template <class Tile, class G>
TP_HD TP_FORCEINLINE void issue_block_load_multicast(const G& g, const index<G::rank>& bi, void* dst, std::uint64_t* bar,
                                                     int position, int ranks, std::uint16_t cta_mask,
                                                     const block_site& site = {}) {
  detail::for_each_box<Tile>(g, bi, site, [&](const tma_desc& map, const int (&c)[G::rank], int off, int b) {
    if (b % ranks == position) prim::tma_load_multicast(map, static_cast<unsigned char*>(dst) + off, c, bar, cta_mask);
  });
}

/// Where each row box of a gathered block starts (issue_gathered_load): one block index of
/// the array per box of the tile's box_rows<R> rows.
template <class Tile, class G>
struct box_sources {
  index<G::rank> at[tma_plan<Tile, static_cast<int>(sizeof(typename G::value_type))>::chunks];
};

/// box_source(bi, row) for every row box of block `bi`: where the box holding the block's
/// rows [row, row + R) starts, as a block index of `g` (as an index map returns one: an
/// element offset in tp::element dimensions). All lookups come before any copy, so that the
/// loads they make (a page table in global memory) are in flight together; a pipeline makes
/// them before it waits for the block's slot.
template <class Tile, class G, class Source>
TP_HD TP_FORCEINLINE box_sources<Tile, G> look_up_boxes(const index<G::rank>& bi, const Source& box_source) {
  using plan = tma_plan<Tile, static_cast<int>(sizeof(typename G::value_type))>;
  box_sources<Tile, G> from;
#pragma unroll
  for (int j = 0; j < plan::chunks; ++j) from.at[j] = box_source(bi, j * plan::chunk);
  return from;
}

/// leader: loads a block gathered from row boxes that lie anywhere in `g` (a paged KV cache:
/// a block of keys from several pages) into `dst`, box j from from.at[j]; completes
/// block_bytes_v transaction bytes on bar, as issue_block_load does.
template <class Tile, class G>
TP_HD TP_FORCEINLINE void issue_gathered_boxes(const G& g, const box_sources<Tile, G>& from, void* dst, std::uint64_t* bar,
                                               const block_site& site = {}) {
  using plan = tma_plan<Tile, static_cast<int>(sizeof(typename G::value_type))>;
  using layout = typename plan::layout;
  const tma_desc& map = g.template map<Tile>();
#pragma unroll
  for (int j = 0; j < plan::chunks; ++j) {
    int co[G::rank];
    detail::block_coords<Tile>(g, from.at[j], co, site);
#pragma unroll
    for (int p = 0; p < layout::panels; ++p) {
      int c[G::rank];
#pragma unroll
      for (int d = 0; d < G::rank; ++d) c[d] = co[d];
      c[0] += p * layout::panel;
      prim::tma_load(map, static_cast<unsigned char*>(dst) + plan::box_smem(j * layout::panels + p), c, bar);
    }
  }
}

/// leader: loads block `bi` of Tile gathered from row boxes (look_up_boxes, then
/// issue_gathered_boxes).
template <class Tile, class G, class Source>
TP_HD TP_FORCEINLINE void issue_gathered_load(const G& g, const index<G::rank>& bi, const Source& box_source, void* dst,
                                              std::uint64_t* bar, const block_site& site = {}) {
  issue_gathered_boxes<Tile>(g, look_up_boxes<Tile, G>(bi, box_source), dst, bar, site);
}

namespace detail {
/// Whether a TMA store of box `c` writes exactly the tensor's elements. The hardware writes
/// the innermost dimension of a store in whole 16-byte chunks, so a box that crosses an
/// innermost extent that is not a multiple of 16 bytes also writes the elements up to the
/// next 16-byte boundary: a padded row's padding, or the next row of a narrow view.
TP_HD TP_FORCEINLINE bool tma_store_is_exact(const tma_desc& map, const int* c) {
  return (map.dims[0] * map.elem_bytes) % 16 == 0 || c[0] + map.box[0] <= map.dims[0];
}

template <int E>
struct element_bits;  // an integer type of E bytes, for copying one element
template <>
struct element_bits<1> { using type = std::uint8_t; };
template <>
struct element_bits<2> { using type = std::uint16_t; };
template <>
struct element_bits<4> { using type = std::uint32_t; };
template <>
struct element_bits<8> { using type = std::uint64_t; };

/// leader: writes the part of box `c` of Tile (at `src` in SMEM, as TMA lays it out) that
/// lies inside the tensor with ordinary stores: row by row, 16-byte chunks, the last one
/// element by element. One thread, as a TMA issue is: spread over a warp's lanes (and a
/// __syncwarp), the path made ptxas give up the uniform datapath in the whole kernel, and
/// the persistent matmul lost 7% (H100 A/B); this way it costs nothing when not taken.
template <class Tile, class T, int R>
TP_HD TP_FORCEINLINE void store_box_exactly(const tma_desc& map, const int (&c)[R], const unsigned char* src) {
  using plan = tma_plan<Tile, static_cast<int>(sizeof(T))>;
  using bits = typename element_bits<sizeof(T)>::type;
  constexpr int e = static_cast<int>(sizeof(T)), row_bytes = plan::box(0) * e;
  constexpr int rows = [] {
    int n = 1;
    for (int d = 1; d < R; ++d) n *= plan::box(d);
    return n;
  }();
  const long long left = map.dims[0] - c[0];  // elements of each row inside the tensor
  if (left <= 0) return;
  const int bytes = left < plan::box(0) ? static_cast<int>(left) * e : row_bytes;
  prim::note_smem_read(src, static_cast<std::size_t>(rows) * row_bytes, "store of a block that crosses a ragged edge");
  const std::uint32_t base = prim::smem_address(src);
  auto* g = static_cast<unsigned char*>(const_cast<void*>(map.global)) + static_cast<long long>(c[0]) * e;
  for (int r = 0; r < rows; ++r) {
    unsigned char* to = g;
    bool in = true;
    int rest = r;
    static_for<R - 1>([&](auto i) {
      constexpr int d = i.value + 1, n = plan::box(d);
      const long long cd = c[d] + rest % n;
      rest /= n;
      in = in && cd >= 0 && cd < map.dims[d];
      to += cd * map.stride_bytes[d];
    });
    if (!in) continue;
    for (int lo = 0; lo < bytes; lo += 16) {
      // Swizzling permutes whole 16-byte chunks of a row: a chunk stays contiguous.
      const unsigned char* from = src + (swizzle_address(base + static_cast<std::uint32_t>(r * row_bytes + lo), map.swizzle) - base);
      if (lo + 16 <= bytes && reinterpret_cast<std::uintptr_t>(to + lo) % 16 == 0) {
        *reinterpret_cast<uint4*>(to + lo) = *reinterpret_cast<const uint4*>(from);
      } else {
        for (int b = 0; b < 16 && lo + b < bytes; b += e)
          *reinterpret_cast<bits*>(to + lo + b) = *reinterpret_cast<const bits*>(from + b);
      }
    }
  }
}
}  // namespace detail

/// leader: stores `src` to block `bi` of `g`, writing exactly the elements inside the
/// tensor: by TMA, except a box that crosses an innermost extent that is not a multiple of
/// 16 bytes, which it writes with ordinary stores (TMA would write past the extent; see
/// tma_store_is_exact).
template <class Tile, class G>
TP_HD TP_FORCEINLINE void issue_block_store(const G& g, const index<G::rank>& bi, const void* src,
                                            const block_site& site = {}) {
  detail::for_each_box<Tile>(g, bi, site, [&](const tma_desc& map, const int (&c)[G::rank], int off, int) {
    const auto* box = static_cast<const unsigned char*>(src) + off;
    if (detail::tma_store_is_exact(map, c)) prim::tma_store(map, box, c);
    else detail::store_box_exactly<Tile, typename G::value_type>(map, c, box);
  });
}

namespace detail {
/// A whole-view TMA copy moves one block from the view's origin: a view larger than the
/// block would be copied in part, silently (checked where the checks run).
template <class Tile, class G>
TP_HD TP_FORCEINLINE void check_view_fits_block([[maybe_unused]] const G& g, [[maybe_unused]] const char* what) {
  if constexpr (debug_checks) {
    using B = typename Tile::block_type;
    for (int d = 0; d < G::rank; ++d)
      if (g.shape[d] > B::size_at(d))
        prim::fail(failure_channel{}, "%s of a whole gmem view: dimension %d has extent %lld, more than the block's %d "
                   "(slice the view to one block)", what, d, g.shape[d], B::size_at(d));
    // A TMA box starts on a 16-byte boundary of its row (at column 7 of an f32 tensor the
    // H100 raises an illegal-instruction fault).
    constexpr long long elem = sizeof(typename G::value_type);
    if (g.origin[G::rank - 1] * elem % 16 != 0)
      prim::fail(failure_channel{}, "%s of a whole gmem view: it starts at column %lld of its tensor, %lld bytes into a "
                 "row; TMA boxes start at 16-byte boundaries (sync_copy moves views at any offset)",
                 what, g.origin[G::rank - 1], g.origin[G::rank - 1] * elem);
  }
}
}  // namespace detail

// ---- the collective API kernels use ----------------------------------------------------

/// Makes this warpgroup's ordinary SMEM writes visible to TMA and wgmma (Pallas' commit_smem).
TP_HD TP_FORCEINLINE void commit_smem() {
  prim::fence_proxy_async();
  prim::warpgroup_sync();
}

/// Stores an SMEM block to block `bi` of `dst` and commits it as one bulk group.
/// Call commit_smem() after writing src; wait with wait_smem_to_gmem<N>(). With
/// no_pipelining the store is waited for at once.
template <class T, class L, int Rows, bool Tr, int Cols, class G>
TP_HD TP_FORCEINLINE void copy_smem_to_gmem(const smem_ref<T, L, Rows, Tr, Cols>& src, const G& dst,
                                            const index<G::rank>& bi) {
  static_assert(std::is_same_v<std::remove_cv_t<T>, std::remove_cv_t<typename G::value_type>>,
                "tilepipe: SMEM and GMEM element types differ");
  static_assert(!Tr && Rows == L::rows && Cols == L::cols,
                "tilepipe: copy whole, untransposed blocks (the TMA box covers the full tile), not row or column slices");
  if (prim::leader()) {
    issue_block_store<typename L::tile_type>(dst, bi, src.base);
    prim::bulk_commit();
    if (prim::no_pipelining()) prim::bulk_wait<0>();
  }
}

/// wait_smem_to_gmem's option: wait only until the stores have read their shared memory
/// (the buffer may then be rewritten), not until their writes to global memory are done.
struct reads_done_t {
  explicit reads_done_t() = default;
};
inline constexpr reads_done_t reads_done{};

/// Waits until at most N committed store groups of this warpgroup are pending (Pallas'
/// wait_smem_to_gmem): wait_smem_to_gmem<N>() until the others' writes are done;
/// wait_smem_to_gmem<N>(tp::reads_done) only until the others no longer read SMEM.
template <int N>
TP_HD TP_FORCEINLINE void wait_smem_to_gmem() {
  if (prim::leader()) prim::bulk_wait<N>();
  prim::warpgroup_sync();
}

template <int N>
TP_HD TP_FORCEINLINE void wait_smem_to_gmem(reads_done_t) {
  if (prim::leader()) prim::bulk_wait_read<N>();
  prim::warpgroup_sync();
}

/// commit_smem() and wait_smem_to_gmem<N>(tp::reads_done) under one barrier: this
/// warpgroup's SMEM writes visible to TMA and wgmma, and its store groups but the newest N
/// done reading shared memory, for a step that rewrites a buffer such a store reads.
template <int N>
TP_HD TP_FORCEINLINE void commit_smem(reads_done_t) {
  prim::fence_proxy_async();
  if (prim::leader()) prim::bulk_wait_read<N>();
  prim::warpgroup_sync();
}

/// Adds `count` f32 values at src (this warpgroup's shared memory, written and committed with
/// commit_smem) to those at dst in global memory, element by element, as one bulk group
/// (Pallas' copy_smem_to_gmem with reduction_op="add"). Each addition is atomic: the CTAs
/// that add to the same values do so in any order, which the sums' last bits depend on.
/// Both 16-byte aligned, count a multiple of 4; wait with wait_smem_to_gmem<N>(reads_done)
/// before rewriting src. With no_pipelining it is waited for at once.
TP_HD TP_FORCEINLINE void reduce_add_smem_to_gmem(const float* src, float* dst, int count) {
  if (prim::leader()) {
    prim::bulk_reduce_add(dst, src, static_cast<std::uint32_t>(count) * sizeof(float));
    prim::bulk_commit();
    if (prim::no_pipelining()) prim::bulk_wait<0>();
  }
}

/// Starts loading block `bi` of `src` into `dst`; completes on `bar` (arrives once with
/// the block's transaction bytes). Wait with barrier_wait.
template <class T, class L, int Rows, bool Tr, int Cols, class G>
TP_HD TP_FORCEINLINE void copy_gmem_to_smem(const G& src, const index<G::rank>& bi, const smem_ref<T, L, Rows, Tr, Cols>& dst,
                                            barrier_ref bar) {
  static_assert(!Tr && Rows == L::rows && Cols == L::cols,
                "tilepipe: copy whole, untransposed blocks (the TMA box covers the full tile), not row or column slices");
  if (prim::leader()) {
    prim::mbarrier_arrive_expect_tx(bar.ptr, block_bytes_v<typename L::tile_type, T>);
    issue_block_load<typename L::tile_type>(src, bi, dst.base, bar.ptr);
  }
}

/// Starts loading the whole view `src` into `dst` (Pallas' copy_gmem_to_smem on a ref
/// slice): src is a block-sized view, x.at(tp::ds{r0, BR}, tp::ds{c0, BC}), at any offset;
/// one that ends at the tensor's edge may be smaller than the block (the rest reads as the
/// tile's out-of-bounds fill). Completes on `bar`, as the block-index form.
template <class G, class T, class L, int Rows, bool Tr, int Cols>
  requires is_gmem_ref_v<G>
TP_HD TP_FORCEINLINE void copy_gmem_to_smem(const G& src, const smem_ref<T, L, Rows, Tr, Cols>& dst, barrier_ref bar) {
  detail::check_view_fits_block<typename L::tile_type>(src, "copy_gmem_to_smem");
  copy_gmem_to_smem(src, index<G::rank>{}, dst, bar);
}

/// Stores `src` to the whole view `dst` (block-sized, at any offset; smaller at the
/// tensor's edge, where the rest is dropped) and commits it as one bulk group.
template <class T, class L, int Rows, bool Tr, int Cols, class G>
  requires is_gmem_ref_v<G>
TP_HD TP_FORCEINLINE void copy_smem_to_gmem(const smem_ref<T, L, Rows, Tr, Cols>& src, const G& dst) {
  detail::check_view_fits_block<typename L::tile_type>(dst, "copy_smem_to_gmem");
  copy_smem_to_gmem(src, dst, index<G::rank>{});
}

namespace detail {

/// The value a load gives an element outside its array, by the tile's oob_fill: zero, or
/// the NaN TMA writes (so that sync_copy and TMA fill a block alike).
template <class T, class Tile>
TP_HD TP_FORCEINLINE T out_of_bounds_value() {
  if constexpr (Tile::oob_fill_mode == oob::nan) {
    T v;
    write_tma_nan_fill(&v, sizeof(T));
    return v;
  } else {
    return from_float<T>(0.0f);
  }
}

/// Element (i, j) of a 2-D global view.
template <class G>
TP_HD TP_FORCEINLINE auto& gmem_at(const G& g, long long i, long long j) {
  return g.data[i * g.stride[0] + j * g.stride[1]];
}

}  // namespace detail

/// Copies `src` to `dst` with the calling warpgroup's ordinary loads and stores and returns
/// when the warpgroup's copy is done (Pallas' sync_copy), between a GMEM view and an SMEM
/// view (either way) or two GMEM views:
///   GMEM -> SMEM  the SMEM view (any row / column slice or transpose) gets the GMEM view's
///                 elements; those past the GMEM view's extent get the tile's out-of-bounds
///                 fill, as a TMA load of an edge block does;
///   SMEM -> GMEM  the elements inside the GMEM view are written, the rest dropped;
///   GMEM -> GMEM  the views have one shape.
/// Unlike the TMA copies it needs no barrier and no tensor map, moves exactly the view
/// (a slice anywhere, any size), and is slow: for small or irregular pieces. Before a TMA
/// copy or wgmma reads what it wrote to SMEM, call commit_smem().
template <class Src, class Dst>
TP_HD void sync_copy(const Src& src, const Dst& dst) {
  constexpr bool from_smem = is_smem_ref_v<Src>, to_smem = is_smem_ref_v<Dst>;
  static_assert((from_smem || is_gmem_ref_v<Src>) && (to_smem || is_gmem_ref_v<Dst>),
                "tilepipe: sync_copy copies between tp::gmem and tp::smem views");
  static_assert(!(from_smem && to_smem), "tilepipe: sync_copy between two SMEM views: use tp::map");
  static_assert(std::is_same_v<std::remove_cv_t<typename Src::value_type>, std::remove_cv_t<typename Dst::value_type>>,
                "tilepipe: sync_copy: the views' element types differ");
  const int first = prim::thread_in_warpgroup(), threads = prim::warpgroup_threads();
  if constexpr (!from_smem && !to_smem) {
    static_assert(Src::rank == Dst::rank, "tilepipe: sync_copy between GMEM views of different ranks");
    long long n = 1;
    for (int d = 0; d < Src::rank; ++d) {
      TP_REQUIRE(src.shape[d] == dst.shape[d], "sync_copy: dimension %d has extent %lld in the source, %lld in the destination",
                 d, src.shape[d], dst.shape[d]);
      n *= src.shape[d];
    }
    for (long long e = first; e < n; e += threads) {
      long long rest = e, s_off = 0, d_off = 0;
      for (int d = Src::rank - 1; d >= 0; --d) {
        const long long i = rest % src.shape[d];
        rest /= src.shape[d];
        s_off += i * src.stride[d], d_off += i * dst.stride[d];
      }
      dst.data[d_off] = src.data[s_off];
    }
  } else if constexpr (to_smem) {
    static_assert(Src::rank == 2, "tilepipe: sync_copy into SMEM takes a 2-D GMEM view (the SMEM view's rows and columns)");
    using T = typename Dst::value_type;
    const T fill = detail::out_of_bounds_value<T, typename Dst::layout::tile_type>();
    detail::note_view(dst, true, "sync_copy");
    for (int e = first; e < Dst::rows * Dst::cols; e += threads) {
      const int i = e / Dst::cols, j = e % Dst::cols;
      dst(i, j) = i < src.shape[0] && j < src.shape[1] ? detail::gmem_at(src, i, j) : fill;
    }
  } else {
    static_assert(Dst::rank == 2, "tilepipe: sync_copy out of SMEM takes a 2-D GMEM view (the SMEM view's rows and columns)");
    detail::note_view(src, false, "sync_copy");
    for (int e = first; e < Src::rows * Src::cols; e += threads) {
      const int i = e / Src::cols, j = e % Src::cols;
      if (i < dst.shape[0] && j < dst.shape[1]) detail::gmem_at(dst, i, j) = src(i, j);
    }
  }
  prim::warpgroup_sync();
}

/// Zeroes rows [first_row, rows) of a whole SMEM block with the calling warpgroup's ordinary
/// stores (attention zeroes the rows of a V block past a sequence's keys, which a cache may
/// never have written). A swizzle permutes 16-byte chunks within a row, so whole rows are
/// the same bytes swizzled or not. Call commit_smem() before a wgmma or TMA reads them.
template <class T, class L, int Rows, bool Tr, int Cols>
TP_HD void zero_rows(const smem_ref<T, L, Rows, Tr, Cols>& view, int first_row) {
  static_assert(!Tr && Rows == L::rows && Cols == L::cols, "tilepipe: zero_rows takes a whole, untransposed block");
  static_assert(L::row_bytes % 16 == 0, "tilepipe: zero_rows writes rows in 16-byte chunks");
  const int first = first_row < 0 ? 0 : first_row, rows = L::rows - first;
  if (rows <= 0) return;
  auto* base = reinterpret_cast<unsigned char*>(const_cast<std::remove_cv_t<T>*>(view.base));
  constexpr int chunks_per_row = L::row_bytes / 16;
  const int per_panel = rows * chunks_per_row;
  for (int i = prim::thread_in_warpgroup(); i < L::panels * per_panel; i += prim::warpgroup_threads()) {
    const int p = i / per_panel, chunk = i - p * per_panel;
    *reinterpret_cast<uint4*>(base + p * L::panel_bytes + first * L::row_bytes + chunk * 16) = uint4{0, 0, 0, 0};
  }
  for (int p = 0; p < L::panels; ++p)
    prim::note_smem_write(base + p * L::panel_bytes + first * L::row_bytes, static_cast<std::size_t>(rows) * L::row_bytes,
                          "zero_rows");
}

/// Names an SMEM buffer in the interpreter's reports ("in 0"); no code on the GPU.
template <class T, class L, int Rows, bool Tr, int Cols>
TP_HD TP_FORCEINLINE void name_buffer(const smem_ref<T, L, Rows, Tr, Cols>& view, const char* name, int index = -1) {
  prim::name_smem(view.base, L::bytes, name, index);
}

/// Names barriers in the interpreter's reports ("ready" slot 0, 1, ...); no code on the GPU.
template <int N, int A>
TP_HD TP_FORCEINLINE void name_barriers(const barriers<N, A>& bars, const char* name) {
  for (int i = 0; i < N; ++i) prim::mbarrier_name(bars.ptr + i, name, -1, N > 1 ? i : -1);
}

/// Waits for the phase of `bar` with the given parity (Pallas' barrier_wait).
TP_HD TP_FORCEINLINE void barrier_wait(barrier_ref bar, std::uint32_t parity) { prim::mbarrier_wait(bar.ptr, parity); }

/// Arrives on `bar` once for the whole warpgroup (after all its threads got here).
TP_HD TP_FORCEINLINE void barrier_arrive(barrier_ref bar) {
  prim::warpgroup_sync();
  if (prim::leader()) prim::mbarrier_arrive(bar.ptr);
}

}  // namespace tilepipe
