// Where kernels run: the GPU (sm_90) or the CPU interpreter. `automatic` picks the GPU
// when this translation unit was built by nvcc and an sm_90 GPU is present.
#pragma once

#include "../backend/interpret/devices.hpp"
#include "../core/error.cuh"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#if TP_HAS_CUDA_COMPILER
#include <cuda_runtime.h>
#endif

namespace tilepipe {

enum class backend { gpu, interpret, automatic };

#if TP_HAS_CUDA_COMPILER
namespace detail {

/// What the host knows of this process's GPU launches, for error messages: the last launch
/// (an asynchronous failure surfaces at a later, unrelated call), and each device's failure
/// channel, made at its first launch.
/// What the host remembers of a GPU launch (formatted only when an error names it).
struct launch_record {
  const std::string* kernel = nullptr;
  int grid[3] = {};
  int cluster = 1, warpgroups = 1;
  std::size_t smem = 0;

  /// "kernel K (grid (2, 1, 1), 3 warpgroups, 232448 bytes of dynamic shared memory)".
  std::string describe() const {
    std::string s = "kernel " + *kernel + " (grid (" + std::to_string(grid[0]) + ", " + std::to_string(grid[1]) + ", " +
                    std::to_string(grid[2]) + ")";
    if (cluster > 1) s += ", clusters of " + std::to_string(cluster);
    return s + ", " + std::to_string(warpgroups) + " warpgroups, " + std::to_string(smem) +
           " bytes of dynamic shared memory)";
  }
};

struct launch_diary {
  std::mutex lock;
  launch_record last;                    // the last launch (kernel null before the first)
  std::vector<failure_channel> channels;  // per device ordinal, as kernels use them
  std::vector<device_failure*> records;   // the same records, as the host reads them

  void note(const launch_record& r) {
    const std::lock_guard<std::mutex> guard(lock);
    last = r;
  }
};

inline launch_diary& diary() {
  static launch_diary d;
  return d;
}

/// The message a device-side check of any launch recorded ("" if none did).
inline std::string recorded_failure() {
  for (const device_failure* r : diary().records)
    if (r && r->format[0]) return describe(*r);
  return "";
}

/// Throws tilepipe::error for a failed CUDA call; an error a kernel left behind names that
/// kernel and what its failed check recorded.
[[noreturn]] inline void cuda_failed(const char* call, cudaError_t e, const char* file, int line) {
  std::string s = std::string(call) + " failed: " + cudaGetErrorString(e) + " (" + file + ":" + std::to_string(line) + ")";
  const std::string failure = recorded_failure();
  if (!failure.empty()) s += "\n  a kernel's device-side check failed: " + failure;
  if (diary().last.kernel) s += "\n  the last kernel launched: " + diary().last.describe();
  throw error("tilepipe: " + s);
}

}  // namespace detail

/// Throws tilepipe::error naming the failed CUDA call (and the last kernel launched).
#define TP_CUDA_CHECK(call)                                                                            \
  do {                                                                                                 \
    const cudaError_t tp_err_ = (call);                                                                \
    if (tp_err_ != cudaSuccess) ::tilepipe::detail::cuda_failed(#call, tp_err_, __FILE__, __LINE__); \
  } while (0)

namespace detail {
/// The failure channel of the current GPU, made on first use: a record in mapped host
/// memory (readable after the trap that follows a failure) and a claim word in device memory.
inline failure_channel current_failure_channel() {
  int dev = 0;
  TP_CUDA_CHECK(cudaGetDevice(&dev));
  auto& d = diary();
  const std::lock_guard<std::mutex> guard(d.lock);
  if (d.channels.size() <= static_cast<std::size_t>(dev)) d.channels.resize(dev + 1), d.records.resize(dev + 1);
  failure_channel& c = d.channels[dev];
  if (!c.record) {
    void* host = nullptr;
    TP_CUDA_CHECK(cudaHostAlloc(&host, sizeof(device_failure), cudaHostAllocMapped));
    std::memset(host, 0, sizeof(device_failure));
    void* mapped = nullptr;
    TP_CUDA_CHECK(cudaHostGetDevicePointer(&mapped, host, 0));
    TP_CUDA_CHECK(cudaMalloc(&c.claim, sizeof(unsigned)));
    TP_CUDA_CHECK(cudaMemset(c.claim, 0, sizeof(unsigned)));
    c.record = static_cast<device_failure*>(mapped);
    d.records[dev] = static_cast<device_failure*>(host);
  }
  return c;
}
}  // namespace detail
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

  /// The device axis of collective launches (tp::device_group): this device's index among
  /// the group's devices and their number; 0 and 1 outside a group.
  int index() const { return index_; }
  int count() const { return count_; }
  /// The simulated devices of an interpreted group, which run its devices' launches together.
  const std::shared_ptr<interpret::simulated_devices>& simulated_group() const { return simulated_; }

  /// Device `index` of `count` in a group; `simulated` for the interpreter's groups.
  device in_group(int index, int count, std::shared_ptr<interpret::simulated_devices> simulated) const {
    device d = *this;
    d.index_ = index, d.count_ = count, d.simulated_ = std::move(simulated);
    return d;
  }

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
  int index_ = 0, count_ = 1;
  std::shared_ptr<interpret::simulated_devices> simulated_;
};

}  // namespace tilepipe
