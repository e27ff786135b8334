// Tells the interpreter's race detector which shared memory a library op reads or writes
// with ordinary (generic-proxy) loads and stores. A full-width view covers rows
// [row0, row0 + rows) of every column panel of its tile: one byte range per panel. A column
// slice covers, in each of those rows, only its own 16-byte chunks, which the swizzle may
// scatter across the row: one range per chunk, so that warpgroups writing different column
// slices of the same rows are not reported. Compiles to nothing on the GPU (the note_*
// primitives are empty there).
#pragma once

#include "../backend/primitives.cuh"
#include "../core/refs.cuh"

namespace tilepipe::detail {

template <class Ref>
TP_HD TP_FORCEINLINE void note_view(const Ref& r, bool write, const char* what) {
  using L = typename Ref::layout;
  const auto* base = reinterpret_cast<const unsigned char*>(r.base);
  auto note = [&](const unsigned char* start, std::size_t bytes) {
    if (write) prim::note_smem_write(start, bytes, what);
    else prim::note_smem_read(start, bytes, what);
  };
  if constexpr (Ref::full_width) {
    for (int p = 0; p < L::panels; ++p)
      note(base + p * L::panel_bytes + r.row0 * L::row_bytes, static_cast<std::size_t>(Ref::stored_rows) * L::row_bytes);
  } else {
    constexpr int chunk = 16 / static_cast<int>(sizeof(typename Ref::value_type));
    for (int row = 0; row < Ref::stored_rows; ++row)
      for (int c = 0; c < Ref::stored_cols; c += chunk) note(base + L::offset(r.row0 + row, r.col0 + c), 16);
  }
}

}  // namespace tilepipe::detail
