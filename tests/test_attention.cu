// Flash attention forward (kernels/attention.cuh) against a float64 reference on fresh
// random inputs, output and log-sum-exp: head dims 64, 128, 256, bf16 and f16, non-causal,
// causal (bottom-right aligned when Sq != Sk) and sliding windows, GQA ratios 1, 4 and 8,
// odd lengths, decode (Sq = 1), Sk below one KV block, no keys at all (Sk = 0), more tiles
// than CTAs, and packed variable-length batches with empty and length-1 sequences; then bad
// input, on the host and (varlen offsets) in the kernel. Outputs start
// as NaN, so a row the kernel forgets, or writes outside its sequence, shows.
#include "attention_instances.hpp"
#include "test_util.hpp"

#include <tilepipe/kernels/attention.cuh>

#include "examples/common/attention_reference.hpp"

namespace {

struct lengths {
  std::vector<int> q, k;  // per sequence
};

std::vector<int> prefix(const std::vector<int>& n) {
  std::vector<int> cu{0};
  for (int x : n) cu.push_back(cu.back() + x);
  return cu;
}

/// Runs attention on sequences of the given lengths (fixed-length when every length is the
/// same and `varlen` is false) and compares O and LSE with the float64 reference.
template <class T>
void check(const lengths& len, int hq, int hkv, int d, reference::attention_mask mask, bool varlen = false) {
  const auto cu_q = prefix(len.q), cu_k = prefix(len.k);
  const int batches = static_cast<int>(len.q.size()), total_q = cu_q.back(), total_k = cu_k.back();
  const auto hqv = test::random_values<T>(static_cast<std::size_t>(total_q) * hq * d, test::fresh_seed(), -2, 2);
  const auto hkv_k = test::random_values<T>(static_cast<std::size_t>(total_k) * hkv * d, test::fresh_seed(), -2, 2);
  const auto hkv_v = test::random_values<T>(static_cast<std::size_t>(total_k) * hkv * d);
  const auto& dev = test::dev();
  const std::vector<T> nan_o(static_cast<std::size_t>(total_q) * hq * d, tp::from_float<T>(NAN));
  auto lse = tp::tensor<float, 1>::from_host(dev, {static_cast<long long>(total_q) * hq},
                                             std::vector<float>(static_cast<std::size_t>(total_q) * hq, NAN));
  tp::attention_options opt{.causal = mask.causal, .window_left = mask.window_left, .window_right = mask.window_right,
                            .lse = lse.data()};
  std::vector<T> out;
  if (varlen) {
    auto q = tp::tensor<T, 3>::from_host(dev, {total_q, hq, d}, hqv);
    auto k = tp::tensor<T, 3>::from_host(dev, {total_k, hkv, d}, hkv_k);
    auto v = tp::tensor<T, 3>::from_host(dev, {total_k, hkv, d}, hkv_v);
    auto o = tp::tensor<T, 3>::from_host(dev, {total_q, hq, d}, nan_o);
    auto cq = tp::tensor<int, 1>::from_host(dev, {batches + 1LL}, cu_q);
    auto ck = tp::tensor<int, 1>::from_host(dev, {batches + 1LL}, cu_k);
    const int max_sq = *std::max_element(len.q.begin(), len.q.end());
    tp::attention_forward_varlen<T>(dev, q, k, v, o, cq.data(), ck.data(), batches, max_sq, opt);
    out = o.to_host();
  } else {
    const long long sq = len.q[0], sk = len.k[0];
    auto q = tp::tensor<T, 4>::from_host(dev, {batches, sq, hq, d}, hqv);
    auto k = tp::tensor<T, 4>::from_host(dev, {batches, sk, hkv, d}, hkv_k);
    auto v = tp::tensor<T, 4>::from_host(dev, {batches, sk, hkv, d}, hkv_v);
    auto o = tp::tensor<T, 4>::from_host(dev, {batches, sq, hq, d}, nan_o);
    tp::attention_forward<T>(dev, q, k, v, o, opt);
    out = o.to_host();
  }
  std::vector<double> ref_o, ref_lse;
  reference::attention(hqv, hkv_k, hkv_v, hq, hkv, d, cu_q, cu_k, 1.0 / std::sqrt(static_cast<double>(d)), mask, ref_o,
                       ref_lse);
  EXPECT_LT(test::rel_error(out, ref_o), 1e-2) << "O";
  // LSE: [Hq, total_q] for varlen, [B, Hq, Sq] for fixed lengths.
  const auto got = lse.to_host();
  int bad = 0;
  for (int b = 0; b < batches; ++b)
    for (int h = 0; h < hq; ++h)
      for (int i = 0; i < len.q[b]; ++i) {
        const double want = ref_lse[static_cast<std::size_t>(h * total_q + cu_q[b] + i)];
        const float g = got[varlen ? h * total_q + cu_q[b] + i : (b * hq + h) * len.q[0] + i];
        const bool ok = std::isinf(want) ? std::isinf(g) && g < 0 : std::abs(g - want) <= 2e-3 * std::max(1.0, std::abs(want));
        if (!ok && bad++ < 5) ADD_FAILURE() << "LSE of sequence " << b << " head " << h << " row " << i << ": " << g
                                            << ", want " << want;
      }
}

template <class T>
void check_fixed(int b, int sq, int sk, int hq, int hkv, int d, reference::attention_mask mask = {}) {
  check<T>({std::vector<int>(b, sq), std::vector<int>(b, sk)}, hq, hkv, d, mask);
}

constexpr reference::attention_mask causal{.causal = true};

}  // namespace

