// Block specs: which block of an operand each pipeline step sees (Pallas' BlockSpec).
//     tp::spec<a_tile>([=](auto k) { return tp::idx(m, k); }, tp::delay_release<1>)
// The tile (block shape + memory transforms) is a type; the index map a generic callable.
// Options: tp::delay_release<d>, tp::buffered<n> (slots for this operand), tp::depends_on<axes...>
// (declares the grid axes the map uses, for maps the probe analysis cannot follow),
// tp::multicast<c> (the block is shared by the c CTAs of a cluster), tp::manual_ready (the
// body waits for the block itself), tp::streamed (a new block every step, never compared),
// tp::waited_by<w> (one compute warpgroup waits for the blocks; warp-specialised inputs).
// tp::gathered_spec<Tile>(map, box_source, opts...) is an input whose block is assembled
// from row boxes in different places (the pages of a paged KV cache).
// tp::gmem_spec passes an operand through in global memory (no copies; nested pipelines).
#pragma once

#include "config.cuh"
#include "index_map.cuh"
#include "layout.cuh"
#include "options.cuh"

#include <type_traits>
#include <utility>

namespace tilepipe {

struct max_concurrent_steps_tag;
template <int N>
struct max_concurrent_steps_t : option<max_concurrent_steps_tag, N> {
  static_assert(N >= 1 && N <= 32, "tilepipe: max_concurrent_steps must be in 1..32");
};
/// SMEM slots per pipelined operand (the number of copies in flight).
template <int N>
inline constexpr max_concurrent_steps_t<N> max_concurrent_steps{};

struct delay_release_tag;
template <int D>
struct delay_release_t : option<delay_release_tag, D> {
  static_assert(D >= 0, "tilepipe: delay_release must be >= 0");
};
/// Steps a slot stays reserved after its last use (1 when the body leaves a wgmma in flight).
template <int D>
inline constexpr delay_release_t<D> delay_release{};

struct buffered_tag;
template <int N>
struct buffered_t : option<buffered_tag, N> {
  static_assert(N >= 1 && N <= 32, "tilepipe: buffered<n> takes 1..32 slots");
};
/// Number of SMEM slots for one operand, overriding max_concurrent_steps (Pallas TPU's Buffered).
template <int N>
inline constexpr buffered_t<N> buffered{};

struct depends_on_tag;
template <int... Axes>
struct depends_on_t : option<depends_on_tag, (0u | ... | (1u << Axes))> {};
/// Declares which grid axes an index map uses.
template <int... Axes>
inline constexpr depends_on_t<Axes...> depends_on{};

struct multicast_tag;
template <int C, int Axis>
struct multicast_t : option<multicast_tag, C> {
  static_assert(C == 1 || C == 2 || C == 4, "tilepipe: multicast<c> takes a cluster of 1, 2 or 4 CTAs");
  static_assert(Axis >= -1 && Axis <= 2, "tilepipe: multicast<c, axis>: axis is a grid axis (0, 1 or 2), or -1 for "
                                         "the whole cluster");
  static constexpr int axis = Axis;
};
/// The block is the same for C CTAs of the launch's cluster (Pallas' collective_axes): each
/// of them loads 1/C of its TMA boxes and multicasts them into all C, so L2 serves the block
/// once per C CTAs instead of once per CTA. Warp-specialised pipelines only.
///   multicast<C>        all CTAs of the cluster: the launch's clusters have C CTAs;
///   multicast<C, axis>  the CTAs of the cluster that differ only along grid axis `axis`:
///                       the launch's clusters span C CTAs along it (launch_config::cluster_shape,
///                       e.g. {2, 2}: A shared along one axis, B along the other).
template <int C, int Axis = -1>
inline constexpr multicast_t<C, Axis> multicast{};

namespace detail {
/// The grid axis of the first multicast option among Opts (-1: the whole cluster, or none).
template <class... Opts>
constexpr int multicast_axis() {
  int axis = -1;
  bool found = false;
  (
      [&] {
        if constexpr (std::is_same_v<typename tag_of<Opts>::type, multicast_tag>)
          if (!found) axis = Opts::axis, found = true;
      }(),
      ...);
  return axis;
}
}  // namespace detail

struct manual_ready_tag;
/// Manual ready barriers (an input's option): the pipeline does not wait for the block to
/// land before it calls the body; the body gets a tp::pending_block and calls its wait()
/// where it first reads the block, so that work on the other inputs (attention's Q K^T
/// before it needs V) overlaps the copy. Both pipelines.
inline constexpr option<manual_ready_tag, true> manual_ready{};

struct streamed_tag;
/// A new block at every step (an input's option): the pipeline takes the next slot at every
/// step without comparing block indices, and releases the block after the step (CUTLASS's
/// mainloop, Pallas GPU's semantics). An index map affine in the step of a one-axis grid
/// (tp::idx(m, k), tp::idx(row0 + s * n)) streams without the option: consecutive steps
/// then read different blocks anyway. With the option, a block index that repeats is
/// fetched again into the next slot instead of being kept. Both pipelines.
inline constexpr option<streamed_tag, true> streamed{};

struct waited_by_tag;
template <int W>
struct waited_by_t : option<waited_by_tag, W> {
  static_assert(W >= 0 && W <= 2, "tilepipe: waited_by<w> names a compute warpgroup (0 .. num_compute_wgs - 1)");
};
/// Only compute warpgroup W waits for this input's blocks to land (an option of
/// emit_pipeline_warp_specialized's inputs). Every other compute warpgroup must read a block
/// only after it synchronised with W after W's wait: a tp::turn_order in which W's turn
/// comes first does this (FlashAttention-3's K and V). The others skip a barrier poll per
/// block; a warpgroup that reads without the order is a race the interpreter reports
/// ("missing wait").
template <int W>
inline constexpr waited_by_t<W> waited_by{};

namespace detail {
/// The largest and the smallest of a non-empty list (a compile-time fold over a pack).
constexpr int largest(std::initializer_list<int> xs) {
  int m = *xs.begin();
  for (int x : xs) m = x > m ? x : m;
  return m;
}
constexpr int smallest(std::initializer_list<int> xs) {
  int m = *xs.begin();
  for (int x : xs) m = x < m ? x : m;
  return m;
}
}  // namespace detail

template <class Tile, class Map, class... Opts>
struct block_spec {
  static_assert(is_tile_v<Tile>, "tilepipe: spec<Tile>(...) takes a tp::tile<...> type");
  using tile_type = Tile;
  using map_type = Map;
  static constexpr bool in_smem = true;
  static constexpr int delay = option_v<delay_release_tag, -1, Opts...>;  // -1: the pipeline's
  static constexpr int buffers = option_v<buffered_tag, 0, Opts...>;      // 0: the pipeline's
  static constexpr int multicast = option_v<multicast_tag, 1, Opts...>;
  static constexpr int multicast_axis = detail::multicast_axis<Opts...>();  // -1: the whole cluster
  static constexpr bool manual_ready = option_v<manual_ready_tag, false, Opts...>;
  static constexpr int waited_by = option_v<waited_by_tag, -1, Opts...>;  // -1: every compute warpgroup
  static constexpr bool streamed_option = option_v<streamed_tag, false, Opts...>;
  static constexpr bool gathered = false;  // tp::gathered_spec: the block's row boxes come from several places

