// Flash attention backward (kernels/attention_backward.cuh) against a float64 reference of the
// gradients on fresh random inputs: O and LSE come from tp::attention_forward, dQ, dK and dV
// start as NaN (a row the kernels forget, or write outside its sequence, shows) and are
// compared with gradients computed on the host in double (S, P, dP, dS). Head dims 64, 128 and 256,
// bf16 and f16, non-causal, causal (bottom-right aligned when Sq != Sk) and sliding windows,
// GQA ratios 1 and 4 (and MQA), odd lengths, Sq = 0 and Sk = 0, packed variable-length batches
// with empty sequences, repeated runs bitwise identical; then bad input, on the host and (varlen
// offsets) in the kernel. The interpreter's race detector checks every launch.
#include "attention_instances.hpp"
#include "test_util.hpp"

#include <tilepipe/kernels/attention.cuh>
#include <tilepipe/kernels/attention_backward.cuh>

#include <cstring>
#include <type_traits>

namespace {

struct lengths {
  std::vector<int> q, k;  // per sequence
};

struct mask_spec {
  bool causal = false;
  int window_left = -1, window_right = -1;  // -1: unbounded
};

std::vector<int> prefix(const std::vector<int>& n) {
  std::vector<int> cu{0};
  for (int x : n) cu.push_back(cu.back() + x);
  return cu;
}

struct gradients {
  std::vector<double> dq, dk, dv;
};

/// The gradients in double for packed sequences ([total, H, D] rows, sequence b at rows
/// [cu[b], cu[b + 1])): for every query row, S and P over its visible keys (masks aligned to
/// the bottom right), dP = dO V^T, delta = sum P dP, dS = P (dP - delta); dQ = scale dS K,
/// dK = scale dS^T Q and dV = P^T dO, summed over the query heads of each KV head.
template <class T>
gradients reference_gradients(const std::vector<T>& q, const std::vector<T>& k, const std::vector<T>& v,
                              const std::vector<T>& d_o, int hq, int hkv, int d, const std::vector<int>& cu_q,
                              const std::vector<int>& cu_k, double scale, mask_spec mask) {
  auto f = [d](const std::vector<T>& x, long long row, int heads, int h, int c) {
    return static_cast<double>(tp::to_float(x[(row * heads + h) * d + c]));
  };
  gradients g;
  g.dq.assign(static_cast<std::size_t>(cu_q.back()) * hq * d, 0.0);
  g.dk.assign(static_cast<std::size_t>(cu_k.back()) * hkv * d, 0.0);
  g.dv.assign(g.dk.size(), 0.0);
  const int right = mask.causal ? 0 : mask.window_right;
  std::vector<double> s, dp;
  for (std::size_t b = 0; b + 1 < cu_q.size(); ++b) {
    const int q0 = cu_q[b], sq = cu_q[b + 1] - q0, k0 = cu_k[b], sk = cu_k[b + 1] - k0;
    for (int h = 0; h < hq; ++h) {
      const int hk = h / (hq / hkv);
      for (int i = 0; i < sq; ++i) {
        const int lo = std::max(mask.window_left >= 0 ? i + sk - sq - mask.window_left : 0, 0);
        const int hi = std::min(right >= 0 ? i + sk - sq + right : sk - 1, sk - 1);
        if (lo > hi) continue;  // no visible key: P = 0, no gradient
        s.assign(static_cast<std::size_t>(sk), 0.0), dp.assign(static_cast<std::size_t>(sk), 0.0);
        double mx = -INFINITY;
        for (int j = lo; j <= hi; ++j) {
          double dot = 0, dot_v = 0;
          for (int c = 0; c < d; ++c) {
            dot += f(q, q0 + i, hq, h, c) * f(k, k0 + j, hkv, hk, c);
            dot_v += f(d_o, q0 + i, hq, h, c) * f(v, k0 + j, hkv, hk, c);
          }
          s[j] = dot * scale, dp[j] = dot_v;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int j = lo; j <= hi; ++j) sum += std::exp(s[j] - mx);
        double delta = 0;
        for (int j = lo; j <= hi; ++j) delta += std::exp(s[j] - mx) / sum * dp[j];
        for (int j = lo; j <= hi; ++j) {
          const double p = std::exp(s[j] - mx) / sum, ds = p * (dp[j] - delta);
          for (int c = 0; c < d; ++c) {
            g.dq[((q0 + i) * static_cast<std::size_t>(hq) + h) * d + c] += scale * ds * f(k, k0 + j, hkv, hk, c);
            g.dk[((k0 + j) * static_cast<std::size_t>(hkv) + hk) * d + c] += scale * ds * f(q, q0 + i, hq, h, c);
            g.dv[((k0 + j) * static_cast<std::size_t>(hkv) + hk) * d + c] += p * f(d_o, q0 + i, hq, h, c);
          }
        }
      }
    }
  }
  return g;
}

template <class T>
struct computed {
  std::vector<T> dq, dk, dv;
};

/// Runs the forward (for O and LSE) and the backward on sequences of the given lengths
/// (fixed-length unless `varlen`) and returns dQ, dK and dV.
template <class T>
computed<T> run_backward(const lengths& len, int hq, int hkv, int d, mask_spec mask, bool varlen,
                         const std::vector<T>& hq_q, const std::vector<T>& h_k, const std::vector<T>& h_v,
                         const std::vector<T>& h_do, bool deterministic = true) {
  const auto cu_q = prefix(len.q), cu_k = prefix(len.k);
  const int batches = static_cast<int>(len.q.size());
  const long long total_q = cu_q.back(), total_k = cu_k.back();
  const auto& dev = test::dev();
  const std::vector<T> nan_q(static_cast<std::size_t>(total_q) * hq * d, tp::from_float<T>(NAN));
  const std::vector<T> nan_k(static_cast<std::size_t>(total_k) * hkv * d, tp::from_float<T>(NAN));
  auto lse = tp::tensor<float, 1>::from_host(dev, {total_q * hq}, std::vector<float>(total_q * hq, NAN));
  const tp::attention_options fwd{.causal = mask.causal, .window_left = mask.window_left,
                                  .window_right = mask.window_right, .lse = lse.data()};
  const tp::attention_backward_options bwd{.causal = mask.causal, .window_left = mask.window_left,
                                           .window_right = mask.window_right, .deterministic = deterministic};
  computed<T> out;
  if (varlen) {
    auto t3 = [&](long long rows, int heads, const std::vector<T>& h) {
      return tp::tensor<T, 3>::from_host(dev, {rows, heads, d}, h);
    };
    auto q = t3(total_q, hq, hq_q), k = t3(total_k, hkv, h_k), v = t3(total_k, hkv, h_v), d_o = t3(total_q, hq, h_do);
    auto o = t3(total_q, hq, nan_q), dq = t3(total_q, hq, nan_q), dk = t3(total_k, hkv, nan_k), dv = t3(total_k, hkv, nan_k);
    auto cq = tp::tensor<int, 1>::from_host(dev, {batches + 1LL}, cu_q);
    auto ck = tp::tensor<int, 1>::from_host(dev, {batches + 1LL}, cu_k);
    const int max_sq = *std::max_element(len.q.begin(), len.q.end());
    const int max_sk = *std::max_element(len.k.begin(), len.k.end());
    tp::attention_forward_varlen<T>(dev, q, k, v, o, cq.data(), ck.data(), batches, max_sq, fwd);
    const auto lse_view = tp::tensor_view<float, 2>::wrap(lse.data(), {hq, total_q}, dev.is_gpu());
    tp::attention_backward_varlen<T>(dev, q, k, v, o, d_o, lse_view, dq, dk, dv, cq.data(), ck.data(), batches, max_sq,
                                     max_sk, bwd);
    out = {dq.to_host(), dk.to_host(), dv.to_host()};
  } else {
    const long long sq = len.q[0], sk = len.k[0];
    auto t4 = [&](long long rows, int heads, const std::vector<T>& h) {
      return tp::tensor<T, 4>::from_host(dev, {batches, rows, heads, d}, h);
    };
    auto q = t4(sq, hq, hq_q), k = t4(sk, hkv, h_k), v = t4(sk, hkv, h_v), d_o = t4(sq, hq, h_do);
    auto o = t4(sq, hq, nan_q), dq = t4(sq, hq, nan_q), dk = t4(sk, hkv, nan_k), dv = t4(sk, hkv, nan_k);
    if (sq > 0) tp::attention_forward<T>(dev, q, k, v, o, fwd);
    const auto lse_view = tp::tensor_view<float, 3>::wrap(lse.data(), {batches, hq, sq}, dev.is_gpu());
    tp::attention_backward<T>(dev, q, k, v, o, d_o, lse_view, dq, dk, dv, bwd);
    out = {dq.to_host(), dk.to_host(), dv.to_host()};
  }
  return out;
}

/// Checks dQ, dK and dV against the float64 reference on fresh random inputs.
template <class T>
void check(const lengths& len, int hq, int hkv, int d, mask_spec mask = {}, bool varlen = false,
           bool deterministic = true) {
  const auto cu_q = prefix(len.q), cu_k = prefix(len.k);
  const std::size_t q_values = static_cast<std::size_t>(cu_q.back()) * hq * d;
  const std::size_t k_values = static_cast<std::size_t>(cu_k.back()) * hkv * d;
  const auto h_q = test::random_values<T>(q_values, test::fresh_seed(), -2, 2);
  const auto h_k = test::random_values<T>(k_values, test::fresh_seed(), -2, 2);
  const auto h_v = test::random_values<T>(k_values, test::fresh_seed());
  const auto h_do = test::random_values<T>(q_values, test::fresh_seed());
  const auto got = run_backward<T>(len, hq, hkv, d, mask, varlen, h_q, h_k, h_v, h_do, deterministic);
  const auto want = reference_gradients(h_q, h_k, h_v, h_do, hq, hkv, d, cu_q, cu_k,
                                        1.0 / std::sqrt(static_cast<double>(d)), mask);
  // P and dS are rounded to 16 bits for the matrix products (and O, for delta): errors of about
  // 2.5e-3 in bf16 and 3e-4 in f16.
  const double tolerance = std::is_same_v<T, tp::bf16> ? 1e-2 : 2e-3;
  EXPECT_LT(test::rel_error(got.dq, want.dq), tolerance) << "dQ";
  EXPECT_LT(test::rel_error(got.dk, want.dk), tolerance) << "dK";
  EXPECT_LT(test::rel_error(got.dv, want.dv), tolerance) << "dV";
}

template <class T>
void check_fixed(int b, int sq, int sk, int hq, int hkv, int d, mask_spec mask = {}, bool deterministic = true) {
  check<T>({std::vector<int>(b, sq), std::vector<int>(b, sk)}, hq, hkv, d, mask, false, deterministic);
}

/// The single pass (deterministic = false): dQ summed by reductions in global memory.
template <class T>
void check_single_pass(int b, int sq, int sk, int hq, int hkv, int d, mask_spec mask = {}) {
  check_fixed<T>(b, sq, sk, hq, hkv, d, mask, false);
}

constexpr mask_spec causal{.causal = true};

}  // namespace

