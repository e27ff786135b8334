// Attention's schedule in the interpreter's trace (built with TILEPIPE_PROFILE, every step):
// a tile of 128 query rows against its KV blocks runs one step per block (K and V stream:
// one new block of each per step, V read one step later); the memory warpgroup fetches Q
// once and each K and V block once; each compute warpgroup runs one softmax scope inside
// each step's body. Interpreter only: on the GPU the same events are in bench_profile_on's
// attention trace (docs/guide.md).
#include "test_util.hpp"

#include "examples/common/attention_reference.hpp"

#include <tilepipe/kernels/attention.cuh>

static_assert(tp::profiling && tp::profiling_steps, "test_profile_attention records every step");

TEST(ProfileAttention, OneFetchPerBlockAndOneSoftmaxPerStep) {
  using T = tp::bf16;
  using K = tp::profile_kind;
  constexpr int sq = 128, sk = 512, d = 128, bn = tp::attention_blocks<>::n<d>, blocks = (sk + bn - 1) / bn;
  const auto& dev = test::dev();
  const auto hq = test::random_values<T>(sq * d), hk = test::random_values<T>(sk * d), hv = test::random_values<T>(sk * d);
  auto q = tp::tensor<T, 4>::from_host(dev, {1, sq, 1, d}, hq);
  auto k = tp::tensor<T, 4>::from_host(dev, {1, sk, 1, d}, hk);
  auto v = tp::tensor<T, 4>::from_host(dev, {1, sk, 1, d}, hv);
  tp::tensor<T, 4> o(dev, {1, sq, 1, d});
  o.poison();
  tp::profiler prof(dev);
  tp::attention_forward<T>(dev, q, k, v, o, {.profile = &prof});

  std::vector<double> ref_o, ref_lse;
  reference::attention(hq, hk, hv, 1, 1, d, {0, sq}, {0, sk}, 1.0 / std::sqrt(static_cast<double>(d)), {}, ref_o, ref_lse);
  EXPECT_LT(test::rel_error(o.to_host(), ref_o), 1e-2);

  const auto tracks = prof.tracks();  // one CTA holds the only tile: memory, compute 0, compute 1
  ASSERT_EQ(tracks.size(), 3u);
  for (const auto& t : tracks) {
    if (t.name() == "memory") {
      int fetches[3] = {};
      for (const auto& e : t.events)
        if (e.kind == K::fetch && e.operand >= 0 && e.operand < 3) ++fetches[e.operand];
      EXPECT_EQ(fetches[0], 1) << "Q is stationary";
      EXPECT_EQ(fetches[1], blocks) << "K";
      EXPECT_EQ(fetches[2], blocks) << "V";
      continue;
    }
    // Every softmax lies inside a body, one per step, in step order.
    std::vector<std::pair<double, double>> bodies, softmaxes;
    for (const auto& e : t.events) {
      if (e.kind == K::body && e.phase == tp::profile_phase::begin) bodies.push_back({e.time, 0});
      if (e.kind == K::body && e.phase == tp::profile_phase::end) bodies.back().second = e.time;
      if (e.kind == K::scope && e.phase == tp::profile_phase::begin) {
        EXPECT_EQ(e.name, "softmax");
        softmaxes.push_back({e.time, 0});
      }
      if (e.kind == K::scope && e.phase == tp::profile_phase::end) softmaxes.back().second = e.time;
    }
    ASSERT_EQ(bodies.size(), static_cast<std::size_t>(blocks)) << t.name();
    ASSERT_EQ(softmaxes.size(), bodies.size()) << t.name();
    for (std::size_t s = 0; s < bodies.size(); ++s) {
      EXPECT_LT(bodies[s].first, softmaxes[s].first) << t.name() << ", step " << s;
      EXPECT_LT(softmaxes[s].second, bodies[s].second) << t.name() << ", step " << s;
    }
  }
}
