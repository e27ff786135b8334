// stmatrix: a warp writes four 8 x 8 matrices of 16-bit elements to shared memory in one
// instruction, each thread supplying one register per matrix in the accumulator layout
// (row lane / 4, columns 2 (lane % 4) and + 1) and one row address.
#pragma once

#include "../../core/config.cuh"

#include <cstdint>

namespace tilepipe::sm90 {

/// Lane l gives the shared address of row l % 8 of matrix l / 8; r[m] holds this lane's
/// pair of matrix m.
TP_DEVICE TP_FORCEINLINE void stmatrix_x4(std::uint32_t row_address, std::uint32_t r0, std::uint32_t r1, std::uint32_t r2,
                                          std::uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row_address), "r"(r0), "r"(r1),
               "r"(r2), "r"(r3)
               : "memory");
}

}  // namespace tilepipe::sm90
