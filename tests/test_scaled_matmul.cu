// fp8 matmul with scales (kernels/scaled_matmul.cuh) against float64 references computed
// from the dequantised inputs, on fresh random inputs quantised on the host (and, in one test,
// by tp::quantize_fp8): every scaling mode, bf16 and f32 output, e4m3 and e5m2, M, N and K
// that are not multiples of the tiles (K not a multiple of 128 under block scales), scales
// from 1e-30 to 1e30, bias + activation, the last wave split by stream-K under block scales,
// and the host's errors. The outputs start as NaN, so an element the kernel forgets shows.
// On the GPU only: larger sizes, and the promotion test (a long K of positive values, where
// the tensor core's fp8 accumulator alone loses accuracy: the interpreter adds in f32 and has
// no such loss to show).
#include "test_util.hpp"

#include <tilepipe/kernels/quantize.cuh>
#include <tilepipe/kernels/scaled_matmul.cuh>

#include <string>

namespace {

using tp::fp8_scaling;

/// An fp8 matrix [rows, cols] of quantised random values and its f32 scales as `scaling`
/// lays them out for this operand (is_a: 1 x 128 blocks; else 128 x 128 blocks). The values
/// are uniform in [lo, hi] x 448 before quantisation; scale magnitudes are 10^(e + u) with u
/// uniform in [-1, 1] and e from exponent(kb) (per 128-column block).
template <class T>
struct quantised {
  std::vector<T> q;
  std::vector<float> scales;
  long long scale_rows = 0, scale_cols = 0;
  std::array<long long, 2> scale_shape() const { return {scale_rows, scale_cols}; }
  double scale(long long r, long long c, fp8_scaling scaling, bool is_a) const {
    if (scaling == fp8_scaling::per_tensor) return scales[0];
    if (scaling == fp8_scaling::row_wise) return scales[r];
    return scales[(is_a ? r : r / 128) * scale_cols + c / 128];
  }
};

template <class T, class Exponent>
quantised<T> make_operand(long long rows, long long cols, fp8_scaling scaling, bool is_a, std::mt19937_64& rng,
                          Exponent&& exponent, double lo = -1.0, double hi = 1.0) {
  quantised<T> o;
  std::uniform_real_distribution<double> value(lo, hi), jitter(-1.0, 1.0);
  const double top = std::is_same_v<T, tp::fp8_e4m3> ? 448.0 : 57344.0;
  o.q.resize(static_cast<std::size_t>(rows * cols));
  for (auto& x : o.q) x = tp::from_float<T>(static_cast<float>(value(rng) * top));
  const long long kb = (cols + 127) / 128;
  o.scale_rows = scaling == fp8_scaling::per_tensor ? 1 : scaling == fp8_scaling::row_wise ? rows : is_a ? rows : (rows + 127) / 128;
  o.scale_cols = scaling == fp8_scaling::block ? kb : 1;
  o.scales.resize(static_cast<std::size_t>(o.scale_rows * o.scale_cols));
  for (long long r = 0; r < o.scale_rows; ++r)
    for (long long c = 0; c < o.scale_cols; ++c)
      o.scales[r * o.scale_cols + c] = static_cast<float>(std::pow(10.0, exponent(c) + jitter(rng)));
  return o;
}

/// C = scaled(A B^T) in float64 from the dequantised operands, then bias and ReLU if given.
template <class TA, class TB>
std::vector<double> reference(const quantised<TA>& a, const quantised<TB>& b, long long M, long long N, long long K,
                              fp8_scaling scaling, const std::vector<double>& bias = {}) {
  std::vector<double> da(M * K), db(N * K), ref(M * N, 0.0);
  for (long long i = 0; i < M; ++i)
    for (long long k = 0; k < K; ++k) da[i * K + k] = double(tp::to_float(a.q[i * K + k])) * a.scale(i, k, scaling, true);
  for (long long j = 0; j < N; ++j)
    for (long long k = 0; k < K; ++k) db[j * K + k] = double(tp::to_float(b.q[j * K + k])) * b.scale(j, k, scaling, false);
  for (long long i = 0; i < M; ++i)
    for (long long j = 0; j < N; ++j) {
      double s = 0;
      for (long long k = 0; k < K; ++k) s += da[i * K + k] * db[j * K + k];
      ref[i * N + j] = bias.empty() ? s : std::max(s + bias[j], 0.0);
    }
  return ref;
}

/// A's block scales M-major, as the kernel loads them with TMA (tp::m_major_scales): the
/// storage [ceil(K/128), ld], its padding past M NaN, so that a scale read from the wrong
/// place shows.
template <class T>
tp::tensor<float, 2> m_major_storage(const quantised<T>& a) {
  const long long m = a.scale_rows, kb = a.scale_cols, ld = (m + 3) / 4 * 4 + 4;
  std::vector<float> h(kb * ld, NAN);
  for (long long r = 0; r < m; ++r)
    for (long long c = 0; c < kb; ++c) h[c * ld + r] = a.scales[r * kb + c];
  return tp::tensor<float, 2>::from_host(test::dev(), {kb, ld}, h);
}

/// Runs tp::scaled_matmul on the operands (with m_major_a, A's block scales M-major); returns C.
template <class TC, class TA, class TB>
std::vector<TC> run(const quantised<TA>& a, const quantised<TB>& b, long long M, long long N, long long K,
                    fp8_scaling scaling, const tp::scaled_matmul_options& opt = {}, bool m_major_a = false) {
  const auto& dev = test::dev();
  auto ta = tp::tensor<TA, 2>::from_host(dev, {M, K}, a.q);
  auto tb = tp::tensor<TB, 2>::from_host(dev, {N, K}, b.q);
  auto sa = tp::tensor<float, 2>::from_host(dev, a.scale_shape(), a.scales);
  tp::tensor<float, 2> sa_m_major;
  if (m_major_a) sa_m_major = m_major_storage(a);
  auto sb = tp::tensor<float, 2>::from_host(dev, b.scale_shape(), b.scales);
  auto c = tp::tensor<TC, 2>::from_host(dev, {M, N}, std::vector<TC>(M * N, tp::from_float<TC>(NAN)));
  tp::scaled_matmul<TA, TB, TC>(dev, ta, tb, c, scaling, m_major_a ? tp::m_major_scales(sa_m_major, M) : sa.view(), sb, opt);
  return c.to_host();
}

const char* name_of(fp8_scaling s) {
  return s == fp8_scaling::per_tensor ? "per_tensor" : s == fp8_scaling::row_wise ? "row_wise" : "block";
}

/// Scale exponents for A and B: opposite extremes per block of K (up to 1e+-30 each), whose
/// products stay moderate, as the scales of real data whose magnitudes differ do.
struct extreme_exponents {
  std::vector<double> e;
  explicit extreme_exponents(long long blocks, std::mt19937_64& rng) {
    std::uniform_real_distribution<double> d(-29.0, 29.0);
    for (long long i = 0; i < blocks; ++i) e.push_back(d(rng));
  }
  auto for_a() const {
    return [this](long long kb) { return e[kb]; };
  }
  auto for_b() const {
    return [this](long long kb) { return -e[kb]; };
  }
};

/// Error tolerance: bf16 output rounds to 8 bits; f32 output carries the interpreter's f32
/// sums, or on the GPU the tensor core's fp8 accumulation.
template <class TC>
double tolerance() {
  if constexpr (std::is_same_v<TC, tp::bf16>) return 6e-3;
  else return test::on_gpu() ? 1e-3 : 1e-5;
}

template <class TA, class TB, class TC>
void check(long long M, long long N, long long K, fp8_scaling scaling, bool extreme = false, bool promote = false,
           bool m_major_a = false) {
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const long long blocks = scaling == fp8_scaling::block ? (K + 127) / 128 : 1;
  const extreme_exponents ex(blocks, rng);
  auto mild = [](long long) { return -2.0; };
  const auto a = extreme ? make_operand<TA>(M, K, scaling, true, rng, ex.for_a()) : make_operand<TA>(M, K, scaling, true, rng, mild);
  const auto b = extreme ? make_operand<TB>(N, K, scaling, false, rng, ex.for_b()) : make_operand<TB>(N, K, scaling, false, rng, mild);
  const auto c = run<TC>(a, b, M, N, K, scaling, {.promote = promote}, m_major_a);
  EXPECT_LT(test::rel_error(c, reference(a, b, M, N, K, scaling)), tolerance<TC>())
      << tp::dtype_traits<TA>::name << " x " << tp::dtype_traits<TB>::name << " -> " << tp::dtype_traits<TC>::name << " " << M << "x" << N << "x" << K << " "
      << name_of(scaling) << (extreme ? ", extreme scales" : "") << (promote ? ", promoted" : "")
      << (m_major_a ? ", A's scales M-major" : "") << ", seed " << seed;
}

}  // namespace

