// Typed views of memory: gmem_ref (global memory, with the TMA descriptors the kernel
// declared for it), smem_ref (a block in shared memory, with its layout), barrier refs.
// .at(...) slices a view without copying, like Pallas' ref.at[...].
#pragma once

#include "config.cuh"
#include "dtypes.cuh"
#include "error.cuh"
#include "layout.cuh"
#include "tma_desc.cuh"

#include <cuda/std/tuple>

#include <type_traits>

namespace tilepipe {

// ---------------------------------------------------------------------------------------
// Global memory

/// A slice [start, start + size) of one dimension: tp::ds(start, size), as pl.ds.
struct ds {
  long long start;
  long long size;
};

template <class Tile, class... Tiles>
inline constexpr int tile_index_v = [] {
  int i = 0, found = -1;
  ((found = (found < 0 && std::is_same_v<Tile, Tiles>) ? i : found, ++i), ...);
  return found;
}();

/// A view of a tensor in global memory. Tiles... are the blocks the kernel moves with TMA;
/// the host built one tensor map for each of them.
template <class T, int R, class... Tiles>
struct gmem_ref {
  static_assert(element_type<T>, "tilepipe: gmem_ref of an unsupported element type");
  static_assert(R >= 1 && R <= max_tma_rank, "tilepipe: tensors have 1 to 5 dimensions");
  static_assert((is_tile_v<Tiles> && ...), "tilepipe: gmem_ref<T, R, Tiles...> takes tp::tile<...> types");
  static_assert(((Tiles::block_type::rank == R) && ...),
                "tilepipe: a tile's block rank must equal the tensor's rank (squeeze dimensions with tp::squeezed)");

  using value_type = T;
  static constexpr int rank = R;
  static constexpr int num_maps = sizeof...(Tiles);
  using tile_pointers = cuda::std::tuple<Tiles*...>;  // the tile list, as values the host can iterate

  T* data = nullptr;           // first element of this view
  long long shape[R] = {};     // extents of this view
  long long stride[R] = {};    // in elements
  long long origin[R] = {};    // position of this view inside the tensor the maps describe
  const tma_desc* maps = nullptr;

  template <class Tile>
  static constexpr bool has_tile = tile_index_v<Tile, Tiles...> >= 0;

  /// The tensor map built for Tile.
  template <class Tile>
  TP_HD const tma_desc& map() const {
    static_assert(has_tile<Tile>,
                  "tilepipe: this gmem_ref has no tensor map for the block spec's tile: list the tile "
                  "in the kernel parameter's type, tp::gmem<T, R, tile...>");
    return maps[tile_index_v<Tile, Tiles...>];
  }

