// The k-step the warp-specialised matmul kernels' pipelines run (CUTLASS's mainloop): the
// body of one step over K, for one compute warpgroup.
#pragma once

#include "../ops/fragment.cuh"
#include "../ops/wgmma.cuh"

namespace tilepipe {

/// Compute warpgroup ci adds its WM rows of the A block times the B block to its
/// accumulator; a K-major B block (stored N x K) is read transposed. One wgmma group stays
/// in flight: the pipeline's specs release their blocks a step late (delay_release<1>).
template <int WM, int BN, bool KMajorB>
struct matmul_k_step {
  accumulator<WM, BN>& acc;
  int ci;

  template <class At, class A, class B>
  TP_HD void operator()(At, A a_smem, B b_smem) const {
    if constexpr (KMajorB) wgmma(acc, rows<WM>(a_smem, ci * WM), transpose(b_smem));
    else wgmma(acc, rows<WM>(a_smem, ci * WM), b_smem);
    wgmma_wait<1>();
  }
};

}  // namespace tilepipe