TEST(ScaledMatmul, PerTensor) {
  const long long s = test::on_gpu() ? 8 : 1;
  check<tp::fp8_e4m3, tp::fp8_e4m3, tp::bf16>(200 * s, 264 * s, 256, fp8_scaling::per_tensor);
  check<tp::fp8_e4m3, tp::fp8_e4m3, float>(77, 40, 48, fp8_scaling::per_tensor);  // K below one block
  check<tp::fp8_e5m2, tp::fp8_e5m2, tp::bf16>(130, 520, 400, fp8_scaling::per_tensor);
}

TEST(ScaledMatmul, RowWise) {
  const long long s = test::on_gpu() ? 8 : 1;
  check<tp::fp8_e4m3, tp::fp8_e4m3, tp::bf16>(136 * s, 264 * s, 272, fp8_scaling::row_wise);
  check<tp::fp8_e4m3, tp::fp8_e4m3, float>(1, 24, 400, fp8_scaling::row_wise);  // one row
  check<tp::fp8_e5m2, tp::fp8_e5m2, tp::bf16>(65, 296, 128, fp8_scaling::row_wise);  // (bf16 out: one instantiation fewer)
}

// K not a multiple of 128: the last block of K is partial, and TMA zero-fills the rest of it.
TEST(ScaledMatmul, BlockScaled) {
  const long long s = test::on_gpu() ? 8 : 1;
  check<tp::fp8_e4m3, tp::fp8_e4m3, tp::bf16>(200 * s, 136 * s, 400, fp8_scaling::block);
  check<tp::fp8_e4m3, tp::fp8_e4m3, float>(130, 264, 528, fp8_scaling::block);
  check<tp::fp8_e4m3, tp::fp8_e4m3, float>(64, 128, 16, fp8_scaling::block);  // one partial block of K
  check<tp::fp8_e5m2, tp::fp8_e5m2, tp::bf16>(77, 200, 272, fp8_scaling::block);
}

