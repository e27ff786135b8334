// Decode and short-query attention (kernels/attention_decode.cuh, through tp::attention_forward
// and attention_forward_varlen when max Sq <= 16) against a float64 reference on fresh random
// inputs, output and log-sum-exp: query rows 1, 2, 7, 16 times GQA ratios 1, 4, 8, 16 (up
// to four row tiles of packed heads), KV lengths 0, 1, 63, 64, 65 around the KV block,
// 1 to 64 splits with empty ones, causal and sliding windows, bf16 and f16, head dims 64,
// 128, 256, ragged varlen batches, and random problems mixing all of these; the same bytes
// whichever split combines and after a launch on the same workspace; bad split options and
// offsets reported. Outputs start as NaN, so a row the kernel forgets, or writes outside its
// sequence, shows. fp8 (e4m3) K and V with scales per tensor and per KV head of very
// different magnitudes, against the float64 reference on the values the codes stand for
// (so the check measures the kernel, not the quantisation), and against the bf16 / f16
// kernel given those values: the same bytes when the scales are powers of two (the values
// are then exact in bf16 and every product scales exactly), bf16's tolerance otherwise.
#include "attention_instances.hpp"
#include "fp8_kv.hpp"
#include "test_util.hpp"

#include <tilepipe/kernels/attention.cuh>

#include "examples/common/attention_reference.hpp"

#include <cstring>
#include <type_traits>

