// The tensor-map description shared by both backends. The host fills it for every
// (tensor, tile) a kernel declares: the GPU backend encodes `map` with the driver's
// cuTensorMapEncodeTiled; the interpreter's copy engine reads the plain fields, which are
// the same facts the driver encodes (address, dims, strides, box, swizzle).
#pragma once

#include "block.cuh"
#include "config.cuh"
#include "layout.cuh"

#include <cuda.h>

#include <cstdint>
#include <cstring>

namespace tilepipe {

inline constexpr int max_tma_rank = 5;
inline constexpr int max_tma_box = 256;

/// What TMA writes for each element outside the tensor with the NaN fill
/// (CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA): this 16-bit NaN in every half-word,
/// so 0x7ff77ff7 for a 32-bit element (read back on an H100; not the canonical 0x7fffffff).
inline constexpr std::uint16_t tma_nan_fill_half = 0x7ff7;

/// Fills one element of `bytes` (2 or 4) with TMA's NaN fill pattern.
TP_HD inline void write_tma_nan_fill(void* element, int bytes) {
  const std::uint16_t half = tma_nan_fill_half;  // a local: device code cannot take the constant's address
  for (int h = 0; h < bytes / 2; ++h) std::memcpy(static_cast<unsigned char*>(element) + 2 * h, &half, 2);
}

struct tma_desc {
  CUtensorMap map;                 // 128 bytes, 64-byte aligned: used by the GPU's TMA unit
  const void* global = nullptr;    // base address of the whole tensor
  int rank = 0;                    // TMA order: dimension 0 is the innermost
  int elem_bytes = 0;
  int swizzle = 0;                 // bytes: 0, 32, 64, 128
  long long dims[max_tma_rank] = {};
  long long stride_bytes[max_tma_rank] = {};  // stride_bytes[0] == elem_bytes
  int box[max_tma_rank] = {};
  bool oob_nan = false;            // loads fill out-of-bounds elements with NaN, not zeros
  int l2_promotion = 256;          // bytes the L2 rounds each request from HBM up to (0: none)
};

/// How one tile is moved: the TMA box and how many boxes (panels x row chunks) make it.
template <class Tile, int E>
struct tma_plan {
  using layout = tile_layout<Tile, E>;
  using block_type = typename Tile::block_type;
  static constexpr int rank = block_type::rank;
  static constexpr int max_rows = Tile::max_box_rows;  // 256 (the TMA limit) unless the tile says less
  // The block's rows: its one outer dimension of more than one element (dimension 0 of a
  // 2-D block; dimension 1 of attention's [1, n, 1, d] K and V blocks). Only a block whose
  // other outer dimensions have one element each is cut into row boxes.
  static constexpr int outer_dims_over_one = [] {
    int n = 0;
    for (int d = 0; d + 1 < rank; ++d) n += block_type::dims[d].size > 1 ? 1 : 0;
    return n;
  }();
  static constexpr int row_dim = [] {
    for (int d = 0; d + 1 < rank; ++d)
      if (block_type::dims[d].size > 1) return d;
    return rank >= 2 ? rank - 2 : 0;
  }();
  static constexpr int row_tma_dim = rank - 1 - row_dim;  // the same, in TMA order (innermost first)
  static constexpr int row_count = rank >= 2 ? block_type::dims[row_dim].size : 1;
  static constexpr bool chunk_rows = rank >= 2 && outer_dims_over_one == 1 && row_count > max_rows;
  static constexpr int chunk = chunk_rows ? max_rows : row_count;
  static constexpr int chunks = chunk_rows ? row_count / max_rows : 1;
  static constexpr int boxes = layout::panels * chunks;

  static_assert(!chunk_rows || row_count % max_rows == 0,
                "tilepipe: a block taller than its TMA box (256 rows, or box_rows<R>) must be a multiple of the box "
                "height");
  static_assert(Tile::max_box_rows == max_tma_box || (rank >= 2 && outer_dims_over_one <= 1),
                "tilepipe: box_rows<R> applies to blocks with one dimension of rows (2-D blocks, or blocks whose "
                "other outer dimensions have one element each)");

  /// TMA box, innermost dimension first (size_at, not dims[]: a static array has no
  /// storage in device code, so a call the compiler does not fold would read nothing).
  TP_HD static constexpr int box(int tma_dim) {
    if (tma_dim == 0) return layout::panel;
    if (tma_dim == row_tma_dim && chunk_rows) return chunk;
    return block_type::size_at(rank - 1 - tma_dim);
  }

  static constexpr bool box_ok() {
    for (int d = 0; d < rank; ++d)
      if (box(d) > max_tma_box) return false;
    return true;
  }
  static_assert(box_ok(), "tilepipe: a block dimension exceeds the TMA box limit of 256 elements");

  /// Coordinate offset (in TMA order) and SMEM byte offset of box b.
  static constexpr int box_col(int b) { return (b % layout::panels) * layout::panel; }
  static constexpr int box_row(int b) { return (b / layout::panels) * chunk; }
  static constexpr int box_smem(int b) {
    return (b % layout::panels) * layout::panel_bytes + (b / layout::panels) * chunk * layout::row_bytes;
  }
  static constexpr int box_bytes = layout::bytes / boxes;
};

}  // namespace tilepipe