// A's block scales M-major (tp::m_major_scales): the memory warpgroup loads a step's k-blocks
// of the tile's rows with TMA into each stage, the k-step reads them from SMEM. Odd M, N not
// a multiple of the tile (C's rows stay 16-byte aligned for TMA), K not a multiple of 128 (an odd number of k-blocks: the last step's second k-block past K),
// several row tiles and a partial one, scales drawn per row and k-block (a scale read for the
// wrong row, k-block or step shows), the storage's padding NaN.
TEST(ScaledMatmul, BlockScaledMMajorScales) {
  const long long s = test::on_gpu() ? 8 : 1;
  check<tp::fp8_e4m3, tp::fp8_e4m3, tp::bf16>(203 * s, 136 * s, 400, fp8_scaling::block, false, false, true);
  check<tp::fp8_e4m3, tp::fp8_e4m3, float>(131, 264, 528, fp8_scaling::block, false, false, true);
  check<tp::fp8_e4m3, tp::fp8_e4m3, float>(61, 136, 16, fp8_scaling::block, false, false, true);  // one partial k-block
  check<tp::fp8_e5m2, tp::fp8_e4m3, tp::bf16>(77, 200, 656, fp8_scaling::block, false, false, true);
  check<tp::fp8_e4m3, tp::fp8_e4m3, float>(257, 136, 912, fp8_scaling::block, true, false, true);  // extreme scales
  check<tp::fp8_e4m3, tp::fp8_e4m3, tp::bf16>(1, 24, 272, fp8_scaling::block, false, false, true);  // one row
}

// Per-tensor and row-wise scales with the sums promoted every 128 of K (the block-scaled
// kernel's k-step with unit scales, the mode's scales in the epilogue).
TEST(ScaledMatmul, PromotedPerTensorAndRowWise) {
  check<tp::fp8_e4m3, tp::fp8_e4m3, tp::bf16>(200, 264, 400, fp8_scaling::per_tensor, false, true);
  check<tp::fp8_e4m3, tp::fp8_e4m3, float>(130, 136, 272, fp8_scaling::row_wise, true, true);
}

