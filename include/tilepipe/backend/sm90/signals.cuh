// sm_90 semaphores between GPUs: a counter in a symmetric buffer (NCCL window) that a peer
// adds to with release semantics at system scope and its owner polls with acquire loads.
// Device pass only (through sm90/primitives.cuh).
//
// Plain system-scope atomics (cuda::atomic_ref), not NCCL's lsa barriers: those are
// all-to-all barriers whose session synchronises the whole coop (a CTA coop is
// __syncthreads, which a warp-specialised CTA cannot call from one role), while a ring needs
// one-way counts between neighbours. The words live in the same window, so NCCL maps them
// on every peer as it maps the data. NCCL's own lsa barriers are made of the same
// instructions (system-scope atomic_ref stores and acquire loads).
#pragma once

#include "../../core/config.cuh"

#include <cuda/atomic>
#include <cuda/ptx>

namespace tilepipe::sm90 {

using system_word = cuda::atomic_ref<unsigned, cuda::thread_scope_system>;

/// The TMA stores this thread waited for (cp.async.bulk.wait_group 0) wrote through the
/// async proxy: the proxy fence orders them before the generic release that follows.
TP_DEVICE TP_FORCEINLINE void signal_add(unsigned* sem, unsigned inc) {
  cuda::ptx::fence_proxy_async(cuda::ptx::space_global);
  system_word(*sem).fetch_add(inc, cuda::std::memory_order_release);
}

/// The proxy fence after the acquire orders it before the TMA loads that read what it
/// guards (they read through the async proxy).
TP_DEVICE TP_FORCEINLINE void signal_wait(const unsigned* sem, unsigned value) {
  system_word word(*const_cast<unsigned*>(sem));
  while (static_cast<int>(word.load(cuda::std::memory_order_acquire) - value) < 0) {
  }
  cuda::ptx::fence_proxy_async(cuda::ptx::space_global);
}

}  // namespace tilepipe::sm90
