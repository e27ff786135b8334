// sm_90 warpgroup MMA control and register reallocation: the instructions CCCL has no
// wrapper for, each a single documented inline-asm statement.
#pragma once

#include "../../core/config.cuh"
#include "wgmma_instructions.cuh"

namespace tilepipe::sm90 {

/// Orders register accesses to accumulators before the wgmmas that follow.
TP_DEVICE TP_FORCEINLINE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
TP_DEVICE TP_FORCEINLINE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
TP_DEVICE TP_FORCEINLINE void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/// Keeps the compiler from moving accesses of an accumulator register across a wgmma wait.
TP_DEVICE TP_FORCEINLINE void fence_register(float& r) { asm volatile("" : "+f"(r)::"memory"); }
TP_DEVICE TP_FORCEINLINE void fence_register(std::uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }
/// A 16-bit value (an element of a bf16 / f16 fragment, e.g. wgmma's register A operand).
template <class T>
  requires(sizeof(T) == 2)
TP_DEVICE TP_FORCEINLINE void fence_register(T& r) {
  unsigned short u;
  memcpy(&u, &r, 2);
  asm volatile("" : "+h"(u)::"memory");
  memcpy(&r, &u, 2);
}

template <int Regs>
TP_DEVICE TP_FORCEINLINE void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(Regs));
}
template <int Regs>
TP_DEVICE TP_FORCEINLINE void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(Regs));
}

}  // namespace tilepipe::sm90
