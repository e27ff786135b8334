// wgmma against a float64 host product: both 16-bit types, several N, every swizzle,
// K-major and MN-major A and B, A from registers, and overwrite (accumulate = false); the fp8
// types (e4m3 and e5m2, mixed too) with K-major operands, exactly where every partial sum is
// exact, and the fp8 conversions the interpreter's wgmma reads its operands with, against a
// decoder and an encoder written from the formats' definitions.
#include "test_util.hpp"

#include <cstring>

namespace {

enum class a_src { smem_k_major, smem_mn_major, registers };

template <class TA, class TB, int M, int N, int K, int SA, int SB, a_src A, bool BKMajor, bool Accumulate = true>
struct wgmma_kernel {
  // A is stored (M, K), or (K, M) when MN-major; B is stored (K, N), or (N, K) when K-major.
  using a_tile = tp::tile<std::conditional_t<A == a_src::smem_mn_major, tp::block<K, M>, tp::block<M, K>>, tp::swizzle<SA>>;
  using b_tile = tp::tile<std::conditional_t<BKMajor, tp::block<N, K>, tp::block<K, N>>, tp::swizzle<SB>>;
  using c_tile = tp::tile<tp::block<M, N>>;
  float init = 0.5f;  // the accumulator's value before the wgmma (Accumulate)

  TP_HD void operator()(tp::kernel_context& k, tp::gmem<TA, 2, a_tile> a, tp::gmem<TB, 2, b_tile> b,
                        tp::gmem<float, 2, c_tile> c, tp::smem<TA, a_tile> as, tp::smem<TB, b_tile> bs,
                        tp::smem<float, c_tile> cs, tp::barriers<2> bars) const {
    tp::copy_gmem_to_smem(a, tp::idx(0, 0), as, bars[0]);
    tp::copy_gmem_to_smem(b, tp::idx(0, 0), bs, bars[1]);
    tp::barrier_wait(bars[0], 0);
    tp::barrier_wait(bars[1], 0);

    auto b_kn = [&] {
      if constexpr (BKMajor) return tp::transpose(bs);
      else return bs;
    }();
    // Accumulate onto init, or overwrite a garbage accumulator.
    tp::accumulator<M, N> acc = tp::full<float, M, N>(Accumulate ? init : 1e30f);
    if constexpr (A == a_src::registers) {
      auto a_regs = tp::to_operand<TA>(tp::load<TA>(as));  // read by the tensor cores until the wait
      tp::wgmma(acc, a_regs, b_kn, Accumulate);
      tp::wgmma_wait<0>(acc);
    } else {
      if constexpr (A == a_src::smem_mn_major) tp::wgmma(acc, tp::transpose(as), b_kn, Accumulate);
      else tp::wgmma(acc, as, b_kn, Accumulate);
      tp::wgmma_wait<0>(acc);
    }

    tp::store(cs, acc);
    tp::commit_smem();
    tp::copy_smem_to_gmem(cs, c, tp::idx(0, 0));
    tp::wait_smem_to_gmem<0>();
    (void)k;
  }
};

/// The wgmma of ha (M x K, or K x M when A is MN-major) and hb (K x N, or N x K when B is
/// K-major) onto `init`, and its float64 reference.
template <class TA, class TB, int M, int N, int K, int SA, int SB, a_src A, bool BKMajor, bool Accumulate = true>
std::pair<std::vector<float>, std::vector<double>> run_wgmma(const std::vector<TA>& ha, const std::vector<TB>& hb,
                                                             float init = 0.5f) {
  constexpr bool a_mn = A == a_src::smem_mn_major;
  auto a = tp::tensor<TA, 2>::from_host(test::dev(), a_mn ? std::array<long long, 2>{K, M} : std::array<long long, 2>{M, K}, ha);
  auto b = tp::tensor<TB, 2>::from_host(test::dev(), BKMajor ? std::array<long long, 2>{N, K} : std::array<long long, 2>{K, N}, hb);
  auto c = tp::kernel(wgmma_kernel<TA, TB, M, N, K, SA, SB, A, BKMajor, Accumulate>{init}, {.grid = {1}},
                      tp::out_type<float>(M, N))(test::dev(), a, b);
  std::vector<double> ref(M * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = Accumulate ? init : 0.0;
      for (int kk = 0; kk < K; ++kk)
        s += double(tp::to_float(ha[a_mn ? kk * M + i : i * K + kk])) * tp::to_float(hb[BKMajor ? j * K + kk : kk * N + j]);
      ref[i * N + j] = s;
    }
  return {c.to_host(), ref};
}

template <class T, int M, int N, int K, int SA, int SB, a_src A, bool BKMajor, bool Accumulate = true>
void check() {
  const auto [out, ref] = run_wgmma<T, T, M, N, K, SA, SB, A, BKMajor, Accumulate>(test::random_values<T>(M * K),
                                                                                  test::random_values<T>(K * N));
  EXPECT_LT(test::rel_error(out, ref), 1e-5) << "M=" << M << " N=" << N << " K=" << K << " swizzle " << SA << "/" << SB;
}

// ---- fp8 -------------------------------------------------------------------------------

template <class T>
constexpr bool is_e4m3 = std::is_same_v<T, tp::fp8_e4m3>;

/// The value of an fp8 code from the formats' definitions (OCP 8-bit floating point):
/// e4m3 has bias 7, no infinities, and NaN only at S.1111.111 (largest finite 448); e5m2 is
/// IEEE-like with bias 15 (infinities at S.11111.00, NaN above).
template <class T>
double fp8_value(unsigned code) {
  constexpr int mant_bits = is_e4m3<T> ? 3 : 2, bias = is_e4m3<T> ? 7 : 15, exp_max = is_e4m3<T> ? 15 : 31;
  const int sign = code >> 7 & 1, e = static_cast<int>(code >> mant_bits) & exp_max;
  const unsigned m = code & ((1u << mant_bits) - 1);
  double v;
  if (is_e4m3<T> && e == exp_max && m == (1u << mant_bits) - 1) v = NAN;
  else if (!is_e4m3<T> && e == exp_max) v = m ? NAN : INFINITY;
  else if (e == 0) v = std::ldexp(static_cast<double>(m), 1 - bias - mant_bits);
  else v = std::ldexp(static_cast<double>(m | (1u << mant_bits)), e - bias - mant_bits);
  return sign ? -v : v;
}

template <class T>
T fp8_of_code(unsigned code) {
  T x;
  const auto byte = static_cast<unsigned char>(code);
  std::memcpy(&x, &byte, 1);
  return x;
}

template <class T>
unsigned code_of(T x) {
  unsigned char byte;
  std::memcpy(&byte, &x, 1);
  return byte;
}

/// Random finite codes: every exponent and mantissa.
template <class T>
std::vector<T> random_fp8_codes(std::size_t n, std::mt19937_64& rng) {
  std::vector<T> v(n);
  for (auto& x : v) {
    unsigned code;
    do code = static_cast<unsigned>(rng() & 0xff);
    while (!std::isfinite(fp8_value<T>(code)));
    x = fp8_of_code<T>(code);
  }
  return v;
}

/// Random integers in [-4, 4], exact in both fp8 types: with K <= 256 every partial sum (onto
/// 3) is an integer of magnitude below 2^13, exact in f32 and in the tensor core's narrower
/// fp8 accumulator (about 14 significant bits) alike.
template <class T>
std::vector<T> random_fp8_integers(std::size_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> d(-4, 4);
  std::vector<T> v(n);
  for (auto& x : v) x = tp::from_float<T>(static_cast<float>(d(rng)));
  return v;
}

template <class TA, class TB, int M, int N, int K, int SA, int SB>
void check_fp8() {
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const std::string what = std::string(tp::dtype_traits<TA>::name) + " x " + tp::dtype_traits<TB>::name + " M=" +
                           std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) + " seed " +
                           std::to_string(seed);
  {
    const auto [out, ref] = run_wgmma<TA, TB, M, N, K, SA, SB, a_src::smem_k_major, true>(
        random_fp8_integers<TA>(M * K, rng), random_fp8_integers<TB>(K * N, rng), 3.0f);
    for (std::size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(out[i], ref[i]) << "element " << i << ": " << what;
  }
  // Every finite code: the interpreter's f32 sums are within f32 rounding; the tensor core's
  // fp8 accumulator keeps about 14 bits.
  const auto [out, ref] = run_wgmma<TA, TB, M, N, K, SA, SB, a_src::smem_k_major, true>(
      random_fp8_codes<TA>(M * K, rng), random_fp8_codes<TB>(K * N, rng));
  EXPECT_LT(test::rel_error(out, ref), test::on_gpu() ? 5e-4 : 1e-6) << what;
}

}  // namespace