namespace {

struct lengths {
  std::vector<int> q, k;  // per sequence
};

std::vector<int> prefix(const std::vector<int>& n) {
  std::vector<int> cu{0};
  for (int x : n) cu.push_back(cu.back() + x);
  return cu;
}

/// A run's outputs: O, and the LSE ([B, Hq, Sq], or [Hq, total_q] for varlen).
template <class T>
struct outputs {
  std::vector<T> o;
  std::vector<float> lse;
};

struct problem {
  lengths len;
  int hq = 1, hkv = 1, d = 64;
  reference::attention_mask mask{};
  bool varlen = false;
  int splits = 0;  // attention_options::num_splits
};

/// Row tiles of 64 packed rows per (sequence, KV head): what a workspace for `splits` splits needs.
int workspace_slots(const tp::device& dev, const problem& p, int splits) {
  const int max_sq = *std::max_element(p.len.q.begin(), p.len.q.end());
  const int tiles = static_cast<int>(p.len.q.size()) * p.hkv * ((max_sq * p.hq / p.hkv + 63) / 64);
  return std::max(tp::attention_partial_slots(dev), tiles * std::max(splits, 1));
}

template <class T>
struct inputs {
  std::vector<T> q, k, v;
  explicit inputs(const problem& p) {
    const long long total_q = prefix(p.len.q).back(), total_k = prefix(p.len.k).back();
    q = test::random_values<T>(static_cast<std::size_t>(total_q * p.hq * p.d), test::fresh_seed(), -2, 2);
    k = test::random_values<T>(static_cast<std::size_t>(total_k * p.hkv * p.d), test::fresh_seed(), -2, 2);
    v = test::random_values<T>(static_cast<std::size_t>(total_k * p.hkv * p.d));
  }
};

/// Runs attention on `dev` with the workspace `ws` (empty: none); K and V of type KV (T, or
/// fp8_e4m3 with its scales).
template <class T, class KV>
outputs<T> run(const tp::device& dev, const problem& p, const std::vector<T>& q_in, const std::vector<KV>& k_in,
               const std::vector<KV>& v_in, tp::partials_ref ws, const test::fp8_scales* scales = nullptr) {
  const auto cu_q = prefix(p.len.q), cu_k = prefix(p.len.k);
  const int batches = static_cast<int>(p.len.q.size()), total_q = cu_q.back(), total_k = cu_k.back();
  const std::vector<T> nan_o(static_cast<std::size_t>(total_q) * p.hq * p.d, tp::from_float<T>(NAN));
  auto lse = tp::tensor<float, 1>::from_host(dev, {static_cast<long long>(total_q) * p.hq},
                                             std::vector<float>(static_cast<std::size_t>(total_q) * p.hq, NAN));
  tp::attention_options opt{.causal = p.mask.causal, .window_left = p.mask.window_left,
                            .window_right = p.mask.window_right, .lse = lse.data(), .num_splits = p.splits,
                            .partials = ws};
  tp::tensor<float, 1> k_scale, v_scale;
  if (scales) {
    k_scale = tp::tensor<float, 1>::from_host(dev, {static_cast<long long>(scales->k.size())}, scales->k);
    v_scale = tp::tensor<float, 1>::from_host(dev, {static_cast<long long>(scales->v.size())}, scales->v);
    opt.k_scale = k_scale.data(), opt.v_scale = v_scale.data(), opt.kv_scale_per_head = scales->per_head;
  }
  outputs<T> out;
  if (p.varlen) {
    auto q = tp::tensor<T, 3>::from_host(dev, {total_q, p.hq, p.d}, q_in);
    auto k = tp::tensor<KV, 3>::from_host(dev, {total_k, p.hkv, p.d}, k_in);
    auto v = tp::tensor<KV, 3>::from_host(dev, {total_k, p.hkv, p.d}, v_in);
    auto o = tp::tensor<T, 3>::from_host(dev, {total_q, p.hq, p.d}, nan_o);
    auto cq = tp::tensor<int, 1>::from_host(dev, {batches + 1LL}, cu_q);
    auto ck = tp::tensor<int, 1>::from_host(dev, {batches + 1LL}, cu_k);
    const int max_sq = *std::max_element(p.len.q.begin(), p.len.q.end());
    tp::attention_forward_varlen<T>(dev, q, k, v, o, cq.data(), ck.data(), batches, max_sq, opt);
    out.o = o.to_host();
  } else {
    const long long sq = p.len.q[0], sk = p.len.k[0];
    auto q = tp::tensor<T, 4>::from_host(dev, {batches, sq, p.hq, p.d}, q_in);
    auto k = tp::tensor<KV, 4>::from_host(dev, {batches, sk, p.hkv, p.d}, k_in);
    auto v = tp::tensor<KV, 4>::from_host(dev, {batches, sk, p.hkv, p.d}, v_in);
    auto o = tp::tensor<T, 4>::from_host(dev, {batches, sq, p.hq, p.d}, nan_o);
    tp::attention_forward<T>(dev, q, k, v, o, opt);
    out.o = o.to_host();
  }
  out.lse = lse.to_host();
  return out;
}

/// Compares a run's O and LSE with the float64 reference on the values q, k and v.
template <class T>
void expect_matches_reference(const problem& p, const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, const outputs<T>& out) {
  const auto cu_q = prefix(p.len.q), cu_k = prefix(p.len.k);
  const int batches = static_cast<int>(p.len.q.size()), total_q = cu_q.back();
  std::vector<double> ref_o, ref_lse;
  reference::attention(q, k, v, p.hq, p.hkv, p.d, cu_q, cu_k, 1.0 / std::sqrt(static_cast<double>(p.d)), p.mask, ref_o,
                       ref_lse);
  EXPECT_LT(test::rel_error(out.o, ref_o), 1e-2) << "O";
  int bad = 0;
  for (int b = 0; b < batches; ++b)
    for (int h = 0; h < p.hq; ++h)
      for (int i = 0; i < p.len.q[b]; ++i) {
        const double want = ref_lse[static_cast<std::size_t>(h * total_q + cu_q[b] + i)];
        const float g = out.lse[p.varlen ? h * total_q + cu_q[b] + i : (b * p.hq + h) * p.len.q[0] + i];
        const bool ok = std::isinf(want) ? std::isinf(g) && g < 0 : std::abs(g - want) <= 2e-3 * std::max(1.0, std::abs(want));
        if (!ok && bad++ < 5) ADD_FAILURE() << "LSE of sequence " << b << " head " << h << " row " << i << ": " << g
                                            << ", want " << want;
      }
}

template <class T>
void expect_matches_reference(const problem& p, const inputs<T>& in, const outputs<T>& out) {
  expect_matches_reference(p, test::as_floats(in.q), test::as_floats(in.k), test::as_floats(in.v), out);
}

/// What a check prints about its problem.
::testing::Message describe(const problem& p) {
  ::testing::Message what;
  what << "sq";
  for (int x : p.len.q) what << " " << x;
  what << ", sk";
  for (int x : p.len.k) what << " " << x;
  what << ", hq " << p.hq << " hkv " << p.hkv << " d " << p.d << " splits " << p.splits << (p.mask.causal ? " causal" : "")
       << " window " << p.mask.window_left << " " << p.mask.window_right << (p.varlen ? " varlen" : "");
  return what;
}

/// Runs a problem on fresh random inputs (with a workspace when it splits) and checks it.
template <class T>
void check(const problem& p) {
  SCOPED_TRACE(describe(p));
  const auto& dev = test::dev();
  const inputs<T> in(p);
  const tp::partials_buffer ws(dev, workspace_slots(dev, p, p.splits), tp::attention_partial_floats(p.d));
  expect_matches_reference(p, in, run(dev, p, in.q, in.k, in.v, ws.ref()));
}

/// fp8 K and V of a problem with fresh random values: scales per KV head or per tensor.
struct fp8_inputs {
  test::fp8_tensor k, v;
  fp8_inputs(const problem& p, bool per_head, bool power_of_two, double min_scale = 0.0)
      : k(elements(p), p.hkv, p.d, per_head, power_of_two, test::fresh_seed(), min_scale),
        v(elements(p), p.hkv, p.d, per_head, power_of_two, test::fresh_seed(), min_scale) {}
  test::fp8_scales scales() const { return {k.scale, v.scale, k.scale.size() > 1}; }
  static std::size_t elements(const problem& p) { return static_cast<std::size_t>(prefix(p.len.k).back()) * p.hkv * p.d; }
};

/// A problem over fp8 K and V against the float64 reference on the values they stand for.
template <class T>
void check_fp8(const problem& p, bool per_head) {
  SCOPED_TRACE(describe(p) << (per_head ? " fp8 scales per head" : " fp8 scale per tensor"));
  const auto& dev = test::dev();
  const inputs<T> in(p);
  const fp8_inputs kv(p, per_head, false);
  const auto scales = kv.scales();
  const tp::partials_buffer ws(dev, workspace_slots(dev, p, p.splits), tp::attention_partial_floats(p.d));
  expect_matches_reference(p, test::as_floats(in.q), kv.k.values, kv.v.values,
                           run(dev, p, in.q, kv.k.codes, kv.v.codes, ws.ref(), &scales));
}

problem fixed(int b, int sq, int sk, int hq, int hkv, int d, int splits, reference::attention_mask mask = {}) {
  return {{std::vector<int>(b, sq), std::vector<int>(b, sk)}, hq, hkv, d, mask, false, splits};
}

template <class T>
bool bitwise_equal(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

constexpr reference::attention_mask causal{.causal = true};

}  // namespace

// Packed rows: sq x G of 1 .. 256 (up to four row tiles), with and without splits.
TEST(AttentionDecode, QueryRowsTimesGroupedHeads) {
  for (int sq : {1, 2, 7, 16})
    for (int group : {1, 4, 8, 16}) {
      check<tp::bf16>(fixed(2, sq, 150, group, 1, 64, 1));
      check<tp::bf16>(fixed(1, sq, 150, 2 * group, 2, 64, 2, causal));
    }
}

TEST(AttentionDecode, KeyLengthsAroundABlock) {
  for (int sk : {0, 1, 63, 64, 65, 129})
    for (int splits : {1, 3}) check<tp::bf16>(fixed(2, 2, sk, 4, 2, 64, splits, sk % 2 ? causal : reference::attention_mask{}));
}

// 1 to 64 splits of 3 KV blocks: most splits empty; a tile whose every split is empty.
TEST(AttentionDecode, SplitsWithEmptyOnes) {
  for (int splits : {1, 2, 3, 4, 7, 64}) check<tp::bf16>(fixed(1, 1, 300, 8, 1, 64, splits));
  check<tp::f16>(fixed(2, 3, 300, 4, 2, 64, 64, causal));
  check<tp::bf16>(fixed(1, 2, 0, 2, 1, 64, 5));  // no keys at all: O = 0, LSE = -inf
  check<tp::bf16>(fixed(3, 1, 2000, 4, 1, 64, 0));  // the kernel's own choice
}

TEST(AttentionDecode, CausalAndWindows) {
  check<tp::bf16>(fixed(1, 16, 16, 4, 1, 64, 1, causal));  // Sq = Sk: row i sees keys 0 .. i
  check<tp::bf16>(fixed(1, 16, 8, 2, 1, 64, 2, causal));   // Sq > Sk: the first 8 rows see no key
  check<tp::bf16>(fixed(1, 7, 400, 4, 1, 64, 3, {.window_left = 150, .window_right = -1}));
  check<tp::bf16>(fixed(1, 7, 400, 4, 1, 64, 4, {.window_left = 100, .window_right = 2}));
  check<tp::f16>(fixed(1, 5, 300, 2, 2, 64, 3, {.causal = true, .window_left = 70}));
}

TEST(AttentionDecode, HeadDimsAndTypes) {
  check<tp::bf16>(fixed(1, 1, 200, 4, 1, 128, 2));
  check<tp::f16>(fixed(1, 3, 200, 8, 2, 128, 3, causal));
  check<tp::bf16>(fixed(1, 2, 150, 4, 1, 256, 2, causal));
  check<tp::f16>(fixed(1, 1, 150, 2, 1, 256, 1));
}

TEST(AttentionDecode, VariableLengthBatches) {
  problem p{{{1, 3, 0, 16, 2, 1}, {0, 64, 5, 200, 65, 1}}, 8, 2, 64, {}, true, 4};
  check<tp::bf16>(p);
  p.mask = causal, p.splits = 1;
  check<tp::bf16>(p);
  check<tp::f16>({{{2, 7, 1}, {300, 0, 63}}, 4, 1, 128, causal, true, 64});
  check<tp::bf16>({{{1, 1}, {0, 0}}, 4, 4, 64, {}, true, 3});  // no sequence has keys
}

// The tile's query rows come by TMA where they are consecutive rows of q seen as
// [B, Sq Hq, D] (one query position, or one KV head: MQA), else the compute warpgroup gathers
// them into the same slot over the block TMA brought: MQA problems with q stored
// [B, Hq, Sq, D] (its positions and heads do not merge into one dimension) take the gather
// and give the same bytes as q stored [B, Sq, Hq, D], and both match the reference.
TEST(AttentionDecode, QueryRowsByTmaOrGathered) {
  const auto& dev = test::dev();
  for (const problem& p : {fixed(2, 16, 150, 4, 1, 128, 2, causal), fixed(1, 7, 200, 8, 1, 64, 3),
                           fixed(1, 3, 130, 32, 1, 64, 1)}) {
    SCOPED_TRACE(describe(p));
    const inputs<tp::bf16> in(p);
    const tp::partials_buffer ws(dev, workspace_slots(dev, p, p.splits), tp::attention_partial_floats(p.d));
    const outputs<tp::bf16> by_tma = run(dev, p, in.q, in.k, in.v, ws.ref());
    expect_matches_reference(p, in, by_tma);
    const long long b = static_cast<long long>(p.len.q.size()), sq = p.len.q[0], sk = p.len.k[0], hq = p.hq, d = p.d;
    std::vector<tp::bf16> heads_first(in.q.size());
    for (long long i = 0; i < b; ++i)
      for (long long t = 0; t < sq; ++t)
        for (long long h = 0; h < hq; ++h)
          std::copy_n(in.q.begin() + ((i * sq + t) * hq + h) * d, d, heads_first.begin() + ((i * hq + h) * sq + t) * d);
    auto q_store = tp::tensor<tp::bf16, 4>::from_host(dev, {b, hq, sq, d}, heads_first);
    const tp::tensor_view<tp::bf16, 4> q{q_store.data(), {b, sq, hq, d}, {hq * sq * d, d, sq * d, 1}, dev.is_gpu()};
    auto k = tp::tensor<tp::bf16, 4>::from_host(dev, {b, sk, p.hkv, d}, in.k);
    auto v = tp::tensor<tp::bf16, 4>::from_host(dev, {b, sk, p.hkv, d}, in.v);
    auto o = tp::tensor<tp::bf16, 4>::from_host(
        dev, {b, sq, hq, d}, std::vector<tp::bf16>(static_cast<std::size_t>(b * sq * hq * d), tp::from_float<tp::bf16>(NAN)));
    const std::size_t lse_rows = static_cast<std::size_t>(b * hq * sq);
    auto lse = tp::tensor<float, 1>::from_host(dev, {b * hq * sq}, std::vector<float>(lse_rows, NAN));
    tp::attention_forward<tp::bf16>(dev, q, k, v, o,
                                    {.causal = p.mask.causal, .lse = lse.data(), .num_splits = p.splits, .partials = ws.ref()});
    EXPECT_TRUE(bitwise_equal(o.to_host(), by_tma.o)) << "O";
    EXPECT_TRUE(bitwise_equal(lse.to_host(), by_tma.lse)) << "LSE";
  }
}

// K and V's tensor maps promote each request to a box row's bytes (64 to 256), not the
// default 256: a bf16 block at head dim 128 moves as two 128-byte columns of each key's row,
// which promoted to 256 bytes read HBM 8-12% slower (docs/design.md, "L2 promotion").
TEST(AttentionDecode, KvRequestsPromotedToABoxRow) {
  using tp::fp8_e4m3;
  static_assert(tp::attention_decode_kernel<tp::bf16, 128>::kv_tile::l2_promotion_bytes == 128);
  static_assert(tp::attention_decode_kernel<tp::bf16, 64>::kv_tile::l2_promotion_bytes == 128);
  static_assert(tp::attention_decode_kernel<tp::bf16, 256, 64>::kv_tile::l2_promotion_bytes == 128);
  static_assert(tp::attention_decode_kernel<tp::bf16, 128, 128, 16>::kv_tile::l2_promotion_bytes == 128);
  static_assert(tp::attention_decode_kernel<tp::bf16, 64, 128, 0, fp8_e4m3>::kv_tile::l2_promotion_bytes == 64);
  static_assert(tp::attention_decode_kernel<tp::bf16, 128, 128, 0, fp8_e4m3>::kv_tile::l2_promotion_bytes == 128);
  static_assert(tp::attention_decode_kernel<tp::bf16, 256, 64, 0, fp8_e4m3>::kv_tile::l2_promotion_bytes == 256);
  SUCCEED();
}

// Whichever split of a tile arrives last combines, in split order: shuffled CTA orders
// (in the interpreter; other splits then arrive last) and copy orders give the same bytes,
// and so does a second launch on the same workspace (the counters were cleared).
TEST(AttentionDecode, CombineIndependentOfCtaOrder) {
  const problem p{{{1, 2, 16}, {500, 37, 260}}, 8, 2, 64, causal, true, 6};
  const inputs<tp::bf16> in(p);
  const auto& dev = test::dev();
  const tp::partials_buffer ws(dev, workspace_slots(dev, p, p.splits), tp::attention_partial_floats(p.d));
  const auto first = run(dev, p, in.q, in.k, in.v, ws.ref());
  expect_matches_reference(p, in, first);
  const auto again = run(dev, p, in.q, in.k, in.v, ws.ref());
  EXPECT_TRUE(bitwise_equal(first.o, again.o) && bitwise_equal(first.lse, again.lse)) << "the same launch again";
  if (test::on_gpu()) return;
  tp::device shuffled = dev;
  shuffled.interpreter.shuffle_ctas = true;
  shuffled.interpreter.copies = tp::interpret::copy_mode::shuffled;
  for (std::uint64_t seed : {3u, 4u}) {
    shuffled.interpreter.seed = seed;
    const auto other = run(shuffled, p, in.q, in.k, in.v, ws.ref());
    EXPECT_TRUE(bitwise_equal(first.o, other.o) && bitwise_equal(first.lse, other.lse)) << "CTA order seed " << seed;
  }
}

// Random problems: lengths, groups, splits, masks, head dims and types drawn together.
TEST(AttentionDecode, RandomProblems) {
  std::mt19937 rng(static_cast<unsigned>(test::fresh_seed()));
  auto draw = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int n = 0; n < 24; ++n) {
    problem p;
    const int batches = draw(1, 3), max_sq = draw(1, 16);
    p.varlen = draw(0, 1) == 1;
    for (int b = 0; b < batches; ++b) {
      p.len.q.push_back(p.varlen ? draw(0, max_sq) : max_sq);
      p.len.k.push_back(p.varlen || b == 0 ? draw(0, 600) : p.len.k[0]);
    }
    p.len.q[0] = max_sq;  // max_seqlen_q is reached
    p.hkv = draw(1, 2);
    p.hq = p.hkv * std::vector<int>{1, 2, 4, 8, 16}[draw(0, 4)];
    p.d = draw(0, 1) ? 64 : 128;
    p.splits = draw(0, 3) == 0 ? 0 : draw(1, 12);
    switch (draw(0, 3)) {
      case 1: p.mask = causal; break;
      case 2: p.mask = {.window_left = draw(0, 300), .window_right = draw(-1, 20)}; break;
      case 3: p.mask = {.causal = true, .window_left = draw(0, 300)}; break;
      default: break;
    }
    if (draw(0, 1)) check<tp::bf16>(p);
    else check<tp::f16>(p);
  }
}

