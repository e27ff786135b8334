// GPU debug mode for hangs (compile with -DTILEPIPE_DEBUG_HANGS, CMake option
// TILEPIPE_DEBUG_HANGS): every mbarrier wait gives up after about a second (clock64
// cycles, TILEPIPE_HANG_CYCLES), prints which CTA, warpgroup, barrier and parity it was
// waiting for, and traps, so a protocol bug (wrong expect_tx bytes, wrong phase, a skipped
// arrive) ends the kernel with a message instead of hanging the GPU.
//
// Debug builds only: printf is a function call, and a call anywhere in a kernel makes
// ptxas serialise every wgmma. Without the macro this file is empty and the wait in
// primitives.cuh is the plain try_wait loop.
#pragma once

#include "../../core/config.cuh"

#if defined(TILEPIPE_DEBUG_HANGS)
#include "sync.cuh"

#include <cstdio>

/// Cycles a barrier wait may take before it counts as hung (about 1 s at 1.7-2 GHz).
#ifndef TILEPIPE_HANG_CYCLES
#define TILEPIPE_HANG_CYCLES 2000000000ll
#endif

namespace tilepipe::sm90 {

// Kept out of line so that the wait loop itself stays small.
__noinline__ __device__ inline void report_hang(std::uint64_t* bar, std::uint32_t parity, int slot, long long step) {
  printf("tilepipe: mbarrier wait timed out after %lld cycles (TILEPIPE_DEBUG_HANGS): block (%d, %d, %d), "
         "warpgroup %d, mbarrier at shared address 0x%x, waiting for phase parity %u, slot %d, pipeline step %lld "
         "(-1: not known). Likely causes: expect_tx bytes that differ from the bytes the TMA loads deliver, a wait "
         "for the wrong phase, an arrive that was skipped\n",
         static_cast<long long>(TILEPIPE_HANG_CYCLES), static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
         static_cast<int>(blockIdx.z), static_cast<int>(threadIdx.x / warpgroup_size), smem_address(bar), parity, slot,
         step);
}

TP_DEVICE TP_FORCEINLINE void mbarrier_wait_bounded(std::uint64_t* bar, std::uint32_t parity, int slot, long long step) {
  if (mbarrier_try_wait(bar, parity)) return;
  // The warpgroup's first thread reports; the others give it time to print before any
  // thread traps (a trap ends the whole grid).
  const bool reporter = threadIdx.x % warpgroup_size == 0;
  const long long limit = reporter ? TILEPIPE_HANG_CYCLES : 2 * TILEPIPE_HANG_CYCLES;
  const long long start = clock64();
  while (!mbarrier_try_wait(bar, parity)) {
    if (clock64() - start > limit) {
      if (reporter) report_hang(bar, parity, slot, step);
      __trap();
    }
  }
}

/// The wait for another CTA's flag (stream-K partial sums), bounded the same way.
TP_DEVICE TP_FORCEINLINE void flag_acquire_reset_bounded(unsigned* flag) {
  const long long start = clock64();
  gpu_flag f(*flag);
  while (f.load(cuda::std::memory_order_acquire) == 0) {
    if (clock64() - start > TILEPIPE_HANG_CYCLES) {
      printf("tilepipe: wait for a flag at %p set by another CTA timed out (TILEPIPE_DEBUG_HANGS): block (%d, %d, %d), "
             "warpgroup %d. Likely causes: the CTA that sets it is not resident, or never publishes\n",
             static_cast<void*>(flag), static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
             static_cast<int>(blockIdx.z), static_cast<int>(threadIdx.x / warpgroup_size));
      __trap();
    }
  }
  f.store(0u, cuda::std::memory_order_relaxed);
}

}  // namespace tilepipe::sm90
#endif
