// sm_90 clocks and where a thread runs, for the profiler: the SM's cycle counter, the
// GPU-wide nanosecond timer, and the SM's id. Device pass only (through sm90/primitives.cuh).
#pragma once

#include "../../core/config.cuh"

#include <cuda/ptx>

#include <cstdint>

namespace tilepipe::sm90 {

/// The SM's 64-bit cycle counter (%clock64); volatile, so it stays where it is written.
TP_DEVICE TP_FORCEINLINE std::uint64_t clock64() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(t)::"memory");
  return t;
}

/// The GPU-wide timer in nanoseconds (%globaltimer): the same clock on every SM.
TP_DEVICE TP_FORCEINLINE std::uint64_t globaltimer() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)::"memory");
  return t;
}

/// The SM this thread runs on (%smid).
TP_DEVICE TP_FORCEINLINE int smid() { return static_cast<int>(cuda::ptx::get_sreg_smid()); }

}  // namespace tilepipe::sm90