TEST(AttentionDecode, LargeOnTheGpu) {
  if (!test::on_gpu()) GTEST_SKIP() << "GPU sizes";
  check<tp::bf16>(fixed(2, 1, 131072, 32, 8, 128, 0));
  check<tp::bf16>(fixed(1, 4, 32768, 16, 1, 128, 64, causal));
  check<tp::f16>(fixed(8, 16, 8192, 16, 2, 64, 0, causal));
  check<tp::bf16>(fixed(3, 2, 20000, 8, 1, 256, 7, {.window_left = 4096}));
  check<tp::bf16>({{{1, 16, 3, 0}, {100000, 4096, 1, 70000}}, 32, 4, 128, causal, true, 0});
}

TEST(AttentionDecode, BadSplitsAreReported) {
  const auto& dev = test::dev();
  auto t = [&](long long b, long long s, long long h) { return tp::tensor<tp::bf16, 4>(dev, {b, s, h, 64}); };
  auto q = t(2, 1, 8), k = t(2, 300, 2), v = t(2, 300, 2), o = t(2, 1, 8);
  auto error = [&](int splits, tp::partials_ref ws) {
    return test::error_of([&] { tp::attention_forward<tp::bf16>(dev, q, k, v, o, {.num_splits = splits, .partials = ws}); });
  };
  EXPECT_NE(error(-1, {}).find("num_splits is 0 (chosen from the problem) or positive, got -1"), std::string::npos);
  EXPECT_NE(error(2, {}).find("num_splits = 2 needs attention_options::partials, a workspace of at least 8 slots of "
                              "4160 floats (tp::partials_buffer); it has 0 of 0"),
            std::string::npos);
  const tp::partials_buffer small(dev, 7, tp::attention_partial_floats(64)), narrow(dev, 64, 4096);
  EXPECT_NE(error(2, small.ref()).find("it has 7 of 4160"), std::string::npos);
  EXPECT_NE(error(2, narrow.ref()).find("it has 64 of 4096"), std::string::npos);
  EXPECT_EQ(error(0, {}), "");  // without a workspace the kernel does not split
  EXPECT_EQ(error(1, {}), "");
}

