// Shared by the tests: the device a test binary runs on (the GPU in the nvcc-built gpu_*
// binaries, the interpreter in the interp_* ones), random inputs and error norms.
#pragma once

#include <tilepipe/tilepipe.cuh>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace tp = tilepipe;

namespace test {

/// The backend this binary tests: the GPU when compiled by nvcc, else the interpreter.
inline const tp::device& dev() {
  static const tp::device d = tp::device::open(TP_HAS_CUDA_COMPILER ? tp::backend::gpu : tp::backend::interpret);
  return d;
}

inline bool on_gpu() { return dev().is_gpu(); }

inline std::uint64_t fresh_seed() { return std::random_device{}(); }

template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed = fresh_seed(), float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = tp::from_float<T>(d(rng));
  return v;
}

/// ||out - ref|| / ||ref||; NaN when any output is NaN (unwritten, poisoned).
template <class T>
double rel_error(const std::vector<T>& out, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double o = tp::to_float(out[i]);
    if (std::isnan(o)) return NAN;
    num += (o - ref[i]) * (o - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

/// The error of a row softmax y of x (both rows x cols inside rows of `stride` elements)
/// against a float64 softmax of x.
template <class T>
double softmax_error(const std::vector<T>& x, const std::vector<T>& y, long long rows, long long cols,
                     long long stride) {
  std::vector<T> out;
  std::vector<double> ref;
  for (long long r = 0; r < rows; ++r) {
    const T* xr = &x[r * stride];
    double m = -INFINITY, l = 0;
    for (long long c = 0; c < cols; ++c) m = std::max<double>(m, tp::to_float(xr[c]));
    for (long long c = 0; c < cols; ++c) l += std::exp(tp::to_float(xr[c]) - m);
    for (long long c = 0; c < cols; ++c) {
      out.push_back(y[r * stride + c]);
      ref.push_back(std::exp(tp::to_float(xr[c]) - m) / l);
    }
  }
  return rel_error(out, ref);
}

/// Runs f and returns the text of the tilepipe::error it throws ("" if none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const tp::error& e) {
    return e.what();
  }
  return "";
}

}  // namespace test
