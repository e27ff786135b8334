// sm_90 thread-block clusters: the CTA's rank, the cluster barrier, arrivals on a peer
// CTA's mbarrier and TMA loads multicast into every CTA of the cluster. Device pass
// only (through sm90/primitives.cuh).
#pragma once

#include "../../core/config.cuh"
#include "sync.cuh"

#include <cuda/ptx>

namespace tilepipe::sm90 {

TP_DEVICE TP_FORCEINLINE int cluster_rank() { return static_cast<int>(cuda::ptx::get_sreg_cluster_ctarank()); }
TP_DEVICE TP_FORCEINLINE int cluster_size() { return static_cast<int>(cuda::ptx::get_sreg_cluster_nctarank()); }

/// All threads of all CTAs of the cluster: earlier writes (SMEM, barrier inits) are
/// visible cluster-wide afterwards.
TP_DEVICE TP_FORCEINLINE void cluster_sync() {
  cuda::ptx::barrier_cluster_arrive(cuda::ptx::sem_release);
  cuda::ptx::barrier_cluster_wait();
}

/// One arrival on the mbarrier at the same SMEM offset as `bar` (a shared-window address)
/// in the CTA of rank `rank`.
/// Release at CTA scope, as CUTLASS's cluster barriers do: a cluster-scope release would
/// also wait for this thread's wgmma groups still in flight, and so drain the tensor-core
/// pipeline at every release (measured: half the throughput).
TP_DEVICE TP_FORCEINLINE void mbarrier_arrive_remote(std::uint32_t bar, int rank) {
  std::uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

/// A TMA load written at the same SMEM offset in every CTA of `cta_mask`, completing its
/// bytes on the barrier at `bar`'s offset in each of them.
template <int R>
TP_DEVICE TP_FORCEINLINE void tma_load_multicast(void* dst, const void* map, const int (&coords)[R], std::uint64_t* bar,
                                                 std::uint16_t cta_mask) {
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, map, coords, bar, cta_mask);
}

}  // namespace tilepipe::sm90
