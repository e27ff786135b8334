// Sequential pipeline grids. Steps advance like an odometer, last axis fastest, as in
// Pallas. Extents may be compile-time (tp::grid<4, 8>()) or run time (tp::grid(n, k)).
#pragma once

#include "config.cuh"
#include "error.cuh"
#include "index_map.cuh"

namespace tilepipe {

inline constexpr int dynamic_extent = -1;

template <int... Static>
struct grid_t {
  static constexpr int rank = sizeof...(Static);
  static_assert(rank >= 1 && rank <= 4, "tilepipe: a pipeline grid has 1 to 4 axes");
  static constexpr int static_extents[rank] = {Static...};
  static constexpr bool is_static = ((Static != dynamic_extent) && ...);

  int extent[rank];

  TP_HD constexpr int operator[](int a) const { return extent[a]; }

  /// Total number of steps (0 when any axis is empty: the pipeline then does nothing).
  TP_HD constexpr long long steps() const {
    long long n = 1;
    for (int a = 0; a < rank; ++a) n *= extent[a];
    return n;
  }

  /// Multi-index of a linear step.
  TP_HD constexpr index<rank> unravel(long long step) const {
    index<rank> r{};
    for (int a = rank - 1; a >= 0; --a) {
      r.v[a] = static_cast<int>(step % extent[a]);
      step /= extent[a];
    }
    return r;
  }

  /// Advances a multi-index by one step (odometer), without divisions.
  TP_HD constexpr void increment(index<rank>& i) const {
    for (int a = rank - 1; a >= 0; --a) {
      if (++i.v[a] < extent[a]) return;
      i.v[a] = 0;
    }
  }
};

/// A grid with static extents: tp::grid<4, 8>().
template <int... E>
TP_HD constexpr grid_t<E...> grid() {
  static_assert(((E >= 0) && ...), "tilepipe: static grid extents must be >= 0");
  return {{E...}};
}

/// A grid with run-time extents: tp::grid(k_steps) or tp::grid(m, k).
template <class... I>
  requires(std::is_integral_v<I> && ...)
TP_HD constexpr auto grid(I... extents) {
  grid_t<((void)sizeof(I), dynamic_extent)...> g{{static_cast<int>(extents)...}};
  for (int a = 0; a < g.rank; ++a) TP_REQUIRE(g.extent[a] >= 0, "pipeline grid axis %d has negative extent %d", a, g.extent[a]);
  return g;
}

/// Calls an index map with the entries of a multi-index as separate arguments.
template <class Map, int R>
TP_HD TP_FORCEINLINE auto apply_index_map(const Map& map, const index<R>& i) {
  if constexpr (R == 1) return map(i.v[0]);
  else if constexpr (R == 2) return map(i.v[0], i.v[1]);
  else if constexpr (R == 3) return map(i.v[0], i.v[1], i.v[2]);
  else return map(i.v[0], i.v[1], i.v[2], i.v[3]);
}

}  // namespace tilepipe
