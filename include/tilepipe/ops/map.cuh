// Elementwise work on SMEM blocks (or row slices of them): out = f(in...), spread over the
// warpgroup's threads with 16-byte accesses. Blocks of one layout and element type share
// their byte order, so the same byte offset holds the same logical element in each, and a
// slice of whole rows is one byte range per panel (swizzling permutes within 8-row atoms).
#pragma once

#include "../backend/primitives.cuh"
#include "../core/refs.cuh"
#include "smem_access.cuh"

#include <utility>

namespace tilepipe {

namespace detail {
struct alignas(16) chunk16 {
  unsigned char b[16];
};

template <class T, int Vec, class F, std::size_t... I>
TP_HD TP_FORCEINLINE chunk16 map_chunk(F& f, const chunk16 (&in)[sizeof...(I) > 0 ? sizeof...(I) : 1],
                                       std::index_sequence<I...>) {
  T vals[sizeof...(I) > 0 ? sizeof...(I) : 1][Vec];
  ((memcpy(vals[I], in[I].b, 16)), ...);
  T res[Vec];
#pragma unroll
  for (int e = 0; e < Vec; ++e) res[e] = from_float<T>(f(to_float(vals[I][e])...));
  chunk16 out;
  memcpy(out.b, res, 16);
  return out;
}
}  // namespace detail

/// out(i, j) = f(in(i, j)...) for every element, computed in float.
template <class F, class Out, class... In>
  requires is_smem_ref_v<Out>
TP_HD TP_FORCEINLINE void map(F&& f, const Out& out, const In&... in) {
  static_assert((is_smem_ref_v<In> && ...), "tilepipe: map(f, out, in...) takes SMEM views");
  using T = typename Out::value_type;
  static_assert(((std::is_same_v<typename In::layout, typename Out::layout> &&
                  std::is_same_v<typename In::value_type, T>) && ...),
                "tilepipe: map needs views of one tile layout and element type");
  static_assert(!Out::transposed && (!In::transposed && ...), "tilepipe: map takes untransposed views");
  using L = typename Out::layout;
  static_assert(L::swizzle == 0 || Out::stored_rows % 8 == 0, "tilepipe: map over a swizzled row slice needs whole 8-row atoms");
  constexpr int vec = 16 / static_cast<int>(sizeof(T));
  constexpr int per_panel = Out::stored_rows * L::row_bytes / 16;  // 16-byte chunks of the slice in one panel
  constexpr int chunks = per_panel * L::panels;
  static_assert(((In::stored_rows == Out::stored_rows) && ...), "tilepipe: map needs views of the same number of rows");
  const int row_chunk0 = out.row0 * L::row_bytes / 16;
  const int in_row_chunk0[sizeof...(In) > 0 ? sizeof...(In) : 1] = {in.row0 * L::row_bytes / 16 ...};
  (detail::note_view(in, false, "tp::map input"), ...);
  detail::note_view(out, true, "tp::map output");
  auto* o = reinterpret_cast<detail::chunk16*>(out.base);
  const detail::chunk16* srcs[sizeof...(In) > 0 ? sizeof...(In) : 1] = {reinterpret_cast<const detail::chunk16*>(in.base)...};
#if TP_DEVICE_PASS
  const int first = static_cast<int>(threadIdx.x % warpgroup_size), step = warpgroup_size;
#else
  const int first = 0, step = 1;
#endif
#pragma unroll 4
  for (int i = first; i < chunks; i += step) {
    const int in_panel = (i / per_panel) * (L::panel_bytes / 16) + i % per_panel;
    detail::chunk16 vals[sizeof...(In) > 0 ? sizeof...(In) : 1];
    for (std::size_t k = 0; k < sizeof...(In); ++k) vals[k] = srcs[k][in_panel + in_row_chunk0[k]];
    o[in_panel + row_chunk0] = detail::map_chunk<T, vec>(f, vals, std::index_sequence_for<In...>{});
  }
}

}  // namespace tilepipe
