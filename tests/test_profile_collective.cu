// The collective matmuls' own scopes on the profiler's timeline (built with TILEPIPE_PROFILE,
// every step), in the interpreter on 2 simulated devices with device 0's launch profiled:
// every tile of every warpgroup lies in one "ring step s" scope, as many tiles in step s as
// the device's CTAs take of that step's shard; the all-gather's memory warpgroup waits for
// each forwarded row block ("wait A block") at step 1 only, and its compute warpgroup 0
// forwards the first column's A blocks ("forward A", in the bodies) and signals each
// ("signal A block"); the reduce-scatter's epilogues wait for, add and send partial sums
// at the steps that have them; both store c at the steps that write it. Then
// bench/profile_summary.hpp's split of the same tracks (bench_collective_matmul_on's summary).
#include "planted.hpp"

#include "bench/profile_summary.hpp"

#include <tilepipe/kernels/collective_matmul.cuh>

static_assert(tp::profiling && tp::profiling_steps, "test_profile_collective records every step");

namespace {

using tp::bf16;
using K = tp::profile_kind;

struct span {
  K kind;
  std::string name;
  double begin, end;
  bool inside(const span& o) const { return o.begin <= begin && end <= o.end; }
};

/// A track's spans, an end closing the innermost open begin of its kind.
std::vector<span> spans_of(const tp::profile_track& t) {
  std::vector<span> out;
  std::vector<const tp::profiled_event*> open;
  for (const auto& e : t.events) {
    if (e.phase == tp::profile_phase::begin) open.push_back(&e);
    if (e.phase != tp::profile_phase::end) continue;
    for (auto it = open.rbegin(); it != open.rend(); ++it)
      if ((*it)->kind == e.kind) {
        out.push_back({e.kind, (*it)->name, (*it)->time, e.time});
        open.erase(std::next(it).base());
        break;
      }
  }
  return out;
}

std::vector<span> named(const std::vector<span>& v, const std::string& name) {
  std::vector<span> out;
  for (const auto& s : v)
    if (s.name == name) out.push_back(s);
  return out;
}

/// The one span of `kind` (or the one scope whose name starts with `prefix`) around s.
const span* enclosing(const std::vector<span>& v, const span& s, K kind, const std::string& prefix = "") {
  const span* found = nullptr;
  for (const auto& o : v)
    if (o.kind == kind && o.name.rfind(prefix, 0) == 0 && &o != &s && s.inside(o)) {
      EXPECT_EQ(found, nullptr) << "two " << o.name << " spans around " << s.name;
      found = &o;
    }
  return found;
}

/// Which ring step a span lies in (-1: none).
int step_of(const std::vector<span>& v, const span& s) {
  const span* r = enclosing(v, s, K::scope, "ring step ");
  return r ? r->name.back() - '0' : -1;
}

std::vector<tp::tensor<bf16, 2>> inputs(const tp::device_group& group, long long rows, long long cols) {
  std::vector<tp::tensor<bf16, 2>> v;
  for (const tp::device& dev : group.local())
    v.push_back(tp::tensor<bf16, 2>::from_host(dev, {rows, cols}, test::random_values<bf16>(static_cast<std::size_t>(rows * cols))));
  return v;
}

/// Checks every tile's "ring step" scope and returns the tiles per step of the role's tracks.
std::vector<int> tiles_per_step(const std::vector<tp::profile_track>& tracks, const std::string& role, int D) {
  std::vector<int> per_step(static_cast<std::size_t>(D), 0);
  for (const auto& t : tracks) {
    if (t.name() != role) continue;
    const auto v = spans_of(t);
    for (const auto& tile : v) {
      if (tile.kind != K::tile) continue;
      int steps = 0;
      for (const auto& r : v)
        if (r.kind == K::scope && r.name.rfind("ring step ", 0) == 0 && r.inside(tile)) {
          ++steps;
          ++per_step.at(static_cast<std::size_t>(r.name.back() - '0'));
        }
      EXPECT_EQ(steps, 1) << role << ": a tile lies in one ring step";
    }
  }
  return per_step;
}

/// Each compute track's time splits into mainloop and epilogue inside its tiles, and the
/// summary has the named scopes.
void check_summary(const std::vector<tp::profile_track>& tracks, const std::vector<std::string>& scopes) {
  const bench::profile_summary s = bench::summarize(tracks);
  ASSERT_GT(s.kernel_time, 0);
  EXPECT_EQ(s.memory.size(), 3u);
  ASSERT_EQ(s.compute.size(), 6u);
  for (const auto& t : s.compute) {
    EXPECT_GT(t.at("mainloop"), 0);
    EXPECT_GT(t.at("epilogue"), 0);
    EXPECT_LE(t.at("mainloop") + t.at("epilogue"), t.at("tiles"));
    EXPECT_DOUBLE_EQ(t.at("tiles") + t.at("idle"), s.kernel_time);
    EXPECT_GT(t.at("body"), 0);
  }
  const auto keys = bench::profile_summary::keys(s.compute);
  for (const auto& k : scopes) {
    EXPECT_NE(std::find(keys.begin(), keys.end(), k), keys.end()) << k;
    EXPECT_GT(s.over(s.compute, k).max, 0) << k;
  }
  EXPECT_NE(bench::format_summary(s, 1).find("ring step 1"), std::string::npos); std::printf("%s\n%s\n", bench::format_summary(s, 1).c_str(), bench::summary_json(s, 1).c_str());
}

TEST(ProfileCollective, AllGatherMatmulScopes) {
  constexpr int D = 2;
  const std::vector<long long> shards = {130, 64};
  const long long Kd = 136, N = 320;  // 3 K steps, 2 columns of tiles
  auto group = tp::device_group::simulated(D, test::interpreter());
  tp::all_gather_matmul<bf16> ag(group, shards, Kd, N);
  ASSERT_EQ(ag.ctas(), 3);
  std::vector<tp::tensor<bf16, 2>> a;  // each device's row shard
  for (const tp::device& dev : group.local())
    a.push_back(tp::tensor<bf16, 2>::from_host(dev, {shards[dev.index()], Kd},
                                               test::random_values<bf16>(static_cast<std::size_t>(shards[dev.index()] * Kd))));
  auto b = inputs(group, Kd, N);
  std::vector<tp::tensor<bf16, 2>> c;
  for (const tp::device& dev : group.local()) c.emplace_back(dev, std::array<long long, 2>{194, N});
  tp::profiler prof(group.local()[0]);
  for (const tp::device& dev : group.local())
    ag(dev, a[dev.index()], b[dev.index()], c[dev.index()], nullptr, dev.index() == 0 ? &prof : nullptr);
  const auto tracks = prof.tracks();
  ASSERT_EQ(tracks.size(), 9u);  // 3 CTAs: memory, compute 0, compute 1

  // Device 0: step 0 is its own shard (2 x 2 tiles), step 1 device 1's (1 x 2).
  for (const char* role : {"memory", "compute 0", "compute 1"})
    EXPECT_EQ(tiles_per_step(tracks, role, D), (std::vector<int>{4, 2})) << role;
  int waits = 0, forwards = 0, signals = 0, stores = 0, drained = 0;
  for (const auto& t : tracks) {
    const auto v = spans_of(t);
    for (const auto& w : named(v, "wait A block")) {
      EXPECT_EQ(t.name(), "memory");
      EXPECT_EQ(step_of(v, w), 1) << "the forwarded blocks are waited for at step 1";
      ++waits;
    }
    for (const auto& f : named(v, "forward A")) {
      EXPECT_EQ(t.name(), "compute 0");
      EXPECT_NE(enclosing(v, f, K::body), nullptr) << "forwarding is part of a step's body";
      EXPECT_EQ(step_of(v, f), 0);
      ++forwards;
    }
    for (const auto& sg : named(v, "signal A block")) {
      EXPECT_EQ(t.name(), "compute 0");
      EXPECT_NE(enclosing(v, sg, K::epilogue), nullptr);
      ++signals;
    }
    for (const auto& st : named(v, "store c")) {
      EXPECT_NE(enclosing(v, st, K::epilogue), nullptr);
      ++stores;
    }
    drained += static_cast<int>(named(v, "wait drained").size());
  }
  EXPECT_EQ(waits, 2) << "one per tile of step 1";
  EXPECT_EQ(signals, 2) << "the first column of step 0's tiles: 2 row blocks";
  EXPECT_EQ(forwards, 2 * 3) << "each of their 3 K steps";
  EXPECT_EQ(stores, 6 * 2) << "every tile, each compute warpgroup";
  EXPECT_EQ(drained, 3) << "compute warpgroup 0 of each CTA sends";
  check_summary(tracks, {"ring step 0", "ring step 1", "forward A", "signal A block", "store c", "wait drained"});
}

TEST(ProfileCollective, MatmulReduceScatterScopes) {
  constexpr int D = 2;
  const std::vector<long long> shards = {100, 160};
  const long long Kd = 72, N = 264;
  auto group = tp::device_group::simulated(D, test::interpreter());
  tp::matmul_reduce_scatter<bf16> rs(group, shards, Kd, N);
  auto a = inputs(group, 260, Kd), b = inputs(group, Kd, N);
  std::vector<tp::tensor<bf16, 2>> c;
  for (const tp::device& dev : group.local()) c.emplace_back(dev, std::array<long long, 2>{shards[dev.index()], N});
  tp::profiler prof(group.local()[0]);
  for (const tp::device& dev : group.local())
    rs(dev, a[dev.index()], b[dev.index()], c[dev.index()], nullptr, dev.index() == 0 ? &prof : nullptr);
  const auto tracks = prof.tracks();
  ASSERT_EQ(tracks.size(), 9u);

  // Device 0: step 0 is device 1's shard (2 x 2 tiles, sent on), step 1 its own (1 x 2, stored).
  for (const char* role : {"memory", "compute 0", "compute 1"})
    EXPECT_EQ(tiles_per_step(tracks, role, D), (std::vector<int>{4, 2})) << role;
  std::map<std::string, std::vector<int>> per_step;  // scope: count per ring step
  for (const auto& t : tracks) {
    const auto v = spans_of(t);
    for (const char* name : {"wait partial", "add partial", "send partial", "store c"})
      for (const auto& s : named(v, name)) {
        EXPECT_EQ(t.name().rfind("compute", 0), 0u) << name;
        EXPECT_NE(enclosing(v, s, K::epilogue), nullptr) << name;
        auto& n = per_step[name];
        n.resize(D);
        ++n.at(static_cast<std::size_t>(step_of(v, s)));
      }
  }
  // Each compute warpgroup has its own partial sum of a tile.
  EXPECT_EQ(per_step["wait partial"], (std::vector<int>{0, 4}));
  EXPECT_EQ(per_step["add partial"], (std::vector<int>{0, 4}));
  EXPECT_EQ(per_step["send partial"], (std::vector<int>{8, 0}));
  EXPECT_EQ(per_step["store c"], (std::vector<int>{0, 4}));
  check_summary(tracks, {"ring step 0", "ring step 1", "wait partial", "add partial", "send partial", "store c",
                         "wait drained"});
}

}  // namespace
