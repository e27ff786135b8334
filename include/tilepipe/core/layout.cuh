// Shared-memory layouts of blocks: the memory transforms of Pallas' GPU block specs.
//
// A block is stored as a 2-D tile: rows = all dimensions but the innermost, flattened in
// row-major order; cols = the innermost dimension. The tile is cut into column panels of
// P elements; each panel holds all rows, row after row:
//     byte(r, c) = (c / P) * rows * P * e + r * P * e + (c % P) * e           (e = elem size)
// With swizzle S (32, 64 or 128 bytes), P * e = S and the 16-byte chunk index inside each
// S-byte row is XORed with address bits 7 and up, exactly as TMA writes and wgmma reads it:
//     byte ^= ((byte >> 7) & (S / 16 - 1)) << 4
// This is Pallas' Tiling((8, S / e)) + Swizzle(S) operand layout with panels ordered
// column-major (one TMA box per panel). Without swizzle P = cols (at most 256 elements,
// the TMA box limit; wider rows use 256-element panels).
#pragma once

#include "block.cuh"
#include "config.cuh"

#include <type_traits>

namespace tilepipe {

/// Memory transform: swizzle<0> (none), swizzle<32>, swizzle<64>, swizzle<128>.
template <int Bytes>
struct swizzle {
  static_assert(Bytes == 0 || Bytes == 32 || Bytes == 64 || Bytes == 128,
                "tilepipe: swizzle must be 0 (none), 32, 64 or 128 bytes");
  static constexpr int bytes = Bytes;
};

/// TMA box height: the tile moves in boxes of at most R rows (default 256, the TMA limit).
/// A block multicast to a cluster is split box by box among its CTAs, so a block of one
/// column panel needs box_rows<rows / cluster size> to be shared.
template <int R>
struct box_rows {
  static_assert(R >= 8 && R <= 256 && R % 8 == 0, "tilepipe: box_rows<R> takes a multiple of 8 rows in 8..256");
  static constexpr int value = R;
};

/// What a load reads outside the array (Pallas' out-of-bounds fill mode): zeros (the
/// default), or NaN (TMA's NaN fill; floating-point elements only), so that a kernel that
/// forgets to mask an edge block sees it.
enum class oob { zero, nan };
template <oob Fill>
struct oob_fill {
  static constexpr oob value = Fill;
};

/// How far the L2 rounds up each TMA request from HBM (the tensor map's L2 promotion): 0
/// (none), 64, 128 or 256 bytes (the default). A stream read once with 128-byte box rows of a
/// wider row (a 64-column panel of a 128-column head) reads HBM faster with 128 than with 256:
/// docs/design.md, "L2 promotion".
template <int Bytes>
struct l2_promotion {
  static_assert(Bytes == 0 || Bytes == 64 || Bytes == 128 || Bytes == 256,
                "tilepipe: l2_promotion takes 0 (none), 64, 128 or 256 bytes");
  static constexpr int value = Bytes;
};

namespace detail {
template <class T>
inline constexpr bool is_swizzle_v = false;
template <int B>
inline constexpr bool is_swizzle_v<swizzle<B>> = true;
template <class T>
inline constexpr bool is_box_rows_v = false;
template <int R>
inline constexpr bool is_box_rows_v<box_rows<R>> = true;
template <class T>
inline constexpr bool is_oob_fill_v = false;
template <oob F>
inline constexpr bool is_oob_fill_v<oob_fill<F>> = true;
template <class T>
inline constexpr bool is_l2_promotion_v = false;
template <int B>
inline constexpr bool is_l2_promotion_v<l2_promotion<B>> = true;

/// The first of Ts that satisfies Is, else Default.
template <template <class> class Is, class Default, class... Ts>
struct first_of {
  using type = Default;
};
template <template <class> class Is, class Default, class T, class... Ts>
struct first_of<Is, Default, T, Ts...> {
  using type = std::conditional_t<Is<T>::value, T, typename first_of<Is, Default, Ts...>::type>;
};
template <class T>
struct swizzle_kind : std::bool_constant<is_swizzle_v<T>> {};
template <class T>
struct box_rows_kind : std::bool_constant<is_box_rows_v<T>> {};
template <class T>
struct oob_fill_kind : std::bool_constant<is_oob_fill_v<T>> {};
template <class T>
struct l2_promotion_kind : std::bool_constant<is_l2_promotion_v<T>> {};
}  // namespace detail

/// The static part of a block spec: block shape plus memory transforms, in any order:
/// swizzle<S> (default none), box_rows<R> (default 256), oob_fill<oob::nan> (default zeros),
/// l2_promotion<B> (default 256 bytes).
template <class Block, class... Transforms>
struct tile {
  static_assert(is_block_v<Block>, "tilepipe: tile<B, S> takes a tp::block<...> shape first");
  static_assert(((detail::is_swizzle_v<Transforms> || detail::is_box_rows_v<Transforms> ||
                  detail::is_oob_fill_v<Transforms> || detail::is_l2_promotion_v<Transforms>) && ...),
                "tilepipe: a tile's transforms are tp::swizzle<S>, tp::box_rows<R>, tp::oob_fill<F> and "
                "tp::l2_promotion<B>");
  using block_type = Block;
  static constexpr int swizzle_bytes = detail::first_of<detail::swizzle_kind, swizzle<0>, Transforms...>::type::bytes;
  static constexpr int max_box_rows = detail::first_of<detail::box_rows_kind, box_rows<256>, Transforms...>::type::value;
  static constexpr oob oob_fill_mode = detail::first_of<detail::oob_fill_kind, oob_fill<oob::zero>, Transforms...>::type::value;
  static constexpr int l2_promotion_bytes =
      detail::first_of<detail::l2_promotion_kind, l2_promotion<256>, Transforms...>::type::value;
  static_assert(Block::dims[Block::rank - 1].kind != dim_kind::squeezed,
                "tilepipe: the innermost block dimension cannot be squeezed (TMA moves rows of at least 16 bytes)");
};

template <class T>
inline constexpr bool is_tile_v = false;
template <class B, class... T>
inline constexpr bool is_tile_v<tile<B, T...>> = true;

/// Byte layout of one tile of element size E (bytes) in shared memory.
template <class Tile, int E>
struct tile_layout {
  using tile_type = Tile;
  using block_type = typename Tile::block_type;
  static constexpr int swizzle = Tile::swizzle_bytes;
  static constexpr int rows = static_cast<int>(block_type::outer);
  static constexpr int cols = block_type::inner;
  static constexpr int panel = swizzle ? swizzle / E : (cols <= 256 ? cols : 256);
  static constexpr int panels = cols / panel;
  static constexpr int row_bytes = panel * E;
  static constexpr int panel_bytes = rows * row_bytes;
  static constexpr int bytes = panels * panel_bytes;

  static_assert(swizzle == 0 || swizzle / E >= 1, "tilepipe: swizzle narrower than one element");
  static_assert(cols % panel == 0,
                "tilepipe: the innermost block dimension must be a multiple of the swizzle width "
                "(swizzle bytes / element bytes), or of 256 elements when wider than 256 without swizzle");
  static_assert(row_bytes % 16 == 0,
                "tilepipe: TMA moves rows of a multiple of 16 bytes: the innermost block dimension "
                "times the element size must be a multiple of 16");
  static_assert(swizzle == 0 || rows % 8 == 0,
                "tilepipe: a swizzled block needs a multiple of 8 rows (the swizzle pattern repeats every 8 rows)");
  static_assert(panels == 1 || panel_bytes % 128 == 0,
                "tilepipe: each TMA panel must start 128-byte aligned: rows * panel bytes must be a multiple of 128");

  /// Byte offset of element (r, c) from the (suitably aligned) start of the tile.
  TP_HD static constexpr int offset(int r, int c) {
    int off = (c / panel) * panel_bytes + r * row_bytes + (c % panel) * E;
    if constexpr (swizzle != 0) off ^= ((off >> 7) & (swizzle / 16 - 1)) << 4;
    return off;
  }
};

}  // namespace tilepipe