// e5m2 gradients times e4m3 weights (and the other way round), as a backward pass multiplies.
TEST(ScaledMatmul, MixedFp8Types) {
  check<tp::fp8_e5m2, tp::fp8_e4m3, tp::bf16>(130, 264, 272, fp8_scaling::block);
  check<tp::fp8_e4m3, tp::fp8_e5m2, float>(65, 136, 400, fp8_scaling::row_wise);
}

TEST(ScaledMatmul, ExtremeScales) {
  for (auto scaling : {fp8_scaling::per_tensor, fp8_scaling::row_wise, fp8_scaling::block}) {
    check<tp::fp8_e4m3, tp::fp8_e4m3, float>(130, 136, 400, scaling, true);
    check<tp::fp8_e4m3, tp::fp8_e4m3, tp::bf16>(65, 264, 272, scaling, true);
  }
}

TEST(ScaledMatmul, BiasAndRelu) {
  std::mt19937_64 rng(test::fresh_seed());
  const long long M = 130, N = 264, K = 272;
  auto mild = [](long long) { return -2.0; };
  for (auto [scaling, m_major_a] : {std::pair{fp8_scaling::per_tensor, false}, {fp8_scaling::block, false},
                                    {fp8_scaling::block, true}}) {
    const auto a = make_operand<tp::fp8_e4m3>(M, K, scaling, true, rng, mild);
    const auto b = make_operand<tp::fp8_e4m3>(N, K, scaling, false, rng, mild);
    const auto hbias = test::random_values<tp::bf16>(N, rng(), -50.0f, 50.0f);
    auto bias = tp::tensor<tp::bf16, 1>::from_host(test::dev(), {N}, hbias);
    std::vector<double> dbias(N);
    for (long long j = 0; j < N; ++j) dbias[j] = tp::to_float(hbias[j]);
    const auto c = run<tp::bf16>(a, b, M, N, K, scaling, {.bias = bias.data(), .act = tp::activation::relu}, m_major_a);
    EXPECT_LT(test::rel_error(c, reference(a, b, M, N, K, scaling, dbias)), 6e-3)
        << name_of(scaling) << (m_major_a ? ", A's scales M-major" : "");
  }
}

// Activations quantised by tp::quantize_fp8 (1 x 128 groups, its scale = amax / 448), weights
// by 128 x 128 blocks on the host: the product of the dequantised operands. quantize_fp8
// writes A's scales row-major, and M-major (tp::m_major_scales, the layout the kernel loads
// with TMA), which must dequantise to x.
TEST(ScaledMatmul, BlockScaledFromQuantizeFp8) {
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const long long M = test::on_gpu() ? 1000 : 101, N = 264, K = 400, kb = (K + 127) / 128;
  const auto& dev = test::dev();
  const auto hx = test::random_values<tp::bf16>(M * K, rng(), -3.0f, 3.0f);
  auto x = tp::tensor<tp::bf16, 2>::from_host(dev, {M, K}, hx);

  // B: 128 x 128 blocks, each scaled to its largest magnitude.
  std::uniform_real_distribution<double> value(-1.0, 1.0), magnitude(-3.0, 3.0);
  std::vector<double> w(N * K);
  for (auto& v : w) v = value(rng) * std::pow(10.0, magnitude(rng));
  quantised<tp::fp8_e4m3> b;
  b.scale_rows = (N + 127) / 128, b.scale_cols = kb;
  b.scales.assign(b.scale_rows * kb, 0.0f);
  for (long long j = 0; j < N; ++j)
    for (long long k = 0; k < K; ++k) {
      float& s = b.scales[(j / 128) * kb + k / 128];
      s = std::max(s, static_cast<float>(std::fabs(w[j * K + k]) / 448.0));
    }
  for (long long j = 0; j < N; ++j)
    for (long long k = 0; k < K; ++k)
      b.q.push_back(tp::from_float<tp::fp8_e4m3>(static_cast<float>(w[j * K + k] / b.scales[(j / 128) * kb + k / 128])));

  for (bool m_major : {false, true}) {
    tp::tensor<tp::fp8_e4m3, 2> qa(dev, {M, K});
    tp::tensor<float, 2> sa(dev, {M, kb}), storage(dev, {kb, (M + 3) / 4 * 4});
    tp::quantize_fp8<tp::bf16>(dev, x, qa, m_major ? tp::m_major_scales(storage, M) : sa.view());
    quantised<tp::fp8_e4m3> a{qa.to_host(), {}, M, kb};
    if (!m_major) a.scales = sa.to_host();
    const auto hs = storage.to_host();
    for (long long r = 0; m_major && r < M; ++r)
      for (long long g = 0; g < kb; ++g) a.scales.push_back(hs[g * storage.shape(1) + r]);
    double num = 0, den = 0;  // q * scale against x
    for (long long i = 0; i < M; ++i)
      for (long long k = 0; k < K; ++k) {
        const double xv = tp::to_float(hx[i * K + k]), d = tp::to_float(a.q[i * K + k]) * a.scale(i, k, fp8_scaling::block, true) - xv;
        num += d * d, den += xv * xv;
      }
    EXPECT_LT(std::sqrt(num / den), 0.04) << "dequantised A against x" << (m_major ? ", scales M-major" : "");
    const auto c = run<float>(a, b, M, N, K, fp8_scaling::block, {}, m_major);
    EXPECT_LT(test::rel_error(c, reference(a, b, M, N, K, fp8_scaling::block)), tolerance<float>())
        << (m_major ? "A's scales M-major, " : "") << "seed " << seed;
  }
}