TEST(AttentionBackward, HeadDimsAndTypes) {
  check_fixed<tp::bf16>(1, 200, 200, 1, 1, 64);
  check_fixed<tp::bf16>(1, 200, 200, 1, 1, 128);
  check_fixed<tp::f16>(1, 200, 200, 1, 1, 64);
  check_fixed<tp::f16>(1, 130, 200, 1, 1, 128);
  // Head dim 256: 64-key tiles, S and dP of 32 keys per warpgroup, dK and dV split by columns;
  // dQ steps by 32 keys.
  check_fixed<tp::bf16>(1, 70, 100, 1, 1, 256);
  check_fixed<tp::f16>(1, 100, 70, 2, 1, 256, causal);  // GQA; rows without keys
}

TEST(AttentionBackward, CausalAndWindows) {
  check_fixed<tp::bf16>(1, 200, 200, 1, 1, 64, causal);
  check_fixed<tp::f16>(1, 200, 200, 1, 1, 128, causal);
  check_fixed<tp::bf16>(1, 65, 200, 1, 1, 64, causal);  // Sq < Sk: the diagonal starts at key 135
  check_fixed<tp::bf16>(1, 200, 65, 1, 1, 128, causal);  // Sq > Sk: the first 135 rows see no key
  check_fixed<tp::bf16>(1, 300, 300, 1, 1, 64, {.window_left = 40, .window_right = 7});
  check_fixed<tp::f16>(1, 150, 270, 1, 1, 128, {.window_left = 100, .window_right = -1});
  check_fixed<tp::bf16>(1, 270, 150, 1, 1, 64, {.window_left = -1, .window_right = 3});
  check_fixed<tp::bf16>(1, 200, 200, 1, 1, 64, {.causal = true, .window_left = 130});
}

