// Where kernels run: the GPU (sm_90) or the CPU interpreter. `automatic` picks the GPU
// when this translation unit was built by nvcc and an sm_90 GPU is present.
#pragma once

#include "../backend/interpret/cta.hpp"
#include "../core/error.cuh"

#include <cstdlib>
#include <string>

#if TP_HAS_CUDA_COMPILER
#include <cuda_runtime.h>
#endif

namespace tilepipe {

enum class backend { gpu, interpret, automatic };

#if TP_HAS_CUDA_COMPILER
/// Throws tilepipe::error naming the failed CUDA call.
#define TP_CUDA_CHECK(call)                                                                          \
  do {                                                                                               \
    const cudaError_t tp_err_ = (call);                                                              \
    if (tp_err_ != cudaSuccess)                                                                      \
      ::tilepipe::detail::throw_formatted("%s failed: %s (%s:%d)", #call, cudaGetErrorString(tp_err_), \
                                          __FILE__, __LINE__);                                       \
  } while (0)
#endif

class device {
 public:
  /// Opens a backend. TILEPIPE_BACKEND=interpret|gpu in the environment overrides automatic.
  static device open(backend b = backend::automatic) {
    if (b == backend::automatic) {
      const char* env = std::getenv("TILEPIPE_BACKEND");
      if (env && std::string(env) == "interpret") b = backend::interpret;
      else if (env && std::string(env) == "gpu") b = backend::gpu;
      else b = gpu_available() ? backend::gpu : backend::interpret;
    }
    device d;
    d.gpu_ = b == backend::gpu;
    if (d.gpu_) d.init_gpu();
    return d;
  }

  bool is_gpu() const { return gpu_; }
  /// "NVIDIA H100 80GB HBM3 (GPU)" or "CPU interpreter".
  std::string name() const { return gpu_ ? name_ + " (GPU, " + std::to_string(sms_) + " SMs)" : "CPU interpreter"; }
  int multiprocessors() const { return sms_; }

  /// Options for launches on the interpreter (copy modes, CTA order).
  interpret::options interpreter;

  /// True when this translation unit can launch on a GPU and an sm_90 device is present.
  static bool gpu_available() {
#if TP_HAS_CUDA_COMPILER
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      (void)cudaGetLastError();
      return false;
    }
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return false;
    return p.major == 9;
#else
    return false;
#endif
  }

 private:
  void init_gpu() {
#if TP_HAS_CUDA_COMPILER
    if (!gpu_available()) throw error("tilepipe: backend::gpu requested but no sm_90 GPU is available");
    cudaDeviceProp p{};
    TP_CUDA_CHECK(cudaGetDeviceProperties(&p, 0));
    name_ = p.name;
    sms_ = p.multiProcessorCount;
#else
    throw error("tilepipe: backend::gpu requested in a translation unit not compiled by nvcc");
#endif
  }

  bool gpu_ = false;
  std::string name_;
  int sms_ = 0;
};

}  // namespace tilepipe
