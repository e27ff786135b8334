// Elementwise work on SMEM views: out(i, j) = f(in(i, j)...), spread over the warpgroup's
// threads with 16-byte accesses.
//
// Two paths. Views of one layout, element type and row count that span whole rows share
// their byte order (the swizzle permutes 16-byte chunks inside each row, by the row's
// position in its 8-row atom), so when their first rows are congruent mod 8 the same byte
// offset holds the same element in each and the walk is over byte offsets alone. Any
// other combination — different element types (bf16 in, f32 out), layouts or swizzles,
// column slices, a one-row input broadcast along the rows — goes element group by element
// group: a group is one 16-byte chunk of the narrowest type, and each view reads or writes
// it as whole chunks of its own type at its own layout's offsets.
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

/// Whether every view has the output's layout, type and rows and spans whole rows.
template <class Out, class... In>
inline constexpr bool same_byte_order_v =
    Out::full_width && ((std::is_same_v<typename In::layout, typename Out::layout> &&
                         std::is_same_v<typename In::value_type, typename Out::value_type> &&
                         In::stored_rows == Out::stored_rows && In::full_width) &&
                        ...);

/// Reads Group elements of row r from column c on as floats, in 16-byte chunks.
template <int Group, class Ref>
TP_HD TP_FORCEINLINE void read_group(const Ref& v, int r, int c, float (&out)[Group]) {
  using T = typename Ref::value_type;
  constexpr int per_chunk = 16 / static_cast<int>(sizeof(T));
#pragma unroll
  for (int k = 0; k < Group / per_chunk; ++k) {
    const chunk16 ch = *reinterpret_cast<const chunk16*>(v.ptr(r, c + k * per_chunk));
    T vals[per_chunk];
    memcpy(vals, ch.b, 16);
#pragma unroll
    for (int e = 0; e < per_chunk; ++e) out[k * per_chunk + e] = to_float(vals[e]);
  }
}

/// Writes Group floats to row r from column c on, converted to the view's type.
template <int Group, class Ref>
TP_HD TP_FORCEINLINE void write_group(const Ref& v, int r, int c, const float (&in)[Group]) {
  using T = typename Ref::value_type;
  constexpr int per_chunk = 16 / static_cast<int>(sizeof(T));
#pragma unroll
  for (int k = 0; k < Group / per_chunk; ++k) {
    T vals[per_chunk];
#pragma unroll
    for (int e = 0; e < per_chunk; ++e) vals[e] = from_float<T>(in[k * per_chunk + e]);
    chunk16 ch;
    memcpy(ch.b, vals, 16);
    *reinterpret_cast<chunk16*>(v.ptr(r, c + k * per_chunk)) = ch;
  }
}

template <class... T>
TP_HD constexpr int narrowest_bytes() {
  int e = 16;
  ((e = static_cast<int>(sizeof(T)) < e ? static_cast<int>(sizeof(T)) : e), ...);
  return e;
}

template <class F, class Out, class... In, std::size_t... I>
TP_HD TP_FORCEINLINE void map_groups(F& f, const Out& out, std::index_sequence<I...>, const In&... in) {
  // Columns per group: one 16-byte chunk of the narrowest type. Every view's rows span whole
  // 16-byte chunks of its own type, so the row width is a multiple of it.
  constexpr int group = 16 / narrowest_bytes<typename Out::value_type, typename In::value_type...>();
  constexpr int per_row = Out::cols / group;
  const int first = prim::thread_in_warpgroup(), step = prim::warpgroup_threads();
#pragma unroll 2
  for (int i = first; i < Out::rows * per_row; i += step) {
    const int r = i / per_row, c = (i % per_row) * group;
    float vals[sizeof...(In) > 0 ? sizeof...(In) : 1][group];
    (read_group<group>(in, In::rows == 1 ? 0 : r, c, vals[I]), ...);
    float res[group];
#pragma unroll
    for (int e = 0; e < group; ++e) res[e] = f(vals[I][e]...);
    write_group<group>(out, r, c, res);
  }
}
}  // namespace detail

/// out(i, j) = f(in(i, j)...) for every element, computed in float. The views may differ in
/// element type, layout and swizzle; an input of one row is broadcast along the output's rows.
template <class F, class Out, class... In>
  requires is_smem_ref_v<Out>
TP_HD TP_FORCEINLINE void map(F&& f, const Out& out, const In&... in) {
  static_assert((is_smem_ref_v<In> && ...), "tilepipe: map(f, out, in...) takes SMEM views");
  static_assert(!Out::transposed && (!In::transposed && ...), "tilepipe: map takes untransposed views");
  static_assert(((In::cols == Out::cols) && ...), "tilepipe: map: every input has the output's number of columns");
  static_assert(((In::rows == Out::rows || In::rows == 1) && ...),
                "tilepipe: map: every input has the output's number of rows, or one row (broadcast along the rows)");
  (detail::note_view(in, false, "tp::map input"), ...);
  detail::note_view(out, true, "tp::map output");
  if constexpr (detail::same_byte_order_v<Out, In...>) {
    using T = typename Out::value_type;
    using L = typename Out::layout;
    if (L::swizzle == 0 || (((in.row0 - out.row0) % 8 == 0) && ...)) {
      constexpr int vec = 16 / static_cast<int>(sizeof(T));
      constexpr int per_panel = Out::stored_rows * L::row_bytes / 16;  // 16-byte chunks of the slice in one panel
      constexpr int chunks = per_panel * L::panels;
      const int row_chunk0 = out.row0 * L::row_bytes / 16;
      const int in_row_chunk0[sizeof...(In) > 0 ? sizeof...(In) : 1] = {in.row0 * L::row_bytes / 16 ...};
      auto* o = reinterpret_cast<detail::chunk16*>(out.base);
      const detail::chunk16* srcs[sizeof...(In) > 0 ? sizeof...(In) : 1] = {reinterpret_cast<const detail::chunk16*>(in.base)...};
      const int first = prim::thread_in_warpgroup(), step = prim::warpgroup_threads();
#pragma unroll 4
      for (int i = first; i < chunks; i += step) {
        const int in_panel = (i / per_panel) * (L::panel_bytes / 16) + i % per_panel;
        detail::chunk16 vals[sizeof...(In) > 0 ? sizeof...(In) : 1];
        for (int k = 0; k < static_cast<int>(sizeof...(In)); ++k) vals[k] = srcs[k][in_panel + in_row_chunk0[k]];
        o[in_panel + row_chunk0] = detail::map_chunk<T, vec>(f, vals, std::index_sequence_for<In...>{});
      }
      return;
    }
  }
  detail::map_groups(f, out, std::index_sequence_for<In...>{}, in...);
}

}  // namespace tilepipe
