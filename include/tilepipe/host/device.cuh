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

/// What the host knows of this process's GPU launches, for error messages: the last launch
/// (an asynchronous failure surfaces at a later, unrelated call), and each device's failure
/// channel, made when the device is opened.
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

/// Makes GPU `ordinal` the current device for a scope and restores the previous one after:
/// a launch goes to the context of the current device, and the caller's (a framework's)
/// current device must not change under it.
class device_scope {
 public:
  explicit device_scope(int ordinal) {
    TP_CUDA_CHECK(cudaGetDevice(&previous_));
    if (ordinal != previous_) TP_CUDA_CHECK(cudaSetDevice(ordinal));
    changed_ = ordinal != previous_;
  }
  ~device_scope() {
    if (changed_) (void)cudaSetDevice(previous_);
  }
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

/// While it lives, this thread may make calls a CUDA-graph capture in the global mode forbids
/// (allocations, module loading), as PyTorch's caching allocator does for its cudaMalloc: for
/// the one-time set-up a first launch inside a capture needs. Nothing it does is captured.
class relaxed_capture_mode {
 public:
  relaxed_capture_mode() { TP_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&previous_)); }
  ~relaxed_capture_mode() { (void)cudaThreadExchangeStreamCaptureMode(&previous_); }
  relaxed_capture_mode(const relaxed_capture_mode&) = delete;
  relaxed_capture_mode& operator=(const relaxed_capture_mode&) = delete;

 private:
  cudaStreamCaptureMode previous_ = cudaStreamCaptureModeRelaxed;
};

/// The failure channel of GPU `ordinal`: a record in mapped host memory (readable after
/// the trap that follows a failure) and a claim word in device memory, made once per GPU,
/// when `device::open` opens it. A launch inside a CUDA-graph capture may still be the first
/// to need one (a device opened while another stream captured): cudaHostAlloc and cudaMalloc
/// are then made in the relaxed capture mode (as PyTorch's caching allocator does) and the
/// claim word is cleared on a stream of its own, never through the legacy stream, which a
/// capture forbids.
inline failure_channel failure_channel_of(int ordinal) {
  auto& d = diary();
  const std::lock_guard<std::mutex> guard(d.lock);
  if (d.channels.size() <= static_cast<std::size_t>(ordinal)) d.channels.resize(ordinal + 1), d.records.resize(ordinal + 1);
  failure_channel& c = d.channels[ordinal];
  if (!c.record) {
    const device_scope on(ordinal);
    const relaxed_capture_mode relaxed;
    void* host = nullptr;
    TP_CUDA_CHECK(cudaHostAlloc(&host, sizeof(device_failure), cudaHostAllocMapped));
    std::memset(host, 0, sizeof(device_failure));
    void* mapped = nullptr;
    TP_CUDA_CHECK(cudaHostGetDevicePointer(&mapped, host, 0));
    unsigned* claim = nullptr;
    TP_CUDA_CHECK(cudaMalloc(&claim, sizeof(unsigned)));
    cudaStream_t own = nullptr;
    TP_CUDA_CHECK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
    TP_CUDA_CHECK(cudaMemsetAsync(claim, 0, sizeof(unsigned), own));
    TP_CUDA_CHECK(cudaStreamSynchronize(own));
    TP_CUDA_CHECK(cudaStreamDestroy(own));
    c.claim = claim;
    c.record = static_cast<device_failure*>(mapped);
    d.records[ordinal] = static_cast<device_failure*>(host);
  }
  return c;
}
}  // namespace detail
#endif

class device {
 public:
  /// Opens a backend. TILEPIPE_BACKEND=interpret|gpu in the environment overrides automatic.
  /// The GPU is `ordinal`, or the current CUDA device when it is -1 (a process per GPU sets
  /// its device first); launches on the device go to that GPU whatever is current then.
  static device open(backend b = backend::automatic, int ordinal = -1) {
    if (b == backend::automatic) {
      const char* env = std::getenv("TILEPIPE_BACKEND");
      if (env && std::string(env) == "interpret") b = backend::interpret;
      else if (env && std::string(env) == "gpu") b = backend::gpu;
      else b = gpu_available(ordinal) ? backend::gpu : backend::interpret;
    }
    device d;
    d.gpu_ = b == backend::gpu;
    if (d.gpu_) d.init_gpu(ordinal);
    return d;
  }
  /// GPU `ordinal` (what a framework's tensor on cuda:ordinal needs).
  static device open_gpu(int ordinal) { return open(backend::gpu, ordinal); }

  bool is_gpu() const { return gpu_; }
  /// The CUDA device ordinal of a GPU device (0 for the interpreter).
  int ordinal() const { return ordinal_; }
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

  /// True when this translation unit can launch on a GPU and GPU `ordinal` (-1: the
  /// current device) is an sm_90 device.
  static bool gpu_available(int ordinal = -1) {
#if TP_HAS_CUDA_COMPILER
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
      (void)cudaGetLastError();
      return false;
    }
    if (ordinal < 0 && cudaGetDevice(&ordinal) != cudaSuccess) return false;
    if (ordinal >= n) return false;
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, ordinal) != cudaSuccess) return false;
    return p.major == 9;
#else
    (void)ordinal;
    return false;
#endif
  }

 private:
  void init_gpu([[maybe_unused]] int ordinal) {
#if TP_HAS_CUDA_COMPILER
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) (void)cudaGetLastError(), n = 0;
    if (ordinal < 0) TP_CUDA_CHECK(cudaGetDevice(&ordinal));
    if (ordinal >= n)
      detail::throw_formatted("backend::gpu requested for GPU %d, but the process sees %d GPU(s)", ordinal, n);
    if (!gpu_available(ordinal))
      detail::throw_formatted("backend::gpu requested, but GPU %d is not an sm_90 (Hopper) device", ordinal);
    cudaDeviceProp p{};
    TP_CUDA_CHECK(cudaGetDeviceProperties(&p, ordinal));
    name_ = p.name;
    sms_ = p.multiProcessorCount;
    ordinal_ = ordinal;
    (void)detail::failure_channel_of(ordinal);  // now, outside any graph capture
#else
    throw error("tilepipe: backend::gpu requested in a translation unit not compiled by nvcc");
#endif
  }

  bool gpu_ = false;
  std::string name_;
  int sms_ = 0;
  int ordinal_ = 0;
  int index_ = 0, count_ = 1;
  std::shared_ptr<interpret::simulated_devices> simulated_;
};

}  // namespace tilepipe