TEST(Wgmma, Bf16KMajorAMnMajorB) {
  check<tp::bf16, 64, 64, 64, 128, 128, a_src::smem_k_major, false>();
  check<tp::bf16, 128, 256, 64, 128, 128, a_src::smem_k_major, false>();
  check<tp::bf16, 64, 128, 128, 128, 128, a_src::smem_k_major, false>();  // K spans two panels
}

TEST(Wgmma, F16KMajorB) {
  check<tp::f16, 64, 8, 64, 128, 128, a_src::smem_k_major, true>();
  check<tp::f16, 64, 136, 64, 128, 128, a_src::smem_k_major, true>();
  check<tp::f16, 128, 256, 32, 64, 64, a_src::smem_k_major, true>();
}

TEST(Wgmma, NarrowSwizzles) {
  check<tp::bf16, 64, 32, 32, 64, 64, a_src::smem_k_major, false>();
  check<tp::bf16, 64, 16, 16, 32, 32, a_src::smem_k_major, false>();
  check<tp::bf16, 64, 48, 64, 32, 128, a_src::smem_k_major, true>();
}

TEST(Wgmma, MnMajorA) {
  check<tp::bf16, 64, 64, 64, 128, 128, a_src::smem_mn_major, false>();
  check<tp::f16, 128, 64, 32, 64, 64, a_src::smem_mn_major, true>();
}

