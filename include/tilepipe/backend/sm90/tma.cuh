// sm_90 tensor memory accelerator: tiled loads with zero fill, stores with clipping, bulk
// reductions into global memory, bulk async groups (CCCL cuda::ptx). Device pass only (through sm90/primitives.cuh).
#pragma once

#include "../../core/config.cuh"

#include <cuda/ptx>

namespace tilepipe::sm90 {

template <int R>
TP_DEVICE TP_FORCEINLINE void tma_load(void* dst, const void* map, const int (&coords)[R], std::uint64_t* bar) {
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global, dst, map, coords, bar);
}

template <int R>
TP_DEVICE TP_FORCEINLINE void tma_store(const void* map, const int (&coords)[R], const void* src) {
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_global, cuda::ptx::space_shared, map, coords, src);
}

TP_DEVICE TP_FORCEINLINE void bulk_reduce_add(float* dst, const float* src, std::uint32_t bytes) {
  cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared, cuda::ptx::op_add, dst, src, bytes);
}

TP_DEVICE TP_FORCEINLINE void bulk_commit() { cuda::ptx::cp_async_bulk_commit_group(); }

template <int N>
TP_DEVICE TP_FORCEINLINE void bulk_wait() {
  cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<N>{});
}

template <int N>
TP_DEVICE TP_FORCEINLINE void bulk_wait_read() {
  cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<N>{});
}

}  // namespace tilepipe::sm90