  /// Slices every dimension: x.at(tp::ds(0, 128), tp::ds(64, 64)).
  template <class... S>
    requires(sizeof...(S) == R && (std::is_same_v<S, ds> && ...))
  TP_HD gmem_ref at(S... s) const {
    const ds sl[R] = {s...};
    gmem_ref r = *this;
    for (int d = 0; d < R; ++d) {
      TP_REQUIRE(sl[d].start >= 0 && sl[d].size >= 0 && sl[d].start + sl[d].size <= shape[d],
                 "gmem slice [%lld, %lld) of dimension %d is outside the view's extent %lld", sl[d].start,
                 sl[d].start + sl[d].size, d, shape[d]);
      r.data += sl[d].start * stride[d];
      r.origin[d] += sl[d].start;
      r.shape[d] = sl[d].size;
    }
    return r;
  }
};

template <class G>
inline constexpr bool is_gmem_ref_v = false;
template <class T, int R, class... Tiles>
inline constexpr bool is_gmem_ref_v<gmem_ref<T, R, Tiles...>> = true;

/// The 2-D view of dimensions D0 (rows) and D1 (columns) of a view whose other dimensions
/// have extent 1 (a slice with .at): tp::plane<1, 3>(o.at(ds(b, 1), rows, ds(h, 1), cols))
/// is o[b, rows, h, cols]. It has no tensor maps: for stores from registers, not for TMA.
template <int D0, int D1, class T, int R, class... Tiles>
TP_HD gmem_ref<T, 2> plane(const gmem_ref<T, R, Tiles...>& g) {
  static_assert(D0 >= 0 && D0 < D1 && D1 < R, "tilepipe: plane<D0, D1>: two dimensions of the view, D0 < D1");
  for (int d = 0; d < R; ++d)
    TP_REQUIRE(d == D0 || d == D1 || g.shape[d] == 1,
               "plane<%d, %d> of a view whose dimension %d has extent %lld: slice it to 1 first", D0, D1, d, g.shape[d]);
  gmem_ref<T, 2> r;
  r.data = g.data;
  r.shape[0] = g.shape[D0], r.shape[1] = g.shape[D1];
  r.stride[0] = g.stride[D0], r.stride[1] = g.stride[D1];
  return r;
}

/// The most devices a collective launch spans (one NVLink domain: 8 GPUs).
inline constexpr int max_devices = 8;

/// A tensor in a symmetric buffer: one copy of the same shape on every device of a
/// collective launch (tp::symmetric_tensor; on the GPU an NCCL window). `local` is this
/// device's copy; remote(d) is device d's (Pallas' remote_ref), a gmem_ref with tensor maps
/// of its own, so TMA loads and stores and ordinary accesses reach the peer over NVLink.
/// .at(...) slices every copy alike.
template <class T, int R, class... Tiles>
struct symmetric_ref {
  using local_ref = gmem_ref<T, R, Tiles...>;
  using value_type = T;
  static constexpr int rank = R;
  static constexpr int num_maps = local_ref::num_maps * max_devices;  // device-major
  using tile_pointers = typename local_ref::tile_pointers;

  local_ref local;
  T* base[max_devices] = {};  // the first element of each device's copy
  int device = 0, devices = 1;
  const tma_desc* all_maps = nullptr;

  /// Slices every copy: the view's offset in the tensor is the same on each device.
  template <class... S>
  TP_HD symmetric_ref at(S... s) const {
    symmetric_ref r = *this;
    r.local = local.at(s...);
    return r;
  }

  /// Device d's copy of this view.
  TP_HD local_ref remote(int d) const {
    TP_REQUIRE(d >= 0 && d < devices, "tp::remote: device %d of a symmetric buffer shared by %d devices", d, devices);
    local_ref r = local;
    r.data = base[d] + (local.data - base[device]);
    r.maps = all_maps + d * local_ref::num_maps;
    return r;
  }
};

/// Device d's copy of a view of a symmetric buffer (Pallas' pl.remote_ref / device_id).
template <class T, int R, class... Tiles>
TP_HD gmem_ref<T, R, Tiles...> remote(const symmetric_ref<T, R, Tiles...>& ref, int d) {
  return ref.remote(d);
}

template <class G>
inline constexpr bool is_symmetric_ref_v = false;
template <class T, int R, class... Tiles>
inline constexpr bool is_symmetric_ref_v<symmetric_ref<T, R, Tiles...>> = true;

// ---------------------------------------------------------------------------------------
// Shared memory

/// A view of rows [row0, row0 + Rows) and columns [col0, col0 + Cols) of a tile in shared
/// memory. With Transposed, the logical shape is (Cols, Rows) and element (i, j) is stored at
/// (j, i): the "transposed view" transform used for wgmma operands.
template <class T, class Layout, int Rows = Layout::rows, bool Transposed = false, int Cols = Layout::cols>
struct smem_ref {
  using value_type = T;
  using layout = Layout;
  static constexpr bool transposed = Transposed;
  static constexpr int rows = Transposed ? Cols : Rows;  // logical shape
  static constexpr int cols = Transposed ? Rows : Cols;
  static constexpr int stored_rows = Rows;
  static constexpr int stored_cols = Cols;
  /// Whether the view spans every column of its tile (no column slice).
  static constexpr bool full_width = Cols == Layout::cols;
  static constexpr int bytes = Layout::bytes;