TEST(AttentionDecode, BadSequenceOffsetsAreReportedByTheKernel) {
  if (test::on_gpu()) GTEST_SKIP() << "device-side checks trap on the GPU; the interpreter reports them";
  const auto& dev = test::dev();
  auto t = [&](long long rows) { return tp::tensor<tp::bf16, 3>(dev, {rows, 4, 64}); };
  auto q = t(10), o = t(10);
  auto k = tp::tensor<tp::bf16, 3>(dev, {64, 1, 64}), v = tp::tensor<tp::bf16, 3>(dev, {64, 1, 64});
  const tp::partials_buffer ws(dev, 64, tp::attention_partial_floats(64));
  auto run_offsets = [&](std::vector<int> cu_q, std::vector<int> cu_k, int max_sq) {
    auto cq = tp::tensor<int, 1>::from_host(dev, {static_cast<long long>(cu_q.size())}, cu_q);
    auto ck = tp::tensor<int, 1>::from_host(dev, {static_cast<long long>(cu_k.size())}, cu_k);
    return test::error_of([&] {
      tp::attention_forward_varlen<tp::bf16>(dev, q, k, v, o, cq.data(), ck.data(), static_cast<int>(cu_q.size()) - 1,
                                             max_sq, {.num_splits = 3, .partials = ws.ref()});
    });
  };
  EXPECT_EQ(run_offsets({0, 4, 10}, {0, 30, 64}, 6), "");
  EXPECT_NE(run_offsets({0, 12}, {0, 64}, 12).find("sequence 0 is rows [0, 12) of q, which has 10"), std::string::npos);
  EXPECT_NE(run_offsets({0, 6, 3}, {0, 10, 20}, 6).find("sequence 1 is rows [6, 3) of q"), std::string::npos);
  EXPECT_NE(run_offsets({0, 10}, {0, 65}, 10).find("sequence 0 is rows [0, 65) of k and v, which have 64"),
            std::string::npos);
  EXPECT_NE(run_offsets({0, 10}, {0, 64}, 8).find("sequence 0 has 10 query rows, more than max_seqlen_q = 8"),
            std::string::npos);
}

