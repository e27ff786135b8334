// Orders in which CTAs (or the iterations of a persistent loop) visit the output tiles
// of a matrix product, so that tiles running at the same time share operands in L2.
#pragma once

#include "config.cuh"

namespace tilepipe {

struct tile_coord {
  int m;
  int n;
};

/// Grouped order: bands of `group` tile rows; inside a band the row index moves fastest,
/// so consecutive tiles reuse one column block of B and `group` row blocks of A.
TP_HD constexpr tile_coord grouped_tile_order(int id, int tiles_m, int tiles_n, int group) {
  const int per_band = group * tiles_n;
  const int first_m = (id / per_band) * group;
  const int rows = tiles_m - first_m < group ? tiles_m - first_m : group;
  const int r = id % per_band;
  return {first_m + r % rows, r / rows};
}

/// Planar snake: like grouped order, but every other band walks the columns backwards,
/// so the first tiles of a band reuse the B columns the previous band just read.
TP_HD constexpr tile_coord snake_tile_order(int id, int tiles_m, int tiles_n, int group) {
  tile_coord c = grouped_tile_order(id, tiles_m, tiles_n, group);
  if ((id / (group * tiles_n)) % 2 == 1) c.n = tiles_n - 1 - c.n;
  return c;
}

}  // namespace tilepipe