TEST(AttentionBackward, GroupedQueryHeads) {
  check_fixed<tp::bf16>(2, 70, 90, 2, 2, 64);             // ratio 1, two batches
  check_fixed<tp::bf16>(1, 70, 150, 4, 1, 64, causal);    // ratio 4 (MQA)
  check_fixed<tp::f16>(1, 65, 140, 8, 2, 128);            // ratio 4, two KV heads
}

TEST(AttentionBackward, OddLengths) {
  check_fixed<tp::bf16>(1, 1, 1, 1, 1, 64);
  check_fixed<tp::bf16>(2, 7, 7, 1, 1, 128, causal);
  check_fixed<tp::bf16>(2, 1, 200, 2, 1, 64);   // decode-like: one query row
  check_fixed<tp::bf16>(1, 200, 1, 1, 1, 64);   // one key
  check_fixed<tp::f16>(2, 65, 7, 1, 1, 64, causal);
  check_fixed<tp::bf16>(1, 300, 260, 3, 1, 64, causal);  // more tiles than the interpreter's four CTAs
}

TEST(AttentionBackward, EmptySides) {
  check_fixed<tp::bf16>(2, 65, 0, 2, 1, 64);  // no keys: dQ = 0, dK and dV empty
  check_fixed<tp::bf16>(2, 0, 65, 2, 1, 64);  // no query rows: dK = dV = 0
}