// ---- fp8 (e4m3) K and V ----------------------------------------------------------------

TEST(AttentionDecodeFp8Kv, QueryRowsTimesGroupedHeads) {
  for (int sq : {1, 2, 7, 16})
    for (int group : {1, 4, 8, 16}) {
      check_fp8<tp::bf16>(fixed(2, sq, 150, group, 1, 64, 1), sq % 2 == 0);
      check_fp8<tp::bf16>(fixed(1, sq, 150, 2 * group, 2, 64, 2, causal), true);
    }
}

TEST(AttentionDecodeFp8Kv, KeyLengthsAroundABlockAndSplits) {
  for (int sk : {0, 1, 63, 64, 65, 129})
    for (int splits : {1, 3})
      check_fp8<tp::bf16>(fixed(2, 2, sk, 4, 2, 64, splits, sk % 2 ? causal : reference::attention_mask{}), true);
  for (int splits : {2, 7, 64}) check_fp8<tp::bf16>(fixed(1, 1, 300, 8, 1, 64, splits), splits % 2 == 0);
  check_fp8<tp::bf16>(fixed(3, 1, 2000, 4, 2, 64, 0), true);  // the kernel's own split count
}

TEST(AttentionDecodeFp8Kv, HeadDimsTypesMasksAndVarlen) {
  check_fp8<tp::bf16>(fixed(1, 1, 200, 4, 2, 128, 2), true);
  check_fp8<tp::f16>(fixed(1, 3, 200, 8, 2, 128, 3, causal), true);
  check_fp8<tp::bf16>(fixed(1, 2, 150, 4, 2, 256, 2, causal), true);
  check_fp8<tp::f16>(fixed(1, 1, 150, 2, 1, 256, 1), false);
  check_fp8<tp::bf16>(fixed(1, 7, 400, 4, 1, 64, 4, {.window_left = 100, .window_right = 2}), false);
  check_fp8<tp::f16>({{{1, 3, 0, 16, 2}, {0, 64, 5, 200, 65}}, 8, 2, 64, causal, true, 4}, true);
  // Longer query sequences without a cache run on the decode kernel too (no fp8 prefill kernel).
  check_fp8<tp::bf16>(fixed(2, 40, 90, 2, 2, 64, 2, causal), true);
  check_fp8<tp::f16>({{{70, 1}, {100, 33}}, 4, 2, 128, {}, true, 1}, false);
}

