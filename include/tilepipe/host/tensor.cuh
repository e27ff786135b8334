// Tensors in the memory of a device: owning (tensor) or wrapping memory the caller owns
// (tensor_view, e.g. a pointer from another library). Kernels write outputs in place into
// the views they are given: no copies.
#pragma once

#include "../core/dtypes.cuh"
#include "../core/error.cuh"
#include "device.cuh"

#include <array>
#include <cstring>
#include <vector>

namespace tilepipe {

/// A non-owning view: element pointer, extents and strides (in elements).
template <class T, int R>
struct tensor_view {
  T* data = nullptr;
  std::array<long long, R> shape{};
  std::array<long long, R> stride{};
  bool on_gpu = false;

  long long numel() const {
    long long n = 1;
    for (auto s : shape) n *= s;
    return n;
  }

  /// A row-major view of memory the caller owns.
  static tensor_view wrap(T* data, std::array<long long, R> shape, bool on_gpu) {
    tensor_view v{data, shape, {}, on_gpu};
    long long s = 1;
    for (int d = R - 1; d >= 0; --d) v.stride[d] = s, s *= shape[d];
    return v;
  }
};

/// Owns row-major memory on a device (GPU memory, or host memory for the interpreter).
template <class T, int R>
class tensor {
 public:
  tensor() = default;
  tensor(const device& dev, std::array<long long, R> shape) : gpu_(dev.is_gpu()) {
    long long n = 1;
    for (int d = 0; d < R; ++d) {
      TP_REQUIRE(shape[d] >= 0, "tensor dimension %d has negative extent %lld", d, shape[d]);
      n *= shape[d];
    }
    const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(T);
    void* p = nullptr;
    if (gpu_) {
#if TP_HAS_CUDA_COMPILER
      TP_CUDA_CHECK(cudaMalloc(&p, bytes ? bytes : 16));
#endif
    } else {
      p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
    }
    view_ = tensor_view<T, R>::wrap(static_cast<T*>(p), shape, gpu_);
  }
  ~tensor() { release(); }
  tensor(tensor&& o) noexcept : gpu_(o.gpu_), view_(o.view_) { o.view_.data = nullptr; }
  tensor& operator=(tensor&& o) noexcept {
    if (this != &o) {
      release();
      gpu_ = o.gpu_;
      view_ = o.view_;
      o.view_.data = nullptr;
    }
    return *this;
  }
  tensor(const tensor&) = delete;
  tensor& operator=(const tensor&) = delete;

  /// A tensor filled from host data (row-major).
  static tensor from_host(const device& dev, std::array<long long, R> shape, const std::vector<T>& host) {
    tensor t(dev, shape);
    t.copy_from_host(host);
    return t;
  }

  const tensor_view<T, R>& view() const { return view_; }
  operator const tensor_view<T, R>&() const { return view_; }  // NOLINT: tensors bind to kernel params
  long long shape(int d) const { return view_.shape[d]; }
  long long numel() const { return view_.numel(); }
  std::size_t bytes() const { return static_cast<std::size_t>(numel()) * sizeof(T); }
  T* data() const { return view_.data; }

  void copy_from_host(const std::vector<T>& host) {
    TP_REQUIRE(static_cast<long long>(host.size()) == numel(), "copy_from_host: %zu values for a tensor of %lld",
               host.size(), numel());
    copy(view_.data, host.data(), bytes(), true);
  }
  std::vector<T> to_host() const {
    std::vector<T> h(static_cast<std::size_t>(numel()));
    copy(h.data(), view_.data, bytes(), false);
    return h;
  }
  /// Fills every byte with 0xFF: NaN in every float format, so unwritten outputs show.
  void poison() {
    if (gpu_) {
#if TP_HAS_CUDA_COMPILER
      TP_CUDA_CHECK(cudaMemset(view_.data, 0xFF, bytes()));
#endif
    } else {
      std::memset(view_.data, 0xFF, bytes());
    }
  }

 private:
  void copy(void* dst, const void* src, std::size_t n, [[maybe_unused]] bool to_device) const {
    if (gpu_) {
#if TP_HAS_CUDA_COMPILER
      TP_CUDA_CHECK(cudaMemcpy(dst, src, n, to_device ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost));
#endif
    } else if (n) {
      std::memcpy(dst, src, n);
    }
  }
  void release() {
    if (!view_.data) return;
    if (gpu_) {
#if TP_HAS_CUDA_COMPILER
      cudaFree(view_.data);
#endif
    } else {
      std::free(view_.data);
    }
    view_.data = nullptr;
  }

  bool gpu_ = false;
  tensor_view<T, R> view_{};
};

}  // namespace tilepipe