TEST(AttentionBackward, VariableLengthBatches) {
  check<tp::bf16>({{0, 1, 130, 65, 0, 7}, {5, 1, 200, 0, 3, 7}}, 2, 1, 64, {}, true);
  check<tp::bf16>({{0, 1, 130, 65, 0, 7}, {5, 1, 200, 0, 3, 7}}, 2, 1, 64, causal, true);
  check<tp::f16>({{200, 1, 64}, {100, 129, 1}}, 1, 1, 128, {.window_left = 20, .window_right = 10}, true);
  check<tp::bf16>({{3, 70}, {0, 0}}, 1, 1, 64, {}, true);  // no sequence has keys
}

/// Runs the backward twice on the same fresh random inputs (one causal bf16 sequence), in the
/// modes given, and expects the same bits from both.
void expect_same_bits(int sq, int sk, int hq, int hkv, int d, bool first_deterministic, bool second_deterministic) {
  const lengths len{{sq}, {sk}};
  const auto h_q = test::random_values<tp::bf16>(sq * hq * d, test::fresh_seed(), -2, 2);
  const auto h_k = test::random_values<tp::bf16>(sk * hkv * d, test::fresh_seed(), -2, 2);
  const auto h_v = test::random_values<tp::bf16>(sk * hkv * d);
  const auto h_do = test::random_values<tp::bf16>(sq * hq * d);
  const auto first = run_backward<tp::bf16>(len, hq, hkv, d, causal, false, h_q, h_k, h_v, h_do, first_deterministic);
  const auto second = run_backward<tp::bf16>(len, hq, hkv, d, causal, false, h_q, h_k, h_v, h_do, second_deterministic);
  auto same = [](const auto& x, const auto& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0;
  };
  EXPECT_TRUE(same(first.dq, second.dq) && same(first.dk, second.dk) && same(first.dv, second.dv));
}

TEST(AttentionBackward, RepeatedRunsAreBitwiseIdentical) { expect_same_bits(150, 190, 4, 1, 64, true, true); }

