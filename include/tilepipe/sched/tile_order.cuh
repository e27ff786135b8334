// Orders in which CTAs (or the iterations of a persistent loop) visit the output tiles
// of a matrix product, so that tiles running at the same time share operands in L2.
#pragma once

#include "../core/config.cuh"
#include "fast_divmod.cuh"

namespace tilepipe {

struct tile_coord {
  int m;
  int n;
};

namespace detail {
/// Divides with the `/` operator: for orders evaluated once per CTA.
struct plain_divisor {
  int d;
  TP_HD constexpr int divisor() const { return d; }
  TP_HD constexpr int div(int n) const { return n / d; }
};

/// The grouped order, and the snake order when `snake`: bands of `full_rows` (the group)
/// tile rows of the full width (per_band = group * tiles_n tiles); the last band has
/// tail_rows rows.
template <class Div>
TP_HD constexpr tile_coord grouped_order(int id, int tiles_m, int tiles_n, const Div& per_band, const Div& full_rows,
                                         const Div& tail_rows, bool snake) {
  const int group = full_rows.divisor();
  const int band = per_band.div(id);
  const int first_m = band * group;
  const int r = id - band * per_band.divisor();
  const Div& rows = tiles_m - first_m < group ? tail_rows : full_rows;
  const int n = rows.div(r);
  return {first_m + r - n * rows.divisor(), snake && band % 2 == 1 ? tiles_n - 1 - n : n};
}

TP_HD constexpr int tail_rows(int tiles_m, int group) { return tiles_m % group ? tiles_m % group : group; }

/// Either order with plain divisions.
TP_HD constexpr tile_coord plain_grouped_order(int id, int tiles_m, int tiles_n, int group, bool snake) {
  return grouped_order(id, tiles_m, tiles_n, plain_divisor{group * tiles_n}, plain_divisor{group},
                       plain_divisor{tail_rows(tiles_m, group)}, snake);
}
}  // namespace detail

/// Grouped order: bands of `group` tile rows; inside a band the row index moves fastest,
/// so consecutive tiles reuse one column block of B and `group` row blocks of A.
TP_HD constexpr tile_coord grouped_tile_order(int id, int tiles_m, int tiles_n, int group) {
  return detail::plain_grouped_order(id, tiles_m, tiles_n, group, false);
}

/// Planar snake: like grouped order, but every other band walks the columns backwards,
/// so the first tiles of a band reuse the B columns the previous band just read.
TP_HD constexpr tile_coord snake_tile_order(int id, int tiles_m, int tiles_n, int group) {
  return detail::plain_grouped_order(id, tiles_m, tiles_n, group, true);
}

/// How a persistent loop visits the tiles: bands of `group` tile rows, each walked column
/// by column (grouped), or every other band backwards (snake).
enum class tile_order { grouped, snake };

/// The tiles_m x tiles_n tiles of one output in one order, with the divisions prepared once
/// (see fast_divmod), for a persistent loop that maps one tile index per tile: make it on
/// the host and pass it to the kernel (tile_scheduler does).
class tile_order_plan {
 public:
  tile_order_plan() = default;
  TP_HD tile_order_plan(int tiles_m, int tiles_n, int group, tile_order order = tile_order::grouped)
      : tiles_m_(tiles_m), tiles_n_(tiles_n), per_band_(checked(tiles_m, tiles_n, group) * tiles_n),
        full_rows_(group), tail_rows_(detail::tail_rows(tiles_m, group)), snake_(order == tile_order::snake) {}

  TP_HD int tiles() const { return tiles_m_ * tiles_n_; }
  TP_HD int tiles_m() const { return tiles_m_; }
  TP_HD int tiles_n() const { return tiles_n_; }
  /// The id-th tile of the order (0 <= id < tiles()).
  TP_HD tile_coord at(int id) const {
    return detail::grouped_order(id, tiles_m_, tiles_n_, per_band_, full_rows_, tail_rows_, snake_);
  }
  /// The same tiles in another order.
  TP_HD tile_order_plan reordered(int group, tile_order order) const { return {tiles_m_, tiles_n_, group, order}; }

 private:
  static TP_HD int checked(int tiles_m, int tiles_n, int group) {
    TP_REQUIRE(tiles_m >= 1 && tiles_n >= 1 && group >= 1,
               "tile_order_plan: %d x %d tiles in groups of %d rows; all three must be positive", tiles_m, tiles_n, group);
    return group;
  }
  int tiles_m_ = 1, tiles_n_ = 1;  // the group is full_rows_'s divisor
  fast_divmod per_band_, full_rows_, tail_rows_;
  bool snake_ = false;
};

}  // namespace tilepipe
