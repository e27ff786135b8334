// SMEM layouts against the PTX ISA's definition of the swizzle modes, TMA plans, and the index
// arithmetic of persistent loops (fast division, tile orders).
#include "test_util.hpp"

#include <algorithm>

namespace {

// The PTX ISA describes swizzling as a permutation of 16-byte chunks: in a row of
// S bytes (S/16 chunks), chunk c of row r goes to chunk c ^ (r % (S/16)), where rows are
// S bytes long and the pattern repeats every 8 rows of 128 B (S=128), 4x... expressed
// per 128-byte line: line L holds rows; the XOR operand is (L / (128/S)) % (S/16).
int ptx_swizzled_offset(int byte, int s) {
  if (s == 0) return byte;
  const int line = byte / 128;                    // 128-byte line index
  const int chunk = (byte % 128) / 16;            // 16-byte chunk within the line
  const int mask = s / 16 - 1;                    // chunks that take part in the permutation
  const int row = line % 8;                       // the pattern spans 8 lines
  const int swizzled = (chunk & ~mask) | ((chunk ^ row) & mask);
  return line * 128 + swizzled * 16 + byte % 16;
}

template <class Tile, int E>
void check_layout_against_ptx() {
  using L = tp::tile_layout<Tile, E>;
  for (int r = 0; r < L::rows; ++r)
    for (int c = 0; c < L::cols; ++c) {
      const int plain = (c / L::panel) * L::panel_bytes + r * L::row_bytes + (c % L::panel) * E;
      ASSERT_EQ(L::offset(r, c), ptx_swizzled_offset(plain, L::swizzle)) << "r=" << r << " c=" << c;
    }
}

}  // namespace

TEST(Layout, SwizzleMatchesPtxDefinition) {
  check_layout_against_ptx<tp::tile<tp::block<64, 64>, tp::swizzle<128>>, 2>();
  check_layout_against_ptx<tp::tile<tp::block<64, 128>, tp::swizzle<128>>, 2>();
  check_layout_against_ptx<tp::tile<tp::block<32, 32>, tp::swizzle<64>>, 2>();
  check_layout_against_ptx<tp::tile<tp::block<16, 64>, tp::swizzle<32>>, 2>();
  check_layout_against_ptx<tp::tile<tp::block<16, 32>, tp::swizzle<128>>, 4>();
  check_layout_against_ptx<tp::tile<tp::block<24, 40>>, 2>();
}

TEST(Layout, OffsetsArePermutation) {
  using L = tp::tile_layout<tp::tile<tp::block<64, 128>, tp::swizzle<64>>, 2>;
  std::vector<int> seen(L::bytes / 2, 0);
  for (int r = 0; r < L::rows; ++r)
    for (int c = 0; c < L::cols; ++c) ++seen[L::offset(r, c) / 2];
  for (int v : seen) ASSERT_EQ(v, 1);
}

TEST(Layout, TmaPlanSplitsPanelsAndRows) {
  using P = tp::tma_plan<tp::tile<tp::block<128, 256>, tp::swizzle<128>>, 2>;
  static_assert(P::boxes == 4 && P::box(0) == 64 && P::box(1) == 128);
  static_assert(P::box_col(3) == 192 && P::box_smem(3) == 3 * 128 * 128);
  using Q = tp::tma_plan<tp::tile<tp::block<512, 64>>, 4>;
  static_assert(Q::boxes == 2 && Q::box(1) == 256 && Q::box_row(1) == 256 && Q::box_smem(1) == 256 * 256);
  using R = tp::tma_plan<tp::tile<tp::block<tp::squeezed, 8, 64>, tp::swizzle<128>>, 2>;
  static_assert(R::boxes == 1 && R::box(0) == 64 && R::box(1) == 8 && R::box(2) == 1);
  SUCCEED();
}

TEST(Layout, FastDivmodMatchesDivision) {
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> any(0, 0x7fffffff);
  std::vector<int> divisors;
  for (int d = 1; d <= 3000; ++d) divisors.push_back(d);
  for (int k = 2; k <= 30; ++k)
    for (int delta : {-1, 0, 1}) divisors.push_back((1 << k) + delta);
  divisors.push_back(0x7fffffff);
  for (int i = 0; i < 200; ++i) divisors.push_back(1 + any(rng) % 0x7ffffffe);
  for (int d : divisors) {
    const tp::fast_divmod f(d);
    auto check = [&](int n) { ASSERT_TRUE(f.div(n) == n / d && f.mod(n) == n % d) << n << " / " << d << ", seed " << seed; };
    for (int n = 0; n < 300; ++n) check(n);
    for (int n : {d - 1, d, d + 1, 2 * d - 1, 0x7fffffff, 0x7ffffffe})
      if (n >= 0) check(n);
    for (int i = 0; i < 200; ++i) check(any(rng));
  }
}

// The grouped (and snake) order as the tilepipe docs define it, with plain division.
tp::tile_coord reference_order(int id, int tm, int tn, int group, bool snake) {
  const int band = id / (group * tn), r = id % (group * tn), rows = std::min(group, tm - band * group);
  const int n = r / rows;
  return {band * group + r % rows, snake && band % 2 == 1 ? tn - 1 - n : n};
}