TEST(Attention, HeadDimsAndTypes) {
  check_fixed<tp::bf16>(1, 200, 200, 1, 1, 64);
  check_fixed<tp::bf16>(1, 200, 200, 1, 1, 128);
  check_fixed<tp::bf16>(1, 130, 200, 1, 1, 256);
  check_fixed<tp::f16>(1, 200, 200, 1, 1, 128);
  check_fixed<tp::f16>(1, 65, 100, 1, 1, 64);
  check_fixed<tp::f16>(1, 65, 170, 1, 1, 256, causal);
}

TEST(Attention, CausalAndWindows) {
  check_fixed<tp::bf16>(1, 200, 200, 1, 1, 64, causal);
  check_fixed<tp::f16>(1, 200, 200, 1, 1, 128, causal);
  check_fixed<tp::bf16>(1, 65, 200, 1, 1, 64, causal);   // Sq < Sk: the diagonal starts at key 135
  check_fixed<tp::bf16>(1, 200, 65, 1, 1, 64, causal);   // Sq > Sk: the first 135 rows see no key
  check_fixed<tp::bf16>(1, 300, 300, 1, 1, 64, {.window_left = 40, .window_right = 7});
  check_fixed<tp::bf16>(1, 150, 270, 1, 1, 128, {.window_left = 100, .window_right = -1});
  check_fixed<tp::bf16>(1, 270, 150, 1, 1, 64, {.window_left = -1, .window_right = 3});
  check_fixed<tp::bf16>(1, 200, 200, 1, 1, 64, {.causal = true, .window_left = 130});
}

TEST(Attention, GroupedQueryHeads) {
  check_fixed<tp::bf16>(2, 70, 90, 2, 2, 64);
  check_fixed<tp::bf16>(1, 70, 150, 4, 1, 64, causal);
  check_fixed<tp::f16>(1, 33, 140, 8, 1, 128);
}

TEST(Attention, OddLengthsDecodeAndShortKeys) {
  check_fixed<tp::bf16>(3, 1, 1000, 2, 1, 64);  // decode
  check_fixed<tp::bf16>(2, 7, 7, 1, 1, 128, causal);
  check_fixed<tp::bf16>(1, 1, 1, 1, 1, 64);
  check_fixed<tp::bf16>(2, 65, 7, 1, 1, 64);  // Sk below one KV block
  check_fixed<tp::bf16>(2, 65, 0, 2, 1, 64);  // no keys: O = 0, LSE = -inf
  check_fixed<tp::bf16>(2, 300, 129, 3, 1, 64, causal);  // 18 tiles over 4 CTAs in the interpreter
}

TEST(Attention, VariableLengthBatches) {
  check<tp::bf16>({{0, 1, 130, 65, 0, 7}, {5, 1, 200, 0, 3, 7}}, 2, 1, 64, {}, true);
  check<tp::bf16>({{0, 1, 130, 65, 0, 7}, {5, 1, 200, 0, 3, 7}}, 2, 1, 64, causal, true);
  check<tp::f16>({{200, 1, 64}, {100, 129, 1}}, 1, 1, 128, {.window_left = 20, .window_right = 10}, true);
  check<tp::bf16>({{1, 140}, {1, 70}}, 1, 1, 256, causal, true);
  check<tp::bf16>({{3, 70}, {0, 0}}, 1, 1, 64, {}, true);  // no sequence has keys
}

