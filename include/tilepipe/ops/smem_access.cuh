// Tells the interpreter's race detector which shared memory a library op reads or writes
// with ordinary (generic-proxy) loads and stores. A view covers rows [row0, row0 + rows)
// of every column panel of its tile: one byte range per panel. Compiles to nothing on the
// GPU (the note_* primitives are empty there).
#pragma once

#include "../backend/primitives.cuh"
#include "../core/refs.cuh"

namespace tilepipe::detail {

template <class Ref>
TP_HD TP_FORCEINLINE void note_view(const Ref& r, bool write, const char* what) {
  using L = typename Ref::layout;
  const auto* base = reinterpret_cast<const unsigned char*>(r.base);
  for (int p = 0; p < L::panels; ++p) {
    const unsigned char* start = base + p * L::panel_bytes + r.row0 * L::row_bytes;
    const std::size_t bytes = static_cast<std::size_t>(Ref::stored_rows) * L::row_bytes;
    if (write) prim::note_smem_write(start, bytes, what);
    else prim::note_smem_read(start, bytes, what);
  }
}

}  // namespace tilepipe::detail