TEST(Layout, TileOrdersVisitEveryTileOnceInBands) {
  for (int tm : {1, 3, 7, 8, 9, 32})
    for (int tn : {1, 5, 16})
      for (int group : {1, 2, 8, 40}) {
        const tp::tile_order_plan plan(tm, tn, group);
        ASSERT_EQ(plan.tiles(), tm * tn);
        std::vector<int> seen_g(tm * tn, 0), seen_s(tm * tn, 0);
        for (int id = 0; id < tm * tn; ++id) {
          const tp::tile_coord g = plan.grouped(id), s = plan.snake(id);
          const tp::tile_coord g1 = tp::grouped_tile_order(id, tm, tn, group), s1 = tp::snake_tile_order(id, tm, tn, group);
          const tp::tile_coord gr = reference_order(id, tm, tn, group, false), sr = reference_order(id, tm, tn, group, true);
          ASSERT_TRUE(g.m == gr.m && g.n == gr.n && g1.m == gr.m && g1.n == gr.n) << id << " of " << tm << "x" << tn << " g" << group;
          ASSERT_TRUE(s.m == sr.m && s.n == sr.n && s1.m == sr.m && s1.n == sr.n) << id << " of " << tm << "x" << tn << " g" << group;
          ++seen_g[g.m * tn + g.n], ++seen_s[s.m * tn + s.n];
        }
        for (int t = 0; t < tm * tn; ++t) ASSERT_TRUE(seen_g[t] == 1 && seen_s[t] == 1) << tm << "x" << tn << " g" << group;
      }
}

// Stream-K: every step of every tile runs exactly once; each split tile has one owner,
// which runs its last step and collects exactly the partial sums of the other workers that
// ran parts of it, all lower-numbered and each published before the worker's other pieces;
// the split wave is balanced; and the split happens exactly when it saves min_saving steps.
TEST(Layout, StreamKPlanRunsEveryStepOnceAndOwnersWaitOnlyForLowerWorkers) {
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 3000; ++trial) {
    const int tiles = trial < 4 ? 512 : pick(1, 300), steps = trial < 4 ? 64 : pick(1, 150);
    const int workers = trial < 4 ? 132 : pick(1, 140), min_saving = trial % 4 == 0 ? 0 : pick(0, 8);
    const tp::stream_k_plan plan(tiles, steps, workers, min_saving);
    const std::string what = std::to_string(tiles) + " tiles x " + std::to_string(steps) + " steps on " +
                             std::to_string(workers) + " workers, min_saving " + std::to_string(min_saving) +
                             ", seed " + std::to_string(seed);
    const int rest = tiles % workers;
    const bool expect_split = rest > 0 && (workers - rest) * steps / workers >= min_saving && rest * steps >= workers;
    ASSERT_EQ(plan.streams(), expect_split) << what;
    ASSERT_EQ(plan.data_parallel_tiles(), expect_split ? tiles - rest : tiles) << what;

    std::vector<int> runs(static_cast<std::size_t>(tiles) * steps, 0), owner(tiles, -1), owner_first(tiles, -1);
    std::vector<std::vector<int>> publishers(tiles);
    long long most = 0, least = 1LL << 40;
    for (int w = 0; w < workers; ++w) {
      const tp::stream_k_plan::share mine = plan.worker(w);
      long long split_steps = 0;
      for (int j = 0; j < mine.units(); ++j) {
        const tp::work_unit u = mine.unit(j);
        ASSERT_TRUE(u.tile >= 0 && u.tile < tiles && 0 <= u.k_begin && u.k_begin < u.k_end && u.k_end <= steps) << what;
        for (int s = u.k_begin; s < u.k_end; ++s) ++runs[static_cast<std::size_t>(u.tile) * steps + s];
        if (u.tile < plan.data_parallel_tiles()) {
          ASSERT_TRUE(u.tile % workers == w && u.k_begin == 0 && u.k_end == steps && !u.publishes) << what;
          continue;
        }
        split_steps += u.k_end - u.k_begin;
        ASSERT_EQ(u.publishes, u.k_end < steps) << what;
        if (u.publishes) {
          // A worker publishes at most once, as the first of its split pieces (after its
          // whole tiles, as many on every worker when the last wave is split).
          ASSERT_EQ(j, plan.data_parallel_tiles() / workers) << "a publishing piece runs first; " << what;
          publishers[u.tile].push_back(w);
        } else {
          ASSERT_EQ(owner[u.tile], -1) << "two owners; " << what;
          owner[u.tile] = w, owner_first[u.tile] = u.first_contributor;
        }
      }
      if (plan.streams()) most = std::max(most, split_steps), least = std::min(least, split_steps);
    }
    for (std::size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i], 1) << "tile " << i / steps << " step " << i % steps << "; " << what;
    for (int t = plan.data_parallel_tiles(); t < tiles; ++t) {
      ASSERT_GE(owner[t], 0) << what;
      std::vector<int> expected;
      for (int w = owner_first[t]; w < owner[t]; ++w) expected.push_back(w);
      ASSERT_EQ(publishers[t], expected) << "tile " << t << "; " << what;
    }
    if (plan.streams()) ASSERT_LE(most - least, 1) << what;
  }
}