  T* base = nullptr;  // start of the tile (aligned to its swizzle period)
  int row0 = 0;       // first stored row of this view
  int col0 = 0;       // first stored column of this view

  /// Address of logical element (i, j).
  TP_HD T* ptr(int i, int j) const {
    const int r = Transposed ? j : i, c = Transposed ? i : j;
    return reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(base) + Layout::offset(row0 + r, col0 + c));
  }
  TP_HD T& operator()(int i, int j) const { return *ptr(i, j); }
};

/// The SMEM view type of a tile of element type T.
template <class T, class Tile>
using smem = smem_ref<T, tile_layout<Tile, static_cast<int>(sizeof(T))>>;

/// Stored rows [start, start + Count) of a view: tp::rows<64>(a_smem, 64 * wg).
template <int Count, class T, class L, int Rows, bool Tr, int Cols>
TP_HD smem_ref<T, L, Count, Tr, Cols> rows(const smem_ref<T, L, Rows, Tr, Cols>& r, int start) {
  static_assert(Count <= Rows, "tilepipe: row slice longer than the view");
  return {r.base, r.row0 + start, r.col0};
}

/// Stored columns [start, start + Count) of a view: tp::cols<64>(x_smem, 64 * j). Swizzling
/// permutes the 16-byte chunks of each row, and the ops move whole chunks, so a column slice
/// starts and ends on 16-byte boundaries: Count and start are multiples of 16 / sizeof(T)
/// elements (8 for bf16, 4 for f32).
template <int Count, class T, class L, int Rows, bool Tr, int Cols>
TP_HD smem_ref<T, L, Rows, Tr, Count> cols(const smem_ref<T, L, Rows, Tr, Cols>& r, int start) {
  constexpr int chunk = 16 / static_cast<int>(sizeof(T));
  static_assert(Count >= 1 && Count <= Cols, "tilepipe: column slice longer than the view");
  static_assert(Count % chunk == 0,
                "tilepipe: a column slice spans whole 16-byte chunks of a row: its width times the element size "
                "must be a multiple of 16 bytes");
  TP_REQUIRE(start >= 0 && start + Count <= Cols && start % chunk == 0,
             "column slice [%d, %d) of an SMEM view of %d columns: it must lie inside the view and start at a "
             "multiple of %d columns (16 bytes)",
             start, start + Count, Cols, chunk);
  return {r.base, r.row0, r.col0 + start};
}

/// The transposed view of an SMEM ref (Pallas' TransposeTransform): logical (i, j) reads
/// stored (j, i). wgmma takes a transposed view of an N x K block as a K-major B operand.
template <class T, class L, int Rows, bool Tr, int Cols>
TP_HD smem_ref<T, L, Rows, !Tr, Cols> transpose(const smem_ref<T, L, Rows, Tr, Cols>& r) {
  return {r.base, r.row0, r.col0};
}

template <class R>
inline constexpr bool is_smem_ref_v = false;
template <class T, class L, int Rows, bool Tr, int Cols>
inline constexpr bool is_smem_ref_v<smem_ref<T, L, Rows, Tr, Cols>> = true;

// ---------------------------------------------------------------------------------------
// Barriers

/// An mbarrier in shared memory (8 bytes).
struct barrier_ref {
  std::uint64_t* ptr = nullptr;
};

/// N mbarriers, each completing a phase after Arrivals arrivals (scratch allocation).
template <int N, int Arrivals = 1>
struct barriers {
  static constexpr int count = N;
  static constexpr int arrivals = Arrivals;
  static constexpr int bytes = 8 * N;
  std::uint64_t* ptr = nullptr;
  TP_HD barrier_ref operator[](int i) const { return {ptr + i}; }
};

}  // namespace tilepipe
