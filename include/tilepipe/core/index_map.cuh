// Index maps and their compile-time analysis.
//
// An index map is a generic callable from grid indices to block indices:
//     [=](auto i, auto k) { return tp::idx(m, k); }
// At run time it is called with ints. At compile time it is called (in an unevaluated
// context) with axis probes, types whose arithmetic records which grid axes flow into the
// result: the C++ counterpart of the jaxpr DCE Pallas runs on its index maps. The result
// type tells which axes a spec depends on; a spec that depends on none is index-invariant
// and needs one SMEM slot. The probes also record whether the result is affine in the axes
// (built from them by +, - and products with integers only): a map affine in the step of a
// one-axis grid moves to a new block at every step, which the warp-specialised pipeline
// then takes without comparing indices (its streaming path). Otherwise whether a block
// changed between two steps is decided at run time by comparing indices.
#pragma once

#include "config.cuh"

#include <type_traits>
#include <utility>

namespace tilepipe {

/// Runtime block indices returned by an index map (one entry per array dimension).
template <int R>
struct index {
  int v[R > 0 ? R : 1];
  static constexpr int rank = R;
  TP_HD constexpr int operator[](int i) const { return v[i]; }
  TP_HD constexpr bool operator==(const index& o) const {
    for (int i = 0; i < R; ++i)
      if (v[i] != o.v[i]) return false;
    return true;
  }
};

/// A grid axis seen by the analysis: Mask has bit a set when axis a flows into the value;
/// Affine, whether the value is an affine function of the axes (integer coefficients).
/// Values of either kind convert to each other, so that a map may keep its result in one
/// variable (`auto r = e; if (...) r = e / n;`); the variable keeps its first value's kind,
/// and a streamed operand whose block repeats is fetched again (correct, if slower).
template <unsigned Mask, bool Affine = true>
struct axis_probe {
  static constexpr unsigned mask = Mask;
  static constexpr bool affine = Affine;
  axis_probe() = default;
  template <bool A>
  TP_HD constexpr axis_probe(axis_probe<Mask, A>) {}
};

template <class T>
inline constexpr unsigned probe_mask_v = 0;
template <unsigned M, bool A>
inline constexpr unsigned probe_mask_v<axis_probe<M, A>> = M;

/// Whether a value of the analysis is affine in the axes (integers are: constants).
template <class T>
inline constexpr bool probe_affine_v = std::is_integral_v<T>;
template <unsigned M, bool A>
inline constexpr bool probe_affine_v<axis_probe<M, A>> = A;

template <class T>
inline constexpr bool is_probe_v = false;
template <unsigned M, bool A>
inline constexpr bool is_probe_v<axis_probe<M, A>> = true;

template <class T>
concept probe_operand = std::is_integral_v<T> || is_probe_v<T>;

template <class A, class B>
concept probe_pair = probe_operand<A> && probe_operand<B> && (is_probe_v<A> || is_probe_v<B>);

// Sums and differences of affine values are affine; a product is affine when one factor is
// an integer; quotients and remainders are not.
#define TP_PROBE_BINARY_OP(op, affine)                                                             \
  template <class A, class B>                                                                      \
    requires probe_pair<A, B>                                                                      \
  TP_HD constexpr axis_probe<probe_mask_v<A> | probe_mask_v<B>, (affine)> operator op(A, B) {       \
    return {};                                                                                     \
  }
TP_PROBE_BINARY_OP(+, probe_affine_v<A>&& probe_affine_v<B>)
TP_PROBE_BINARY_OP(-, probe_affine_v<A>&& probe_affine_v<B>)
TP_PROBE_BINARY_OP(*, probe_affine_v<A>&& probe_affine_v<B> && (!is_probe_v<A> || !is_probe_v<B>))
TP_PROBE_BINARY_OP(/, false)
TP_PROBE_BINARY_OP(%, false)
#undef TP_PROBE_BINARY_OP

template <unsigned M, bool A>
TP_HD constexpr axis_probe<M, A> operator-(axis_probe<M, A>) {
  return {};
}

/// min / max usable in index maps (they keep the dependence analysis exact; the result is
/// not affine).
template <class A, class B>
TP_HD constexpr auto min(A a, B b) {
  if constexpr (probe_pair<A, B>) {
    return axis_probe<probe_mask_v<A> | probe_mask_v<B>, false>{};
  } else {
    return a < b ? a : b;
  }
}
template <class A, class B>
TP_HD constexpr auto max(A a, B b) {
  if constexpr (probe_pair<A, B>) {
    return axis_probe<probe_mask_v<A> | probe_mask_v<B>, false>{};
  } else {
    return a < b ? b : a;
  }
}

/// What an index map returns when it was called with probes: the axes each entry depends
/// on, and whether every entry is affine in them.
template <bool Affine, unsigned... Masks>
struct probed_index {
  static constexpr unsigned mask = (0u | ... | Masks);
  static constexpr int rank = sizeof...(Masks);
  static constexpr bool affine = Affine;
};

/// Builds the result of an index map: tp::idx(m, k).
template <class... Ts>
TP_HD constexpr auto idx(Ts... xs) {
  if constexpr ((... || is_probe_v<Ts>)) {
    return probed_index<(... && probe_affine_v<Ts>), probe_mask_v<Ts>...>{};
  } else {
    static_assert((std::is_integral_v<Ts> && ...), "tilepipe: tp::idx takes integer block indices");
    return index<static_cast<int>(sizeof...(Ts))>{{static_cast<int>(xs)...}};
  }
}

namespace detail {

template <class Map, std::size_t... A>
constexpr auto probe_result(std::index_sequence<A...>)
    -> decltype(std::declval<const Map&>()(axis_probe<(1u << A)>{}...));

template <class R>
struct result_mask {
  static constexpr unsigned value = 0;  // an index<R> built from constants only
  static constexpr bool affine = true;
};
template <bool A, unsigned... M>
struct result_mask<probed_index<A, M...>> {
  static constexpr unsigned value = probed_index<A, M...>::mask;
  static constexpr bool affine = A;
};

template <class R>
struct result_rank {
  static constexpr int value = R::rank;
};

}  // namespace detail

/// Bit a is set when grid axis a flows into the block index the map returns.
template <class Map, int GridRank>
inline constexpr unsigned axes_used_v = detail::result_mask<decltype(detail::probe_result<Map>(
    std::make_index_sequence<GridRank>{}))>::value;

/// Whether the block index the map returns is an affine function of the grid axes.
template <class Map, int GridRank>
inline constexpr bool affine_map_v = detail::result_mask<decltype(detail::probe_result<Map>(
    std::make_index_sequence<GridRank>{}))>::affine;

/// Number of entries the index map returns.
template <class Map, int GridRank>
inline constexpr int index_rank_v = detail::result_rank<decltype(detail::probe_result<Map>(
    std::make_index_sequence<GridRank>{}))>::value;

}  // namespace tilepipe
