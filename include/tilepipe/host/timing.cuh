// Timing kernels: CUDA events on the GPU (after warm-up, median of the runs), a wall
// clock in the interpreter.
#pragma once

#include "device.cuh"

#include <algorithm>
#include <chrono>
#include <vector>

namespace tilepipe {

struct timing {
  double median_ms = 0;
  double min_ms = 0;
};

/// Runs fn() `warmup` times, then times `runs` runs one by one; returns median and min.
template <class F>
timing time_runs(const device& dev, F&& fn, int warmup = 3, int runs = 20) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> ms;
#if TP_HAS_CUDA_COMPILER
  cudaEvent_t start = nullptr, stop = nullptr;
  if (dev.is_gpu()) {
    TP_CUDA_CHECK(cudaDeviceSynchronize());
    TP_CUDA_CHECK(cudaEventCreate(&start));
    TP_CUDA_CHECK(cudaEventCreate(&stop));
  }
#endif
  for (int i = 0; i < runs; ++i) {
    if (dev.is_gpu()) {
#if TP_HAS_CUDA_COMPILER
      TP_CUDA_CHECK(cudaEventRecord(start));
      fn();
      TP_CUDA_CHECK(cudaEventRecord(stop));
      TP_CUDA_CHECK(cudaEventSynchronize(stop));
      float t = 0;
      TP_CUDA_CHECK(cudaEventElapsedTime(&t, start, stop));
      ms.push_back(t);
#endif
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      fn();
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
#if TP_HAS_CUDA_COMPILER
  if (dev.is_gpu()) {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
#endif
  std::sort(ms.begin(), ms.end());
  return {ms.empty() ? 0 : ms[ms.size() / 2], ms.empty() ? 0 : ms.front()};
}

}  // namespace tilepipe