// The fp8 kernel against the bf16 / f16 kernel given the values the codes stand for, with
// power-of-two scales: those values are exact in 16 bits and scaling every product by a power
// of two changes no rounding, so with f16 queries the two kernels give the same bytes
// (splits, masks and a varlen batch included). With bf16 queries the fp8 kernel packs P as
// f16 for P V (its V copies are f16: docs/design.md), the 16-bit kernel as bf16: the LSE
// (from the f32 probabilities) is the same bytes, O is within P's bf16 rounding. f16 holds
// them only from a scale of 2^-15 up (e4m3's smallest step, 2^-9, times the scale must reach
// f16's, 2^-24): the f16 runs take no smaller one. At head dims 64 and 128 the fp8 kernel
// deals a split's KV blocks to two warpgroups and merges their softmax states: the sum runs
// in the 16-bit kernel's order only where a split holds one KV block (same_order, the
// interpreter's sizes); longer splits, and head dim 256, are compared within f32 rounding.
// (Scales of any value are checked against float64 in check_fp8: with
// them the 16-bit kernel's inputs are rounded, and at head dim 256 the two kernels' results
// differed by up to 1.4% from that rounding alone, so they are not compared with each other.)
template <class T>
void check_fp8_against_16_bits(const problem& p, bool per_head, bool same_order = true) {
  SCOPED_TRACE(describe(p) << (per_head ? " per head" : " per tensor"));
  const auto& dev = test::dev();
  const inputs<T> in(p);
  const fp8_inputs kv(p, per_head, true, std::is_same_v<T, tp::f16> ? std::exp2(-15.0) : 0.0);
  const auto scales = kv.scales();
  auto as_t = [](const std::vector<float>& x) {
    std::vector<T> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = tp::from_float<T>(x[i]);
    return y;
  };
  for (const auto* values : {&kv.k.values, &kv.v.values})  // the premise of the comparison
    ASSERT_EQ(test::as_floats(as_t(*values)), *values) << "the dequantised values are not exact in 16 bits";
  const tp::partials_buffer ws(dev, workspace_slots(dev, p, p.splits), tp::attention_partial_floats(p.d));
  const auto fp8 = run(dev, p, in.q, kv.k.codes, kv.v.codes, ws.ref(), &scales);
  const auto wide = run(dev, p, in.q, as_t(kv.k.values), as_t(kv.v.values), ws.ref());
  // O: the same bytes where P V's operands have one type and the sums one order; else P's
  // rounding or f32 rounding only. The LSE (from the f32 probabilities): the same bytes in
  // the same order.
  constexpr bool same_p = std::is_same_v<T, tp::f16>;
  const auto wide_o = test::as_floats(wide.o);
  if (same_order && same_p) {
    EXPECT_TRUE(bitwise_equal(fp8.o, wide.o)) << "O";
  } else {
    EXPECT_LT(test::rel_error(fp8.o, std::vector<double>(wide_o.begin(), wide_o.end())), 1e-2) << "O";
  }
  if (same_order) {
    EXPECT_TRUE(bitwise_equal(fp8.lse, wide.lse)) << "LSE";
  } else {
    EXPECT_LT(test::rel_error(fp8.lse, std::vector<double>(wide.lse.begin(), wide.lse.end())), 1e-5) << "LSE";
  }
}