// Block scales with the last wave split by stream-K: the pieces of a tile start at other
// k-blocks (their scales' column; with A's scales M-major, the index map of their SMEM
// blocks), and their partial sums, already scaled, add up.
TEST(ScaledMatmul, BlockScaledStreamK) {
  using T = tp::fp8_e4m3;
  using kernel = tp::scaled_matmul_kernel<T, T, float, tp::scale_epilogue<fp8_scaling::block, tp::no_epilogue>>;
  std::mt19937_64 rng(test::fresh_seed());
  const long long M = test::on_gpu() ? 1300 : 299, N = 264, K = 1040;
  auto mild = [](long long) { return -2.0; };
  const auto a = make_operand<T>(M, K, fp8_scaling::block, true, rng, mild);
  const auto b = make_operand<T>(N, K, fp8_scaling::block, false, rng, mild);
  const auto& dev = test::dev();
  auto ta = tp::tensor<T, 2>::from_host(dev, {M, K}, a.q);
  auto tb = tp::tensor<T, 2>::from_host(dev, {N, K}, b.q);
  auto sa = tp::tensor<float, 2>::from_host(dev, a.scale_shape(), a.scales);
  auto sa_m_major = m_major_storage(a);
  auto sb = tp::tensor<float, 2>::from_host(dev, b.scale_shape(), b.scales);
  const int sms = test::on_gpu() ? dev.multiprocessors() : 4;
  tp::partials_buffer partials(dev, kernel::partial_slots(sms), kernel::partial_floats);
  auto split = [&](auto kern) {
    kern.sched.stream_k_min_saving = 0;
    EXPECT_TRUE(kern.sched.plan(sms).streams()) << "the last wave is not split";
    return kern;
  };
  const tp::scale_epilogue<fp8_scaling::block, tp::no_epilogue> epi{
      {sa.data(), a.scale_rows, a.scale_cols, a.scale_cols, 1}, {sb.data(), b.scale_rows, b.scale_cols, b.scale_cols, 1}, {}};
  const auto kern = split(kernel::make(M, N, K, epi, partials.ref()));
  const auto c = tp::kernel(kern, kern.config(sms), tp::out_type<float>(M, N))(dev, ta, tb).to_host();
  EXPECT_LT(test::rel_error(c, reference(a, b, M, N, K, fp8_scaling::block)), tolerance<float>());
  const auto smem_kern = split(tp::with_a_scales<kernel>::make(M, N, K, epi, partials.ref()));
  const auto a_scales = tp::m_major_scales(sa_m_major, M);
  const tp::tensor_view<float, 2> sa_t{a_scales.data, {a_scales.shape[1], M}, {a_scales.stride[1], 1}, a_scales.on_gpu};
  const auto c2 = tp::kernel(smem_kern, smem_kern.config(sms), tp::out_type<float>(M, N))(dev, ta, tb, sa_t).to_host();
  EXPECT_LT(test::rel_error(c2, reference(a, b, M, N, K, fp8_scaling::block)), tolerance<float>()) << "A's scales M-major";
}

