// Elementwise work on whole SMEM blocks: out = f(in...), spread over the warpgroup's
// threads with 16-byte accesses. Blocks of one layout and element type share their byte
// order, so the same byte offset holds the same logical element in each of them.
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
TP_HD TP_FORCEINLINE void map(F&& f, const Out& out, const In&... in) {
  static_assert(is_smem_ref_v<Out> && (is_smem_ref_v<In> && ...), "tilepipe: map(f, out, in...) takes SMEM views");
  using T = typename Out::value_type;
  static_assert(((std::is_same_v<typename In::layout, typename Out::layout> &&
                  std::is_same_v<typename In::value_type, T>) && ...),
                "tilepipe: map needs views of one tile layout and element type");
  static_assert(Out::stored_rows == Out::layout::rows, "tilepipe: map works on whole blocks");
  constexpr int vec = 16 / static_cast<int>(sizeof(T));
  constexpr int chunks = Out::layout::bytes / 16;
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
  for (int ch = first; ch < chunks; ch += step) {
    detail::chunk16 vals[sizeof...(In) > 0 ? sizeof...(In) : 1];
    for (std::size_t i = 0; i < sizeof...(In); ++i) vals[i] = srcs[i][ch];
    o[ch] = detail::map_chunk<T, vec>(f, vals, std::index_sequence_for<In...>{});
  }
}

}  // namespace tilepipe
