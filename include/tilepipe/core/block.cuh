// Block shapes, as in Pallas' BlockSpec: each dimension of an array is either
//   blocked   (an int: the index map returns a block index, the block has that size),
//   squeezed  (tp::squeezed: size 1, the dimension disappears from the SMEM view),
//   element   (tp::element(n): the index map returns an element offset, size n).
#pragma once

#include "config.cuh"

namespace tilepipe {

enum class dim_kind : int { blocked, squeezed, element };

/// One dimension of a block shape; an int converts to a blocked dimension.
struct dim {
  int size;
  dim_kind kind = dim_kind::blocked;
  constexpr dim(int s) : size(s) {}  // NOLINT: ints are blocked dims, as in Pallas
  constexpr dim(int s, dim_kind k) : size(s), kind(k) {}
};

inline constexpr dim squeezed{1, dim_kind::squeezed};
constexpr dim element(int n) { return dim{n, dim_kind::element}; }

/// A block shape: tp::block<128, 64>, tp::block<tp::squeezed, 64, 256>.
template <dim... Ds>
struct block {
  static constexpr int rank = sizeof...(Ds);
  static constexpr dim dims[rank] = {Ds...};

  static_assert(rank >= 1 && rank <= 5, "tilepipe: a block has 1 to 5 dimensions (the TMA limit)");
  static_assert(((Ds.size >= 1) && ...), "tilepipe: every block dimension must be at least 1");

  /// Size and kind of dimension i, usable in device code (no array storage needed).
  TP_HD static constexpr int size_at(int i) {
    int r = 0, k = 0;
    ((r = (k++ == i ? Ds.size : r)), ...);
    return r;
  }
  TP_HD static constexpr dim_kind kind_at(int i) {
    dim_kind r = dim_kind::blocked;
    int k = 0;
    ((r = (k++ == i ? Ds.kind : r)), ...);
    return r;
  }

  /// Number of dimensions that remain in the SMEM view (squeezed ones are dropped).
  static constexpr int view_rank = ((Ds.kind == dim_kind::squeezed ? 0 : 1) + ...);
  static constexpr long long elements = (static_cast<long long>(Ds.size) * ...);
  /// Extent of the innermost (contiguous) dimension, and of everything outside it.
  static constexpr int inner = dims[rank - 1].size;
  static constexpr long long outer = elements / inner;
};

template <class T>
inline constexpr bool is_block_v = false;
template <dim... Ds>
inline constexpr bool is_block_v<block<Ds...>> = true;

}  // namespace tilepipe