  /// Grid axes the index map depends on (bit a = axis a).
  template <int GridRank>
  static constexpr unsigned axes() {
    if constexpr (has_option_v<depends_on_tag, Opts...>) return option_v<depends_on_tag, 0u, Opts...>;
    else return axes_used_v<Map, GridRank>;
  }
  /// Whether every step takes a new block (tp::streamed, or a map affine in the one grid axis).
  template <int GridRank>
  static constexpr bool streams() {
    if constexpr (streamed_option) return true;
    else if constexpr (has_option_v<depends_on_tag, Opts...> || GridRank != 1) return false;
    else return axes<1>() == 1u && affine_map_v<Map, 1>;
  }

  Map index_map;
};

/// An input block gathered from row boxes that lie in different places of its array
/// (tp::gathered_spec): a paged KV cache, whose block of keys spans several pages. The
/// index map names the block as for any spec (when it changes the pipeline takes a new
/// slot; an affine map streams); box_source(block_index, row) returns where the block's
/// rows [row, row + R) come from, as a block index of the array, R being the tile's
/// box_rows<R>. All boxes land in the one slot and complete on its one ready barrier.
template <class Tile, class Map, class Source, class... Opts>
struct gathered_block_spec : block_spec<Tile, Map, Opts...> {
  static_assert(!has_option_v<multicast_tag, Opts...>, "tilepipe: a gathered spec cannot be multicast");
  static constexpr bool gathered = true;
  Source box_source;
};

/// An input spec whose block is gathered from row boxes of the tile's box_rows<R> rows:
///     tp::gathered_spec<kv_tile>([=](auto s) { return tp::idx(b, key0 - s * n, h, 0); },   // which block
///                                [=](tp::index<4> blk, int row) {                           // where its rows are
///                                  const int key = blk[1] + row;
///                                  return tp::idx(table[key / page], key % page, h, 0); });
template <class Tile, class Map, class Source, class... Opts>
TP_HD constexpr gathered_block_spec<Tile, Map, Source, Opts...> gathered_spec(Map map, Source box_source, Opts...) {
  return {{map}, box_source};
}

/// The index map of a spec without one: the whole array, block (0, ..., 0).
template <int R>
struct whole_array_map {
  template <class... I>
  TP_HD constexpr index<R> operator()(I...) const {
    return {};
  }
};

template <class Tile, class Map, class... Opts>
TP_HD constexpr block_spec<Tile, Map, Opts...> spec(Map map, Opts...) {
  return {map};
}
template <class Tile>
TP_HD constexpr block_spec<Tile, whole_array_map<Tile::block_type::rank>> spec() {
  return {{}};
}

namespace detail {
/// Whether an index map can be called with N grid indices (a grid has 1 to 4 axes).
template <class Map, int N>
inline constexpr bool map_takes_v = false;
template <class Map>
inline constexpr bool map_takes_v<Map, 1> = std::is_invocable_v<const Map&, int>;
template <class Map>
inline constexpr bool map_takes_v<Map, 2> = std::is_invocable_v<const Map&, int, int>;
template <class Map>
inline constexpr bool map_takes_v<Map, 3> = std::is_invocable_v<const Map&, int, int, int>;
template <class Map>
inline constexpr bool map_takes_v<Map, 4> = std::is_invocable_v<const Map&, int, int, int, int>;

/// How many grid indices an index map takes (0: none of 1 to 4).
template <class Map>
inline constexpr int map_arity_v = map_takes_v<Map, 1>   ? 1
                                   : map_takes_v<Map, 2> ? 2
                                   : map_takes_v<Map, 3> ? 3
                                   : map_takes_v<Map, 4> ? 4
                                                         : 0;
}  // namespace detail

namespace diagnostic {
// The template arguments of index_map_arity_mismatch name the spec and the two counts.
template <int Position>
struct in_spec {};
template <int Position>
struct out_spec {};
template <int Axes>
struct grid_axes {};
template <int Indices>
struct index_map_takes {};
template <class Spec, class Grid, class Map>
struct index_map_arity_mismatch {
  static_assert(sizeof(Spec) == 0,
                "tilepipe: an index map takes one grid index per axis of the pipeline's grid, and this one takes a "
                "different number: see the spec (in_spec / out_spec position), grid_axes and index_map_takes in the "
                "template arguments of this diagnostic");
  static constexpr bool reported = true;
};

/// True when every spec's index map takes GridRank indices; else instantiates the
/// diagnostic for the first that does not (Out: out_specs).
template <int GridRank, bool Out, int Position = 0, class Spec, class... Rest>
constexpr bool index_maps_fit(const Spec*, const Rest*... rest) {
  if constexpr (Spec::in_smem) {
    using Map = typename Spec::map_type;
    if constexpr (!detail::map_takes_v<Map, GridRank>) {
      using where = std::conditional_t<Out, out_spec<Position>, in_spec<Position>>;
      static_assert(index_map_arity_mismatch<where, grid_axes<GridRank>, index_map_takes<detail::map_arity_v<Map>>>::reported);
      return false;
    }
  }
  if constexpr (sizeof...(Rest) > 0) return index_maps_fit<GridRank, Out, Position + 1>(rest...);
  else return true;
}
template <int GridRank, bool Out>
constexpr bool index_maps_fit() {
  return true;
}
}  // namespace diagnostic

/// An operand the pipeline leaves in global memory: the body receives its GMEM ref.
struct gmem_spec_t {
  static constexpr bool in_smem = false;
  static constexpr int multicast = 1;
};
inline constexpr gmem_spec_t gmem_spec{};

}  // namespace tilepipe
