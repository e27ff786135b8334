// sm_90 conversions of fp8 (e4m3) values to the 16-bit types wgmma multiplies: an fp8 KV
// cache dequantised in SMEM for bf16 / f16 wgmmas (ops/dequantize.cuh). One instruction
// each; sm_90 converts e4m3 pairs to f16 only, so bf16 goes through f32 (all exact: every
// e4m3 value is an f16, f32 and bf16 value).
#pragma once

#include "../../core/config.cuh"

#include <cstdint>

namespace tilepipe::sm90 {

/// Two e4m3 values (the low byte first) as f16x2 (the first in the low half), exactly; the
/// NaN codes 0x7f / 0xff give f16's canonical NaN.
TP_DEVICE TP_FORCEINLINE std::uint32_t cvt_f16x2_e4m3x2(std::uint16_t two) {
  std::uint32_t r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(two));
  return r;
}

/// An f16 (its bits) as f32, exactly.
TP_DEVICE TP_FORCEINLINE float cvt_f32_f16(std::uint16_t h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

/// Two f32 as bf16x2 rounded to nearest even, lo in the low half (exact for f16 values).
TP_DEVICE TP_FORCEINLINE std::uint32_t cvt_bf16x2_f32(float lo, float hi) {
  std::uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

}  // namespace tilepipe::sm90
