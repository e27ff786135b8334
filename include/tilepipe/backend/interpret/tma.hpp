// TMA emulated from the tensor-map description: a box of the global tensor is copied to
// or from shared memory with the swizzle applied to shared addresses, out-of-bounds
// elements of a load read as zero (or NaN: oob_fill) and out-of-bounds elements of a store are dropped, as
// the hardware drops them: in whole 16-byte chunks of the innermost dimension, so a store
// whose box crosses an innermost extent that is not a multiple of 16 bytes also writes
// the elements up to the next 16-byte boundary (the H100 does; ops/copy.cuh never lets
// the library issue such a store).
#pragma once

#include "../../core/tma_desc.cuh"
#include "../../core/wgmma_desc.cuh"

#include <cstring>

namespace tilepipe::interpret {

/// The innermost coordinate up to which a TMA store writes: the extent rounded up to
/// whole 16-byte chunks.
inline long long store_extent(const tma_desc& d) {
  return (d.dims[0] * d.elem_bytes + 15) / 16 * 16 / d.elem_bytes;
}

/// Visits every element of the box at coords: f(in_bounds, global_byte_offset, smem_linear_byte).
/// `inner_extent` bounds the innermost dimension (the tensor's, or store_extent).
template <class F>
void for_each_box_element(const tma_desc& d, const int* coords, long long inner_extent, F&& f) {
  long long count = 1;
  for (int i = 0; i < d.rank; ++i) count *= d.box[i];
  for (long long lin = 0; lin < count; ++lin) {
    long long rest = lin, goff = 0;
    bool in = true;
    for (int i = 0; i < d.rank; ++i) {
      const long long c = coords[i] + rest % d.box[i];
      rest /= d.box[i];
      in = in && c >= 0 && c < (i == 0 ? inner_extent : d.dims[i]);
      goff += c * d.stride_bytes[i];
    }
    f(in, goff, lin * d.elem_bytes);
  }
}

/// Shared address of byte `linear` of a box written at `smem_base_offset` (swizzled).
inline std::uint32_t box_smem_address(const tma_desc& d, std::uint32_t smem_base_offset, long long linear) {
  return swizzle_address(smem_base_offset + static_cast<std::uint32_t>(linear), d.swizzle);
}

/// Writes the value a load gives an element outside the tensor: zero, or TMA's NaN fill
/// (core/tma_desc.cuh) with oob_fill<oob::nan>.
inline void fill_out_of_bounds(const tma_desc& d, unsigned char* dst) {
  if (!d.oob_nan) std::memset(dst, 0, d.elem_bytes);
  else write_tma_nan_fill(dst, d.elem_bytes);
}

/// The GPU faults (illegal instruction) on a box whose innermost start is not at a 16-byte
/// boundary of the row; the interpreter reports it instead.
inline void check_box_start(const tma_desc& d, const int* coords, const char* what) {
  if (static_cast<long long>(coords[0]) * d.elem_bytes % 16 != 0)
    detail::throw_formatted("%s of a box at innermost coordinate %d: %lld bytes into a row, not a multiple of 16 (the "
                            "GPU's TMA unit faults with an illegal instruction)",
                            what, coords[0], static_cast<long long>(coords[0]) * d.elem_bytes);
}

inline void tma_load_now(const tma_desc& d, const int* coords, unsigned char* smem, std::uint32_t dst_off) {
  const auto* g = static_cast<const unsigned char*>(d.global);
  for_each_box_element(d, coords, d.dims[0], [&](bool in, long long goff, long long lin) {
    unsigned char* dst = smem + box_smem_address(d, dst_off, lin);
    if (in) std::memcpy(dst, g + goff, d.elem_bytes);
    else fill_out_of_bounds(d, dst);
  });
}

inline void tma_store_now(const tma_desc& d, const int* coords, const unsigned char* smem, std::uint32_t src_off) {
  auto* g = static_cast<unsigned char*>(const_cast<void*>(d.global));
  for_each_box_element(d, coords, store_extent(d), [&](bool in, long long goff, long long lin) {
    if (in) std::memcpy(g + goff, smem + box_smem_address(d, src_off, lin), d.elem_bytes);
  });
}

inline long long box_bytes(const tma_desc& d) {
  long long n = d.elem_bytes;
  for (int i = 0; i < d.rank; ++i) n *= d.box[i];
  return n;
}

}  // namespace tilepipe::interpret
