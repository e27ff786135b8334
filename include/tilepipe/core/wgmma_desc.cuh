// The wgmma shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"):
//   bits  0-13  start address >> 4
//   bits 16-29  leading dimension byte offset (LBO) >> 4
//   bits 32-45  stride dimension byte offset (SBO) >> 4
//   bits 62-63  swizzle: 0 none, 1 = 128 B, 2 = 64 B, 3 = 32 B
// and the canonical layouts it describes, for an operand with MN rows and K columns:
//   K-major,  swizzle S:  byte(mn, k) = start + (mn % 8) * S + (mn / 8) * SBO + k * e
//   MN-major, swizzle S:  byte(mn, k) = start + (mn % P) * e + (mn / P) * LBO
//                                            + (k % 8) * S + (k / 8) * SBO,  P = S / e
// each then swizzled on the absolute address. The GPU backend builds descriptors with
// make_wgmma_desc; the interpreter decodes the same descriptors with wgmma_operand_byte,
// so a wrong descriptor gives wrong results in CI, not only on the GPU.
#pragma once

#include "config.cuh"

namespace tilepipe {

TP_HD constexpr int swizzle_mode_bits(int swizzle_bytes) {
  return swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : swizzle_bytes == 32 ? 3 : 0;
}

TP_HD constexpr int swizzle_bytes_of_mode(int mode) { return mode == 1 ? 128 : mode == 2 ? 64 : mode == 3 ? 32 : 0; }

TP_HD constexpr std::uint64_t make_wgmma_desc(std::uint32_t smem_addr, std::uint32_t lbo, std::uint32_t sbo,
                                              int swizzle_bytes) {
  return static_cast<std::uint64_t>((smem_addr & 0x3FFFF) >> 4) |
         (static_cast<std::uint64_t>((lbo >> 4) & 0x3FFF) << 16) |
         (static_cast<std::uint64_t>((sbo >> 4) & 0x3FFF) << 32) |
         (static_cast<std::uint64_t>(swizzle_mode_bits(swizzle_bytes)) << 62);
}

/// Applies a TMA / wgmma swizzle to an absolute shared-memory byte address.
TP_HD constexpr std::uint32_t swizzle_address(std::uint32_t addr, int swizzle_bytes) {
  return swizzle_bytes ? addr ^ (((addr >> 7) & static_cast<std::uint32_t>(swizzle_bytes / 16 - 1)) << 4) : addr;
}

/// Address of element (mn, k) of a wgmma operand described by desc (swizzled layouts).
TP_HD constexpr std::uint32_t wgmma_operand_byte(std::uint64_t desc, bool mn_major, int elem_bytes, int mn, int k) {
  const std::uint32_t start = static_cast<std::uint32_t>(desc & 0x3FFF) << 4;
  const std::uint32_t lbo = static_cast<std::uint32_t>((desc >> 16) & 0x3FFF) << 4;
  const std::uint32_t sbo = static_cast<std::uint32_t>((desc >> 32) & 0x3FFF) << 4;
  const int s = swizzle_bytes_of_mode(static_cast<int>(desc >> 62));
  std::uint32_t a;
  if (!mn_major) {
    a = start + (mn % 8) * s + (mn / 8) * sbo + k * elem_bytes;
  } else {
    const int p = s / elem_bytes;
    a = start + (mn % p) * elem_bytes + (mn / p) * lbo + (k % 8) * s + (k / 8) * sbo;
  }
  return swizzle_address(a, s);
}

}  // namespace tilepipe
