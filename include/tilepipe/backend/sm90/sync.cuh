// sm_90 synchronisation: mbarriers, named barriers, proxy fences (CCCL cuda::ptx) and flags
// between CTAs (cuda::atomic_ref). Device pass only (through sm90/primitives.cuh).
#pragma once

#include "../../core/config.cuh"

#include <cuda/atomic>
#include <cuda/ptx>

namespace tilepipe::sm90 {

namespace ptx = cuda::ptx;

TP_DEVICE TP_FORCEINLINE std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

TP_DEVICE TP_FORCEINLINE void mbarrier_init(std::uint64_t* bar, std::uint32_t count) { ptx::mbarrier_init(bar, count); }

/// Makes barrier initialisation visible to the async proxy (TMA) and to other threads.
TP_DEVICE TP_FORCEINLINE void fence_barrier_init() { ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster); }

// CCCL 13.0's cuda::ptx has no mbarrier.inval.
TP_DEVICE TP_FORCEINLINE void mbarrier_inval(std::uint64_t* bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(smem_address(bar)) : "memory");
}

TP_DEVICE TP_FORCEINLINE void mbarrier_arrive(std::uint64_t* bar, std::uint32_t count) {
  ptx::mbarrier_arrive(ptx::sem_release, ptx::scope_cta, ptx::space_shared, bar, count);
}

TP_DEVICE TP_FORCEINLINE void mbarrier_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
  ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, bar, bytes);
}

TP_DEVICE TP_FORCEINLINE bool mbarrier_try_wait(std::uint64_t* bar, std::uint32_t parity) {
  return ptx::mbarrier_try_wait_parity(ptx::sem_acquire, ptx::scope_cta, bar, parity);
}

// The same operations on a barrier given by its shared-window address: a pipeline computes
// the addresses of its barriers once, instead of converting a generic pointer (a read of
// the CTA's cluster id and an add) on every step of its loop.
TP_DEVICE TP_FORCEINLINE bool mbarrier_try_wait(std::uint32_t bar, std::uint32_t parity) {
  std::uint32_t done;
  asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
               : "=r"(done)
               : "r"(bar), "r"(parity)
               : "memory");
  return done != 0;
}

TP_DEVICE TP_FORCEINLINE void mbarrier_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

/// Keeps a value in a register: the compiler cannot recompute what it cannot see.
TP_DEVICE TP_FORCEINLINE std::uint32_t opaque(std::uint32_t x) {
  asm volatile("" : "+r"(x));
  return x;
}

/// bar.sync on a named barrier shared by `threads` threads (a multiple of 32).
TP_DEVICE TP_FORCEINLINE void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/// bar.arrive: counts the calling threads on a named barrier without waiting for it.
TP_DEVICE TP_FORCEINLINE void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

/// A flag in global memory that CTAs of one grid exchange (stream-K partial sums).
using gpu_flag = cuda::atomic_ref<unsigned, cuda::thread_scope_device>;

/// Sets a global flag to 1 with release semantics at GPU scope.
TP_DEVICE TP_FORCEINLINE void flag_release(unsigned* flag) { gpu_flag(*flag).store(1u, cuda::std::memory_order_release); }

/// Spins until a global flag is 1 (acquire at GPU scope), then clears it.
TP_DEVICE TP_FORCEINLINE void flag_acquire_reset(unsigned* flag) {
  gpu_flag f(*flag);
  while (f.load(cuda::std::memory_order_acquire) == 0) {
  }
  f.store(0u, cuda::std::memory_order_relaxed);
}

/// Adds one to a global counter (acquire-release at GPU scope); the `total`-th arrival
/// clears it and returns true.
TP_DEVICE TP_FORCEINLINE bool counter_arrive_last(unsigned* counter, unsigned total) {
  gpu_flag c(*counter);
  const bool last = c.fetch_add(1u, cuda::std::memory_order_acq_rel) + 1u == total;
  if (last) c.store(0u, cuda::std::memory_order_relaxed);
  return last;
}

/// bar.red.or on a named barrier: synchronises `threads` threads and ORs their predicates.
TP_DEVICE TP_FORCEINLINE bool named_barrier_sync_or(int id, int threads, bool value) {
  std::uint32_t any;
  asm volatile("{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.or.pred q, %2, %3, p;\nselp.u32 %0, 1, 0, q;\n}"
               : "=r"(any)
               : "r"(static_cast<std::uint32_t>(value)), "r"(id), "r"(threads)
               : "memory");
  return any != 0;
}

/// Orders this thread's generic-proxy SMEM writes before later async-proxy (TMA) reads.
TP_DEVICE TP_FORCEINLINE void fence_proxy_async_smem() { ptx::fence_proxy_async(ptx::space_shared); }

TP_DEVICE TP_FORCEINLINE std::uint32_t dynamic_smem_size() {
  std::uint32_t r;
  asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
  return r;
}

}  // namespace tilepipe::sm90