// FlashAttention-3's single pass: the dK dV kernels add dS K to an f32 dQ (split by columns
// between the compute warpgroups at head dim 128, each warpgroup's own keys at 64); keys past a
// sequence are masked there, as their P would reach dQ.
TEST(AttentionBackward, SinglePassMatchesTheReference) {
  check_single_pass<tp::bf16>(1, 200, 200, 1, 1, 64);
  check_single_pass<tp::f16>(1, 130, 200, 1, 1, 128);
  check_single_pass<tp::bf16>(1, 200, 65, 1, 1, 128, causal);  // rows without keys, keys past the end
  check_single_pass<tp::bf16>(1, 65, 200, 1, 1, 64, causal);
  check_single_pass<tp::bf16>(1, 300, 300, 1, 1, 64, {.window_left = 40, .window_right = 7});
  check_single_pass<tp::f16>(1, 150, 270, 1, 1, 128, {.window_left = 100, .window_right = -1});
  check_single_pass<tp::bf16>(1, 70, 150, 4, 1, 64, causal);  // MQA: four heads add to one dQ row each
  check_single_pass<tp::f16>(1, 65, 140, 8, 2, 128);
  check_single_pass<tp::bf16>(2, 7, 7, 1, 1, 128, causal);
  check_single_pass<tp::bf16>(1, 300, 260, 3, 1, 64, causal);  // more tiles than CTAs
  check_single_pass<tp::bf16>(2, 65, 0, 2, 1, 64);              // no keys: dQ = 0 from the zeroed accumulator
  check_single_pass<tp::bf16>(2, 0, 65, 2, 1, 128);             // no query rows
  check<tp::bf16>({{0, 1, 130, 65, 0, 7}, {5, 1, 200, 0, 3, 7}}, 2, 1, 64, causal, true, false);
  check<tp::f16>({{200, 1, 64}, {100, 129, 1}}, 1, 1, 128, {.window_left = 20, .window_right = 10}, true, false);
  if (test::on_gpu()) {
    check_single_pass<tp::bf16>(2, 1000, 1000, 4, 2, 128, causal);
    check_single_pass<tp::f16>(1, 2048, 2048, 2, 2, 64);
    check<tp::bf16>({{1000, 0, 513, 1}, {700, 10, 2000, 1}}, 4, 1, 128, causal, true, false);
  }
}

// Head dim 256 at the sizes the interpreter cannot afford: both types, causal and not, windows,
// GQA, odd lengths, empty sides and packed sequences.
TEST(AttentionBackward, HeadDim256OnTheGpu) {
  if (!test::on_gpu()) GTEST_SKIP() << "GPU sizes";
  check_fixed<tp::bf16>(1, 800, 800, 4, 2, 256, causal);
  check_fixed<tp::f16>(1, 512, 512, 2, 2, 256);
  check_fixed<tp::bf16>(1, 300, 700, 8, 1, 256);  // MQA
  check_fixed<tp::f16>(1, 333, 555, 4, 2, 256, causal);
  check_fixed<tp::bf16>(1, 555, 333, 1, 1, 256, causal);  // rows without keys
  check_fixed<tp::bf16>(1, 600, 600, 2, 1, 256, {.window_left = 100, .window_right = 30});
  check_fixed<tp::f16>(3, 1, 200, 2, 1, 256);  // one query row
  check_fixed<tp::bf16>(2, 7, 7, 1, 1, 256, causal);
  check_fixed<tp::bf16>(2, 65, 0, 2, 1, 256);  // no keys
  check_fixed<tp::bf16>(2, 0, 65, 2, 1, 256);  // no query rows
  check<tp::bf16>({{500, 0, 513, 1}, {300, 10, 900, 1}}, 4, 1, 256, causal, true);
  check<tp::f16>({{200, 1, 64, 97}, {100, 129, 1, 33}}, 2, 2, 256, {.window_left = 20, .window_right = 10}, true);
}

// Head dim 256 has no single pass (the three launches are faster there): deterministic = false
// runs them too, and gives their bits.
TEST(AttentionBackward, HeadDim256RunsTheThreeLaunchesInBothModes) { expect_same_bits(70, 100, 2, 1, 256, true, false); }

TEST(AttentionBackward, LargeOnTheGpu) {
  if (!test::on_gpu()) GTEST_SKIP() << "GPU sizes";
  check_fixed<tp::bf16>(2, 1000, 1000, 4, 2, 128, causal);
  check_fixed<tp::f16>(1, 2048, 2048, 2, 2, 64);
  check_fixed<tp::bf16>(1, 1000, 1500, 8, 1, 128);
  check<tp::bf16>({{1000, 0, 513, 1}, {700, 10, 2000, 1}}, 4, 1, 128, causal, true);
}