// The tensor core adds fp8 products into an accumulator of about 14 significant bits,
// truncating: over a long K of positive products each addition loses about 2^-14 of the
// running sum, a relative error near K / 32 / 2 * 2^-14 (6% at K = 65536) without promotion,
// about 1e-4 with it. Promoted (every 128 of K into f32 registers) the product stays
// accurate; the same data unpromoted shows that the data exposes the loss. Block scales and
// per-tensor scales with `promote` against per-tensor scales without. GPU only: the
// interpreter adds in f32 everywhere.
TEST(ScaledMatmul, PromotionKeepsLongSumsAccurate) {
  if (!test::on_gpu()) GTEST_SKIP() << "the tensor core's fp8 accumulator exists on the GPU only";
  std::mt19937_64 rng(test::fresh_seed());
  const long long M = 128, N = 128, K = 65536;
  auto unit = [](long long) { return 0.0; };  // scales ~1 (10^[-1, 1])
  auto error = [&](fp8_scaling scaling, bool promote) {
    const auto a = make_operand<tp::fp8_e4m3>(M, K, scaling, true, rng, unit, 0.25, 1.0);
    const auto b = make_operand<tp::fp8_e4m3>(N, K, scaling, false, rng, unit, 0.25, 1.0);
    return test::rel_error(run<float>(a, b, M, N, K, scaling, {.promote = promote}), reference(a, b, M, N, K, scaling));
  };
  EXPECT_LT(error(fp8_scaling::block, true), 1e-3) << "block scales (promoted every 128 of K)";
  EXPECT_LT(error(fp8_scaling::per_tensor, true), 1e-3) << "per-tensor scales, promoted";
  EXPECT_GT(error(fp8_scaling::per_tensor, false), 1e-2)
      << "per-tensor scales, not promoted (the tensor core's accumulator over all of K): the data does not expose "
         "the accumulator's loss, so the checks above prove nothing";
}

TEST(ScaledMatmul, HostErrors) {
  const auto& dev = test::dev();
  const long long M = 64, N = 128, K = 256;
  tp::tensor<tp::fp8_e4m3, 2> a(dev, {M, K}), b(dev, {N, K}), b_short(dev, {N, K - 128});
  tp::tensor<tp::fp8_e4m3, 2> a24(dev, {M, 24}), b24(dev, {N, 24});  // rows of 24 bytes: not TMA's 16-byte multiple
  tp::tensor<tp::bf16, 2> c(dev, {M, N}), c_wrong(dev, {M, N + 8});
  tp::tensor<float, 2> one(dev, {1, 1}), rows_a(dev, {M, 1}), rows_b(dev, {N, 1}), blocks_a(dev, {M, 2}), blocks_b(dev, {1, 2});
  auto expect_error = [&](const tp::tensor<tp::fp8_e4m3, 2>& lhs, const tp::tensor<tp::fp8_e4m3, 2>& rhs,
                          const tp::tensor<tp::bf16, 2>& out, fp8_scaling scaling, const tp::tensor<float, 2>& sa,
                          const tp::tensor<float, 2>& sb, const std::string& message) {
    const std::string got =
        test::error_of([&] { tp::scaled_matmul<tp::fp8_e4m3, tp::fp8_e4m3, tp::bf16>(dev, lhs, rhs, out, scaling, sa, sb); });
    EXPECT_NE(got.find(message), std::string::npos) << "got: " << got << "\nwanted: " << message;
  };
  expect_error(a, b_short, c, fp8_scaling::per_tensor, one, one, "b is [N, K] with K = 128");
  expect_error(a, b, c_wrong, fp8_scaling::per_tensor, one, one, "c is 64 x 136, expected 64 x 128");
  expect_error(a, b, c, fp8_scaling::row_wise, one, rows_b, "row_wise scales are scale_a [64, 1] and scale_b [128, 1], got [1, 1]");
  expect_error(a, b, c, fp8_scaling::block, blocks_a, rows_b, "block scales are scale_a [64, 2] and scale_b [1, 2]");
  expect_error(a, b, c, fp8_scaling::block, rows_a, blocks_b, "got [64, 1]");
  expect_error(a24, b24, c, fp8_scaling::per_tensor, one, one, "not a multiple of 16 bytes");
}
