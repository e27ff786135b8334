// fp8 (e4m3) K and V for the attention tests: codes with one scale for the whole tensor or
// one per KV head, as inference engines store a KV cache (scale = amax / 448; or powers of
// two, whose dequantised values bf16 holds exactly), and the values they stand for.
#pragma once

#include "test_util.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace test {

/// The scales of fp8 K and V: one each, or one per KV head (attention_options::kv_scale_per_head).
struct fp8_scales {
  std::vector<float> k, v;
  bool per_head = false;
};

/// One tensor's codes, scales and the values they stand for, x = code * scale[head], for
/// elements [..., Hkv, D] (element i is in head (i / d) % hkv).
struct fp8_tensor {
  std::vector<tp::fp8_e4m3> codes;
  std::vector<float> scale;   // 1 or hkv
  std::vector<float> values;  // dequantised, as float (exact: code * scale rounds once)

  /// Random values in [-amax_h, amax_h] per head, amax_h far apart from head to head (10^-3
  /// to 30) or one for all (per_head false), quantised with scale = amax / 448 (or the
  /// smallest power of two at least that and at least min_scale, with power_of_two).
  fp8_tensor(std::size_t n, int hkv, int d, bool per_head, bool power_of_two, std::uint64_t seed,
             double min_scale = 0.0) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> magnitude(-3.0, 1.5), unit(-1.0, 1.0);
    scale.resize(per_head ? hkv : 1);
    std::vector<double> amax(scale.size());
    for (std::size_t h = 0; h < scale.size(); ++h) {
      amax[h] = std::pow(10.0, magnitude(rng));
      const double s = amax[h] / 448.0;
      scale[h] = static_cast<float>(power_of_two ? std::max(min_scale, std::exp2(std::ceil(std::log2(s)))) : s);
    }
    codes.resize(n);
    values.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t h = per_head ? (i / d) % hkv : 0;
      codes[i] = tp::from_float<tp::fp8_e4m3>(static_cast<float>(unit(rng) * amax[h] / scale[h]));
      values[i] = tp::to_float(codes[i]) * scale[h];
    }
  }
};

/// Values of any element type as float (exact), for the float64 reference.
template <class T>
std::vector<float> as_floats(const std::vector<T>& x) {
  std::vector<float> f(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) f[i] = tp::to_float(x[i]);
  return f;
}

}  // namespace test