TEST(AttentionDecodeFp8Kv, AgreesWithSixteenBitsOnTheSameValues) {
  for (bool per_head : {false, true}) {
    check_fp8_against_16_bits<tp::bf16>(fixed(2, 2, 300, 8, 2, 64, 3, causal), per_head);
    check_fp8_against_16_bits<tp::f16>(fixed(1, 1, 200, 4, 2, 128, 2), per_head);
    check_fp8_against_16_bits<tp::bf16>(fixed(2, 1, 140, 2, 2, 256, 1), per_head, false);
  }
  check_fp8_against_16_bits<tp::bf16>({{{1, 16, 0, 3}, {200, 65, 9, 0}}, 8, 2, 64, causal, true, 5}, true);
}

TEST(AttentionDecodeFp8Kv, BadScalesAreReported) {
  const auto& dev = test::dev();
  auto q = tp::tensor<tp::bf16, 4>(dev, {1, 1, 4, 64}), o = tp::tensor<tp::bf16, 4>(dev, {1, 1, 4, 64});
  auto k16 = tp::tensor<tp::bf16, 4>(dev, {1, 20, 2, 64});
  auto good = tp::tensor<float, 1>::from_host(dev, {2}, std::vector<float>{0.5f, 2.0f});
  // Scales with 16-bit K and V would be ignored: refused on the host.
  EXPECT_NE(test::error_of([&] { tp::attention_forward<tp::bf16>(dev, q, k16, k16, o, {.k_scale = good.data()}); })
                .find("k_scale, v_scale and kv_scale_per_head dequantise fp8 (e4m3) K and V; k and v are bf16"),
            std::string::npos);
  if (test::on_gpu()) return;  // the values are checked by the kernel in the interpreter and debug builds
  auto k = tp::tensor<tp::fp8_e4m3, 4>::from_host(dev, {1, 20, 2, 64},
                                                  std::vector<tp::fp8_e4m3>(20 * 2 * 64, tp::from_float<tp::fp8_e4m3>(1.0f)));
  auto error = [&](std::vector<float> k_scale, std::vector<float> v_scale) {
    auto ks = tp::tensor<float, 1>::from_host(dev, {2}, k_scale), vs = tp::tensor<float, 1>::from_host(dev, {2}, v_scale);
    return test::error_of([&] {
      tp::attention_forward<tp::bf16>(dev, q, k, k, o,
                                      {.k_scale = ks.data(), .v_scale = vs.data(), .kv_scale_per_head = true});
    });
  };
  EXPECT_EQ(error({0.5f, 2.0f}, {1.0f, -3.0f}), "");
  EXPECT_NE(error({0.5f, -2.0f}, {1.0f, 1.0f}).find("k_scale[1] is not a positive finite number"), std::string::npos);
  EXPECT_NE(error({0.0f, 2.0f}, {1.0f, 1.0f}).find("k_scale[0] is not a positive finite number"), std::string::npos);
  EXPECT_NE(error({1.0f, 1.0f}, {NAN, 1.0f}).find("v_scale[0] is not a finite number"), std::string::npos);
}

TEST(AttentionDecodeFp8Kv, LargeOnTheGpu) {
  if (!test::on_gpu()) GTEST_SKIP() << "GPU sizes";
  check_fp8<tp::bf16>(fixed(2, 1, 131072, 32, 8, 128, 0), true);
  check_fp8<tp::f16>(fixed(3, 4, 20000, 16, 2, 256, 7, causal), false);
  check_fp8_against_16_bits<tp::bf16>(fixed(4, 1, 32768, 32, 8, 128, 0), true, false);
}
