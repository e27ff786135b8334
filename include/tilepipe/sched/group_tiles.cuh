// The row tiles of a ragged batch of groups: the tokens routed to each expert of a
// mixture-of-experts layer, stacked group after group (a grouped matmul's lhs).
//
// Each group's rows are cut into tiles of tile_rows rows that start at the group's first
// row, so no tile holds rows of two groups: a group of 300 rows in tiles of 128 has tiles
// of 128, 128 and 44 rows, and an empty group has none. The tiles of all groups are
// numbered group after group; tile_starts[g] (an exclusive prefix sum, G + 1 entries) is
// the number of the first tile of group g, and a tile's group is found by a binary search
// over it (8 steps for 256 groups, once per output tile).
//
// The sizes live on the device (only it knows them: no host synchronisation, so the
// kernel runs in a CUDA graph): a kernel prefetches the group table into shared memory
// (ops/scalar_prefetch.cuh), fills tile_starts there, and hands both to these functions.
// Tables are anything with operator[](int) and size().
#pragma once

#include "../core/config.cuh"

namespace tilepipe {

/// Where each group's rows are in the stacked rows.
///   offsets (masked_stride == 0): table[g] is the end of group g's rows (PyTorch's offs:
///     cumulative sizes), group g is rows [table[g - 1], table[g]) (table[-1] = 0);
///   masked (masked_stride > 0): group g owns rows [g * masked_stride, (g + 1) * masked_stride)
///     of which the first table[g] are valid (the decode layout lhs[G, Mmax, K]).
template <class Table>
struct group_rows {
  Table table;
  int masked_stride = 0;

  TP_HD int groups() const { return table.size(); }
  TP_HD int begin(int g) const { return masked_stride ? g * masked_stride : g ? table[g - 1] : 0; }
  /// Valid rows of group g (a masked count is clipped to the group's rows).
  TP_HD int count(int g) const {
    if (!masked_stride) return table[g] - begin(g);
    const int n = table[g];
    return n < masked_stride ? n : masked_stride;
  }
};

/// One row tile: rows [row0, row0 + rows) of group `group` (1 <= rows <= tile_rows), the
/// index of the tile within its group.
struct group_tile {
  int group;
  int row0;
  int rows;
};

/// The number of tiles of groups 0 .. g - 1 (tile_starts[g]); a group of negative count has none.
template <class Table>
TP_HD int group_tiles_before(const group_rows<Table>& rows, int g, int tile_rows) {
  int tiles = 0;
  for (int j = 0; j < g; ++j) {
    const int n = rows.count(j);
    tiles += n > 0 ? (n + tile_rows - 1) / tile_rows : 0;
  }
  return tiles;
}

/// Tile number t (0 <= t < tile_starts[G]) of the groups whose first tile numbers are
/// tile_starts (G + 1 entries, non-decreasing).
template <class Table, class Starts>
TP_HD group_tile locate_group_tile(const group_rows<Table>& rows, const Starts& tile_starts, int tile_rows, int t) {
  int lo = 0, hi = rows.groups();  // tile_starts[lo] <= t < tile_starts[hi]
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (tile_starts[mid] <= t) lo = mid;
    else hi = mid;
  }
  const int in_group = (t - tile_starts[lo]) * tile_rows;
  const int left = rows.count(lo) - in_group;
  return {lo, rows.begin(lo) + in_group, left < tile_rows ? left : tile_rows};
}

}  // namespace tilepipe
