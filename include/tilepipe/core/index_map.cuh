// Index maps and their compile-time analysis.
//
// An index map is a generic callable from grid indices to block indices:
//     [=](auto i, auto k) { return tp::idx(m, k); }
// At run time it is called with ints. At compile time it is called (in an unevaluated
// context) with axis probes, types whose arithmetic records which grid axes flow into the
// result: the C++ counterpart of the jaxpr DCE Pallas runs on its index maps. The result
// type tells which axes a spec depends on; a spec that depends on none is index-invariant
// and needs one SMEM slot. The pipelines use this only to size buffers; whether a block
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

/// A grid axis seen by the analysis: Mask has bit a set when axis a flows into the value.
template <unsigned Mask>
struct axis_probe {
  static constexpr unsigned mask = Mask;
};

template <class T>
inline constexpr unsigned probe_mask_v = 0;
template <unsigned M>
inline constexpr unsigned probe_mask_v<axis_probe<M>> = M;

template <class T>
concept probe_operand = std::is_integral_v<T> || (probe_mask_v<T> != 0) ||
                        std::is_same_v<T, axis_probe<0>>;

template <class A, class B>
concept probe_pair = probe_operand<A> && probe_operand<B> && (probe_mask_v<A> | probe_mask_v<B>) != 0;

#define TP_PROBE_BINARY_OP(op)                                                   \
  template <class A, class B>                                                    \
    requires probe_pair<A, B>                                                    \
  TP_HD constexpr axis_probe<probe_mask_v<A> | probe_mask_v<B>> operator op(A, B) { \
    return {};                                                                   \
  }
TP_PROBE_BINARY_OP(+)
TP_PROBE_BINARY_OP(-)
TP_PROBE_BINARY_OP(*)
TP_PROBE_BINARY_OP(/)
TP_PROBE_BINARY_OP(%)
#undef TP_PROBE_BINARY_OP

template <unsigned M>
TP_HD constexpr axis_probe<M> operator-(axis_probe<M>) {
  return {};
}

/// min / max usable in index maps (they keep the dependence analysis exact).
template <class A, class B>
TP_HD constexpr auto min(A a, B b) {
  if constexpr (probe_pair<A, B>) {
    return axis_probe<probe_mask_v<A> | probe_mask_v<B>>{};
  } else {
    return a < b ? a : b;
  }
}
template <class A, class B>
TP_HD constexpr auto max(A a, B b) {
  if constexpr (probe_pair<A, B>) {
    return axis_probe<probe_mask_v<A> | probe_mask_v<B>>{};
  } else {
    return a < b ? b : a;
  }
}

/// What an index map returns when it was called with probes.
template <unsigned... Masks>
struct probed_index {
  static constexpr unsigned mask = (0u | ... | Masks);
  static constexpr int rank = sizeof...(Masks);
};

/// Builds the result of an index map: tp::idx(m, k).
template <class... Ts>
TP_HD constexpr auto idx(Ts... xs) {
  if constexpr ((... || (probe_mask_v<Ts> != 0))) {
    return probed_index<probe_mask_v<Ts>...>{};
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
};
template <unsigned... M>
struct result_mask<probed_index<M...>> {
  static constexpr unsigned value = probed_index<M...>::mask;
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

/// Number of entries the index map returns.
template <class Map, int GridRank>
inline constexpr int index_rank_v = detail::result_rank<decltype(detail::probe_result<Map>(
    std::make_index_sequence<GridRank>{}))>::value;

}  // namespace tilepipe
