// fp8 quantisation of activations (kernels/quantize.cuh) against a float64 reference on fresh
// random inputs: bf16, f16 and f32 inputs; 1 x 128 column groups and one scale per row; rows
// and columns that are not multiples of the blocks (K a multiple of 16 only), more column
// blocks than one CTA takes, rows of very different magnitudes, a row and a group of zeros.
// q lives inside a wider buffer whose padding must stay untouched, and q and the scales start
// as NaN, so that an element the kernel forgets, or writes outside the view, shows.
#include "test_util.hpp"

#include <tilepipe/kernels/quantize.cuh>

#include <cstring>

namespace {

/// The spacing of e4m3 values around |y| (3 mantissa bits; subnormals below 2^-6).
double e4m3_spacing(double y) {
  const int e = std::max(-6, static_cast<int>(std::floor(std::log2(std::max(std::fabs(y), 1e-30)))));
  return std::ldexp(1.0, e - 3);
}

template <class T>
void check(long long m, long long k, int group) {
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0), magnitude(-3.0, 3.0);
  std::vector<T> hx(static_cast<std::size_t>(m * k));
  for (long long r = 0; r < m; ++r) {
    const double row_scale = std::pow(10.0, magnitude(rng));
    for (long long c = 0; c < k; ++c) {
      const bool zero = (m > 2 && r == m / 2) || (r == 0 && c >= 128 && c < 256);  // a row and a group of zeros
      hx[r * k + c] = tp::from_float<T>(zero ? 0.0f : static_cast<float>(unit(rng) * row_scale));
    }
  }
  const long long groups = group == 0 ? 1 : (k + 127) / 128, q_stride = k + 16;
  const auto& dev = test::dev();
  auto x = tp::tensor<T, 2>::from_host(dev, {m, k}, hx);
  std::vector<tp::fp8_e4m3> nan_q(static_cast<std::size_t>(m * q_stride));
  std::memset(nan_q.data(), 0x7f, nan_q.size());  // e4m3 NaN, padding included
  auto q_buffer = tp::tensor<tp::fp8_e4m3, 2>::from_host(dev, {m, q_stride}, nan_q);
  auto q = tp::tensor_view<tp::fp8_e4m3, 2>::wrap(q_buffer.data(), {m, k}, dev.is_gpu());
  q.stride = {q_stride, 1};
  auto scales = tp::tensor<float, 2>::from_host(dev, {m, groups}, std::vector<float>(m * groups, NAN));
  tp::quantize_fp8<T>(dev, x, q, scales, {.group = group});
  const auto hq = q_buffer.to_host();
  const auto hs = scales.to_host();

  const std::string what = std::string(tp::dtype_traits<T>::name) + " " + std::to_string(m) + " x " +
                           std::to_string(k) + ", group " + std::to_string(group) + ", seed " + std::to_string(seed);
  const long long width = group == 0 ? k : 128;
  double num = 0, den = 0;
  for (long long r = 0; r < m; ++r)
    for (long long g = 0; g < groups; ++g) {
      const long long c0 = g * width, c1 = std::min(k, c0 + width);
      double amax = 0;
      for (long long c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(double(tp::to_float(hx[r * k + c]))));
      const double scale = hs[r * groups + g], want = amax / 448.0;
      ASSERT_LE(std::fabs(scale - want), want * 1.2e-7) << "scale of row " << r << " group " << g << ": " << what;
      for (long long c = c0; c < c1; ++c) {
        const double xv = tp::to_float(hx[r * k + c]), qv = tp::to_float(hq[r * q_stride + c]);
        const double y = amax > 0 ? xv / amax * 448.0 : 0.0;
        ASSERT_TRUE(std::fabs(qv) <= 448.0 && std::fabs(qv - y) <= 0.5 * e4m3_spacing(y) * (1 + 1e-5) + 1e-12)
            << "q(" << r << ", " << c << ") = " << qv << " for " << y << ": " << what;
        if (std::fabs(xv) == amax && amax > 0) ASSERT_EQ(std::fabs(qv), 448.0) << "the group's largest: " << what;
        num += (qv * scale - xv) * (qv * scale - xv), den += xv * xv;
      }
    }
  EXPECT_LT(std::sqrt(num / den), 0.04) << "q * scale against x: " << what;
  for (long long r = 0; r < m; ++r)
    for (long long c = k; c < q_stride; ++c)
      ASSERT_EQ(reinterpret_cast<const unsigned char&>(hq[r * q_stride + c]), 0x7f) << "padding written: " << what;
}

}  // namespace

TEST(Quantize, BlocksOf128ColumnsMatchTheReference) {
  for (auto [m, k] : {std::pair{1LL, 16LL}, {65LL, 272LL}, {3LL, 128LL}, {130LL, 1040LL}}) {
    check<tp::bf16>(m, k, 128);
    check<tp::f16>(m, k, 128);
    check<float>(m, k, 128);
  }
}

TEST(Quantize, OneScalePerRowMatchesTheReference) {
  for (auto [m, k] : {std::pair{1LL, 16LL}, {65LL, 272LL}, {70LL, 1040LL}}) {
    check<tp::bf16>(m, k, 0);
    check<float>(m, k, 0);
  }
}

TEST(Quantize, BadArgumentsAreReported) {
  const auto& dev = test::dev();
  tp::tensor<tp::bf16, 2> x(dev, {8, 40});
  tp::tensor<tp::fp8_e4m3, 2> q(dev, {8, 40}), q_short(dev, {8, 32});
  tp::tensor<float, 2> s(dev, {8, 1});
  EXPECT_NE(test::error_of([&] { tp::quantize_fp8<tp::bf16>(dev, x, q, s, {.group = 64}); }).find("group is 128"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { tp::quantize_fp8<tp::bf16>(dev, x, q_short, s); }).find("q is 8 x 32"),
            std::string::npos);
  tp::tensor<float, 2> s2(dev, {8, 2});
  EXPECT_NE(test::error_of([&] { tp::quantize_fp8<tp::bf16>(dev, x, q, s2); }).find("scales must be 8 x 1"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { tp::quantize_fp8<tp::bf16>(dev, x, q, s); }).find("K = 40 is not a multiple of 16"),
            std::string::npos);
}