TEST(Attention, LargeOnTheGpu) {
  if (!test::on_gpu()) GTEST_SKIP() << "GPU sizes";
  check_fixed<tp::bf16>(2, 1000, 1000, 4, 2, 128, causal);
  check_fixed<tp::f16>(1, 2048, 2048, 2, 2, 64);
  check_fixed<tp::bf16>(1, 1000, 1000, 2, 1, 256, causal);
  check_fixed<tp::bf16>(4, 1, 4096, 8, 1, 128);
  check<tp::bf16>({{1000, 0, 513, 1}, {700, 10, 2000, 1}}, 4, 1, 128, causal, true);
}

TEST(Attention, BadInputIsReported) {
  const auto& dev = test::dev();
  auto t = [&](long long b, long long s, long long h, long long d) { return tp::tensor<tp::bf16, 4>(dev, {b, s, h, d}); };
  auto q = t(1, 64, 4, 64), k = t(1, 64, 2, 64), v = t(1, 64, 2, 64), o = t(1, 64, 4, 64);
  auto run = [&](auto&&... a) { return test::error_of([&] { tp::attention_forward<tp::bf16>(dev, a...); }); };
  EXPECT_NE(run(t(1, 64, 4, 96), t(1, 64, 2, 96), t(1, 64, 2, 96), t(1, 64, 4, 96)).find("head dim 96 is not supported"),
            std::string::npos);
  EXPECT_NE(run(q, t(1, 64, 3, 64), t(1, 64, 3, 64), o).find("not a multiple of 3 KV heads"), std::string::npos);
  EXPECT_NE(run(q, k, t(1, 63, 2, 64), o).find("k and v differ"), std::string::npos);
  EXPECT_NE(run(q, k, v, t(1, 65, 4, 64)).find("o and q differ"), std::string::npos);
  EXPECT_NE(run(q, t(1, 64, 2, 128), t(1, 64, 2, 128), o).find("head dims differ"), std::string::npos);
  auto big = t(1, 64, 5, 64);
  tp::tensor_view<tp::bf16, 4> skewed = big.view();
  skewed.shape = {1, 64, 4, 64}, skewed.stride = {64 * 260, 260, 65, 1};  // heads 130 bytes apart
  EXPECT_NE(run(skewed, k, v, o).find("not a multiple of 16 bytes"), std::string::npos);
}

TEST(Attention, BadSequenceOffsetsAreReportedByTheKernel) {
  if (test::on_gpu()) GTEST_SKIP() << "device-side checks trap on the GPU; the interpreter reports them";
  const auto& dev = test::dev();
  auto t = [&](long long rows) { return tp::tensor<tp::bf16, 3>(dev, {rows, 1, 64}); };
  auto q = t(50), k = t(64), v = t(64), o = t(50);
  auto run = [&](std::vector<int> cu_q, std::vector<int> cu_k, int max_sq) {
    auto cq = tp::tensor<int, 1>::from_host(dev, {static_cast<long long>(cu_q.size())}, cu_q);
    auto ck = tp::tensor<int, 1>::from_host(dev, {static_cast<long long>(cu_k.size())}, cu_k);
    return test::error_of([&] {
      tp::attention_forward_varlen<tp::bf16>(dev, q, k, v, o, cq.data(), ck.data(), static_cast<int>(cu_q.size()) - 1,
                                             max_sq);
    });
  };
  EXPECT_EQ(run({0, 20, 50}, {0, 30, 64}, 30), "");
  EXPECT_NE(run({0, 100}, {0, 64}, 100).find("sequence 0 is rows [0, 100) of q, which has 50"), std::string::npos);
  EXPECT_NE(run({-5, 20}, {0, 64}, 25).find("sequence 0 is rows [-5, 20) of q"), std::string::npos);
  EXPECT_NE(run({0, 40, 20}, {0, 10, 20}, 40).find("sequence 1 is rows [40, 20) of q"), std::string::npos);
  EXPECT_NE(run({0, 50}, {0, 100}, 50).find("sequence 0 is rows [0, 100) of k and v, which have 64"), std::string::npos);
  EXPECT_NE(run({0, 50}, {0, 64}, 40).find("sequence 0 has 50 query rows, more than max_seqlen_q = 40"),
            std::string::npos);
}