TEST(Wgmma, AFromRegisters) {
  check<tp::bf16, 64, 64, 64, 128, 128, a_src::registers, false>();
  check<tp::f16, 128, 96, 32, 64, 64, a_src::registers, true>();
}

TEST(Wgmma, OverwriteInsteadOfAccumulate) { check<tp::bf16, 64, 64, 64, 128, 128, a_src::smem_k_major, false, false>(); }

TEST(Wgmma, Fp8E4m3) {
  check_fp8<tp::fp8_e4m3, tp::fp8_e4m3, 64, 64, 128, 128, 128>();
  check_fp8<tp::fp8_e4m3, tp::fp8_e4m3, 128, 256, 128, 128, 128>();
  check_fp8<tp::fp8_e4m3, tp::fp8_e4m3, 64, 136, 64, 64, 64>();   // N not a power of 2; 64-byte swizzle
  check_fp8<tp::fp8_e4m3, tp::fp8_e4m3, 64, 8, 32, 32, 32>();     // the narrowest N and swizzle
  check_fp8<tp::fp8_e4m3, tp::fp8_e4m3, 64, 64, 256, 128, 128>();  // K spans two panels
}

TEST(Wgmma, Fp8E5m2AndMixed) {
  check_fp8<tp::fp8_e5m2, tp::fp8_e5m2, 64, 64, 128, 128, 128>();
  check_fp8<tp::fp8_e5m2, tp::fp8_e4m3, 64, 96, 64, 64, 64>();
  check_fp8<tp::fp8_e4m3, tp::fp8_e5m2, 128, 32, 128, 128, 128>();
}

TEST(Wgmma, Fp8Overwrite) {
  std::mt19937_64 rng(test::fresh_seed());
  using T = tp::fp8_e4m3;
  const auto [out, ref] = run_wgmma<T, T, 64, 64, 128, 128, 128, a_src::smem_k_major, true, false>(
      random_fp8_integers<T>(64 * 128, rng), random_fp8_integers<T>(128 * 64, rng));
  for (std::size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(out[i], ref[i]) << "element " << i;
}

// The conversions the interpreter computes with: every code decodes exactly, and floats
// encode by rounding to nearest even, e4m3 saturating to +-448 (satfinite) and NaN to NaN.
template <class T>
void check_fp8_conversions() {
  const char* name = tp::dtype_traits<T>::name;
  for (unsigned code = 0; code < 256; ++code) {
    const double want = fp8_value<T>(code), got = tp::to_float(fp8_of_code<T>(code));
    if (std::isnan(want)) ASSERT_TRUE(std::isnan(got)) << name << " code " << code;
    else ASSERT_EQ(got, want) << name << " code " << code;
  }
  // The finite values in order, and the float nearest each (ties to the even code).
  std::vector<std::pair<double, unsigned>> finite;
  for (unsigned code = 0; code < 128; ++code)
    if (std::isfinite(fp8_value<T>(code))) finite.push_back({fp8_value<T>(code), code});
  const double max_finite = finite.back().first;
  auto nearest = [&](double x) {  // |x| <= max_finite
    unsigned best = 0;
    double best_d = INFINITY;
    for (auto [v, code] : finite) {
      const double d = std::fabs(std::fabs(x) - v);
      if (d < best_d || (d == best_d && (code & 1) == 0)) best = code, best_d = d;
    }
    return best | (x < 0 ? 0x80u : 0u);
  };
  std::mt19937_64 rng(test::fresh_seed());
  std::uniform_real_distribution<double> exponent(-22.0, std::log2(max_finite) + 1.0);
  for (int i = 0; i < 20000; ++i) {
    const double x = std::exp2(exponent(rng)) * (rng() & 1 ? -1.0 : 1.0);
    const float xf = static_cast<float>(x);
    const unsigned got = code_of(tp::from_float<T>(xf));
    if (std::fabs(xf) > max_finite) {
      // e4m3 saturates; e5m2 rounds to infinity past the midpoint to the next binade step.
      if constexpr (is_e4m3<T>) ASSERT_EQ(fp8_value<T>(got), xf > 0 ? max_finite : -max_finite) << name << " " << xf;
      continue;
    }
    ASSERT_EQ(got, nearest(xf)) << name << " " << xf;
  }
  for (unsigned code = 0; code < 128; ++code)  // the midpoints between neighbours: ties to even
    if (code + 1 < 128 && std::isfinite(fp8_value<T>(code + 1))) {
      const float mid = static_cast<float>((fp8_value<T>(code) + fp8_value<T>(code + 1)) / 2);
      ASSERT_EQ(code_of(tp::from_float<T>(mid)), (code & 1) ? code + 1 : code) << name << " midpoint " << mid;
    }
  ASSERT_TRUE(std::isnan(tp::to_float(tp::from_float<T>(NAN)))) << name;
  if constexpr (is_e4m3<T>) ASSERT_EQ(tp::to_float(tp::from_float<T>(INFINITY)), 448.0f);
}

TEST(Wgmma, Fp8ConversionsAreExact) {
  check_fp8_conversions<tp::fp8_e4m3>();
  check_fp8_conversions<tp::fp8_e5m2>();
}