TEST(AttentionBackward, BadInputIsReported) {
  const auto& dev = test::dev();
  auto t = [&](long long b, long long s, long long h, long long d) { return tp::tensor<tp::bf16, 4>(dev, {b, s, h, d}); };
  auto q = t(1, 64, 4, 64), k = t(1, 64, 2, 64), v = t(1, 64, 2, 64), o = t(1, 64, 4, 64), d_o = t(1, 64, 4, 64);
  auto dq = t(1, 64, 4, 64), dk = t(1, 64, 2, 64), dv = t(1, 64, 2, 64);
  tp::tensor<float, 3> lse(dev, {1, 4, 64});
  auto run = [&](const auto& q_, const auto& k_, const auto& v_, const auto& o_, const auto& dq_, const auto& dk_,
                 const tp::tensor_view<float, 3>& lse_) {
    return test::error_of([&] { tp::attention_backward<tp::bf16>(dev, q_, k_, v_, o_, d_o, lse_, dq_, dk_, dv); });
  };
  EXPECT_EQ(run(q, k, v, o, dq, dk, lse), "");
  for (const long long d : {32, 96, 192, 512}) {
    auto qd = t(1, 64, 4, d), kvd = t(1, 64, 2, d);
    EXPECT_NE(test::error_of([&] { tp::attention_backward<tp::bf16>(dev, qd, kvd, kvd, qd, qd, lse, qd, kvd, kvd); })
                  .find("head dim " + std::to_string(d) + " is not supported (64, 128 or 256)"),
              std::string::npos);
  }
  EXPECT_NE(run(q, t(1, 64, 3, 64), t(1, 64, 3, 64), o, dq, t(1, 64, 3, 64), lse).find("not a multiple of 3 KV heads"),
            std::string::npos);
  EXPECT_NE(run(q, k, t(1, 63, 2, 64), o, dq, dk, lse).find("v and k differ in shape"), std::string::npos);
  EXPECT_NE(run(q, k, v, t(1, 65, 4, 64), dq, dk, lse).find("o and q differ in shape"), std::string::npos);
  EXPECT_NE(run(q, k, v, o, t(1, 64, 2, 64), dk, lse).find("dq and q differ in shape"), std::string::npos);
  EXPECT_NE(run(q, k, v, o, dq, t(1, 64, 4, 64), lse).find("dk and k differ in shape"), std::string::npos);
  tp::tensor<float, 3> lse_bad(dev, {1, 64, 4});
  EXPECT_NE(run(q, k, v, o, dq, dk, lse_bad).find("lse must be [B, Hq, Sq] = [1, 4, 64]"), std::string::npos);
  auto big = t(1, 64, 5, 64);
  tp::tensor_view<tp::bf16, 4> skewed = big.view();
  skewed.shape = {1, 64, 4, 64}, skewed.stride = {64 * 260, 260, 65, 1};  // heads 130 bytes apart
  EXPECT_NE(run(q, k, v, skewed, dq, dk, lse).find("o's stride"), std::string::npos);
}

TEST(AttentionBackward, BadSequenceOffsetsAreReportedByTheKernel) {
  if (test::on_gpu()) GTEST_SKIP() << "device-side checks trap on the GPU; the interpreter reports them";
  const auto& dev = test::dev();
  auto t = [&](long long rows) { return tp::tensor<tp::bf16, 3>(dev, {rows, 1, 64}); };
  auto q = t(50), k = t(64), v = t(64), o = t(50), d_o = t(50), dq = t(50), dk = t(64), dv = t(64);
  tp::tensor<float, 2> lse(dev, {1, 50});
  auto run = [&](std::vector<int> cu_q, std::vector<int> cu_k, int max_sq, int max_sk) {
    auto cq = tp::tensor<int, 1>::from_host(dev, {static_cast<long long>(cu_q.size())}, cu_q);
    auto ck = tp::tensor<int, 1>::from_host(dev, {static_cast<long long>(cu_k.size())}, cu_k);
    return test::error_of([&] {
      tp::attention_backward_varlen<tp::bf16>(dev, q, k, v, o, d_o, lse, dq, dk, dv, cq.data(), ck.data(),
                                              static_cast<int>(cu_q.size()) - 1, max_sq, max_sk);
    });
  };
  EXPECT_EQ(run({0, 20, 50}, {0, 30, 64}, 30, 34), "");
  EXPECT_NE(run({0, 100}, {0, 64}, 100, 64).find("sequence 0 is rows [0, 100) of q, which has 50"), std::string::npos);
  EXPECT_NE(run({0, 50}, {0, 100}, 50, 100).find("sequence 0 is rows [0, 100) of k and v, which have 64"),
            std::string::npos);
  EXPECT_NE(run({0, 50}, {0, 64}, 50, 40).find("sequence 0 has 64 keys, more than max_seqlen_k = 40"),
            std::string::npos);
}
