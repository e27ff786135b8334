// The scheduling layer (sched/): fast division, tile orders, the stream-K plan and the
// persistent tile scheduler against plain-arithmetic references, and the scheduler's loop
// run inside a kernel (in the interpreter, or on the GPU) against the same loop on the host.
#include "test_util.hpp"

#include <algorithm>

namespace {

// The grouped (and snake) order as the tilepipe docs define it, with plain division.
tp::tile_coord reference_order(int id, int tm, int tn, int group, bool snake) {
  const int band = id / (group * tn), r = id % (group * tn), rows = std::min(group, tm - band * group);
  const int n = r / rows;
  return {band * group + r % rows, snake && band % 2 == 1 ? tn - 1 - n : n};
}

bool same(tp::tile_coord a, tp::tile_coord b) { return a.m == b.m && a.n == b.n; }

}  // namespace

TEST(Sched, FastDivmodMatchesDivision) {
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

TEST(Sched, TileOrdersVisitEveryTileOnceInBands) {
  for (int tm : {1, 3, 7, 8, 9, 32})
    for (int tn : {1, 5, 16})
      for (int group : {1, 2, 8, 40}) {
        const tp::tile_order_plan grouped(tm, tn, group), snake = grouped.reordered(group, tp::tile_order::snake);
        ASSERT_TRUE(grouped.tiles() == tm * tn && snake.tiles() == tm * tn && snake.tiles_m() == tm && snake.tiles_n() == tn);
        std::vector<int> seen_g(tm * tn, 0), seen_s(tm * tn, 0);
        for (int id = 0; id < tm * tn; ++id) {
          const tp::tile_coord g = grouped.at(id), s = snake.at(id);
          const tp::tile_coord gr = reference_order(id, tm, tn, group, false), sr = reference_order(id, tm, tn, group, true);
          ASSERT_TRUE(same(g, gr) && same(tp::grouped_tile_order(id, tm, tn, group), gr))
              << id << " of " << tm << "x" << tn << " g" << group;
          ASSERT_TRUE(same(s, sr) && same(tp::snake_tile_order(id, tm, tn, group), sr))
              << id << " of " << tm << "x" << tn << " g" << group;
          ++seen_g[g.m * tn + g.n], ++seen_s[s.m * tn + s.n];
        }
        for (int t = 0; t < tm * tn; ++t) ASSERT_TRUE(seen_g[t] == 1 && seen_s[t] == 1) << tm << "x" << tn << " g" << group;
      }
}

// The attention tile order: every (batch, head, row block) once; without a mask row blocks
// of a head side by side; with one, units of equal cost (row blocks m and M - 1 - m of one
// head, or the middle row blocks of two) that a worker runs in two consecutive waves, so
// that causal loads (row block m costs m + 1) end within one unit (M + 1) of each other,
// and the units of a wave come from as few heads as the workers need (their K and V share L2).
TEST(Sched, AttentionTilesVisitEveryTileOnceAndBalanceCausalLoads) {
  for (int batches : {1, 3})
    for (int heads : {1, 5, 16})
      for (int m_blocks : {1, 2, 7, 16, 128})
        for (int workers : {1, 4, 132})
          for (bool paired : {false, true}) {
            const tp::attention_tile_order order(batches, heads, m_blocks, paired, workers);
            const int tiles = batches * heads * m_blocks, all_heads = batches * heads;
            const std::string what = std::to_string(batches) + "x" + std::to_string(heads) + "x" +
                                     std::to_string(m_blocks) + " on " + std::to_string(workers);
            ASSERT_EQ(order.tiles(), tiles);
            std::vector<int> seen(tiles, 0);
            std::vector<long long> load(workers, 0);
            for (int j = 0; j < tiles; ++j) {
              const tp::attention_tile t = order.at(j);
              ASSERT_TRUE(t.batch >= 0 && t.batch < batches && t.head >= 0 && t.head < heads && t.m_block >= 0 &&
                          t.m_block < m_blocks) << what;
              ++seen[(t.batch * heads + t.head) * m_blocks + t.m_block];
              load[j % workers] += t.m_block + 1;
              if (!paired) ASSERT_EQ(t.m_block, j % m_blocks) << "row blocks of one head side by side: " << what;
            }
            for (int c : seen) ASSERT_EQ(c, 1) << what;
            if (!paired) continue;
            const auto [lo, hi] = std::minmax_element(load.begin(), load.end());
            EXPECT_LE(*hi - *lo, m_blocks + 1) << what;
            // The whole pairs of waves: a worker's two tiles are one unit, and a wave's units
            // come from consecutive heads.
            const int units = m_blocks / 2 * all_heads + (m_blocks % 2 ? all_heads / 2 : 0);
            const int pairs_of_waves = std::min(tiles / (2 * workers), units / workers);
            for (int r = 0; r < pairs_of_waves; ++r) {
              int first_head = 1 << 30, last_head = -1;
              for (int w = 0; w < workers; ++w) {
                const tp::attention_tile a = order.at(2 * r * workers + w), b = order.at((2 * r + 1) * workers + w);
                const int ha = a.batch * heads + a.head, hb = b.batch * heads + b.head;
                if (a.m_block == m_blocks / 2 && b.m_block == m_blocks / 2 && m_blocks % 2) {
                  ASSERT_EQ(hb, ha + 1) << "middle row blocks of two heads (after all the others): " << what;
                  continue;
                }
                ASSERT_TRUE(ha == hb && a.m_block + b.m_block == m_blocks - 1 && a.m_block > b.m_block)
                    << "row blocks m and M - 1 - m of one head, the heavier first: " << what;
                first_head = std::min(first_head, ha), last_head = std::max(last_head, ha);
              }
              if (last_head >= 0)
                EXPECT_LE(last_head - first_head, workers / (m_blocks / 2) + 1) << what << ", waves " << 2 * r;
            }
          }
}

// Stream-K: every step of every tile runs exactly once; each split tile has one owner,
// which runs its last step and collects exactly the partial sums of the other workers that
// ran parts of it, all lower-numbered and each published before the worker's other pieces;
// the split wave is balanced; the split happens exactly when it saves min_saving steps, and
// covers the full wave before a partial one under half a wave where that fits.
TEST(Sched, StreamKPlanRunsEveryStepOnceAndOwnersWaitOnlyForLowerWorkers) {
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 3000; ++trial) {
    const int tiles = trial < 4 ? 512 : pick(1, 300), steps = trial < 4 ? 64 : pick(1, 150);
    const int workers = trial < 4 ? 132 : pick(1, 140), min_saving = trial % 4 == 0 ? 0 : pick(0, 8);
    const int within = trial % 3 == 0 ? pick(0, tiles) : 0x7fffffff;
    const tp::stream_k_plan plan(tiles, steps, workers, min_saving, within);
    const std::string what = std::to_string(tiles) + " tiles x " + std::to_string(steps) + " steps on " +
                             std::to_string(workers) + " workers, min_saving " + std::to_string(min_saving) +
                             ", within the last " + std::to_string(within) + ", seed " + std::to_string(seed);
    // The split: the partial wave, with the full wave before it when the partial one is under
    // half a wave and both fit within the last `within` tiles.
    const int rest = tiles % workers;
    int split = rest > 0 && (workers - rest) * steps / workers >= min_saving ? rest : 0;
    if (split > 0 && 2 * rest < workers && tiles >= rest + workers && rest + workers <= within) split += workers;
    if (split > within || split * steps < workers) split = 0;
    ASSERT_EQ(plan.streams(), split > 0) << what;
    ASSERT_EQ(plan.data_parallel_tiles(), tiles - split) << what;
    if (split > rest) {  // two waves: every share at least a tile long, so a tile in at most two pieces
      std::vector<int> pieces(tiles, 0);
      for (int w = 0; w < workers; ++w)
        for (int j = 0; j < plan.worker(w).units(); ++j) ++pieces[plan.worker(w).unit(j).tile];
      for (int t = 0; t < tiles; ++t) ASSERT_LE(pieces[t], 2) << "tile " << t << "; " << what;
    }

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

// The scheduler's units against the plan and the reference order: every step of every tile
// runs exactly once; whole tiles go round robin in the order (worker w: tiles w, w + workers,
// ...); a split tile is finished by one unit, which adds exactly the partial sums of the
// workers that published pieces of it; a worker's units read the same by index and as a range.
TEST(Sched, TileSchedulerRunsEveryStepOnceInTheOrder) {
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 2000; ++trial) {
    const int tm = pick(1, 40), tn = pick(1, 40), steps = pick(1, 100), workers = pick(1, 140), group = pick(1, 10);
    const bool snake = trial % 2 == 1;
    const int min_saving = trial % 3 == 0 ? 0 : trial % 3 == 1 ? pick(0, 30) : tp::stream_k_off;
    const tp::tile_scheduler<> sched{tp::tile_order_plan(tm, tn, group, snake ? tp::tile_order::snake : tp::tile_order::grouped),
                                     steps, min_saving};
    const tp::stream_k_plan plan = sched.plan(workers);
    const std::string what = std::to_string(tm) + "x" + std::to_string(tn) + " tiles (group " + std::to_string(group) +
                             (snake ? ", snake" : "") + ") x " + std::to_string(steps) + " steps on " +
                             std::to_string(workers) + " workers, min_saving " + std::to_string(min_saving) +
                             ", seed " + std::to_string(seed);
    if (min_saving == tp::stream_k_off) ASSERT_FALSE(plan.streams()) << what;
    const int whole_tiles = plan.data_parallel_tiles();
    std::vector<int> runs(static_cast<std::size_t>(tm) * tn * steps, 0), owner(tm * tn, -1), first(tm * tn, -1);
    std::vector<std::vector<int>> publishers(tm * tn);
    for (int w = 0; w < workers; ++w) {
      const auto units = sched.worker(w, workers);
      ASSERT_EQ(units.streams(), plan.streams()) << what;
      int j = 0;
      for (const tp::work_tile u : units) {
        ASSERT_LT(j, units.size()) << what;
        const tp::work_tile v = units[j];
        ASSERT_TRUE(same(u.tile, v.tile) && u.k_begin == v.k_begin && u.k_end == v.k_end && u.publishes == v.publishes &&
                    u.first_contributor == v.first_contributor)
            << "unit " << j << " differs as a range; " << what;
        const int id = plan.worker(w).unit(j).tile;  // the tile's place in the loop's order
        ASSERT_TRUE(same(u.tile, reference_order(id, tm, tn, group, snake))) << "unit " << j << "; " << what;
        ASSERT_TRUE(0 <= u.k_begin && u.k_begin < u.k_end && u.k_end <= steps) << what;
        if (j * workers + w < whole_tiles)
          ASSERT_TRUE(id == j * workers + w && u.k_begin == 0 && u.k_end == steps && !u.publishes && u.first_contributor == w)
              << "whole tile " << j << " of worker " << w << "; " << what;
        const int t = u.tile.m * tn + u.tile.n;
        for (int s = u.k_begin; s < u.k_end; ++s) ++runs[static_cast<std::size_t>(t) * steps + s];
        ASSERT_EQ(u.publishes, u.k_end < steps) << what;
        if (u.publishes) publishers[t].push_back(w);
        else owner[t] = w, first[t] = u.first_contributor;
        ++j;
      }
      ASSERT_EQ(j, units.size()) << what;
    }
    for (std::size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i], 1) << "tile " << i / steps << " step " << i % steps << "; " << what;
    for (int t = 0; t < tm * tn; ++t) {
      std::vector<int> expected;
      for (int w = first[t]; w < owner[t]; ++w) expected.push_back(w);
      ASSERT_EQ(publishers[t], expected) << "tile " << t << "; " << what;
    }
  }
}

// A persistent loop in a kernel: worker w's CTA marks every step of its units with
// (w, unit index); the marks must be those of the same loop run on the host (the test above
// checks the host's). On the GPU this runs the divisions and the share as device code.
struct scheduler_loop_kernel {
  tp::tile_scheduler<> sched;
  int max_units;
  TP_HD void operator()(tp::kernel_context& ctx, tp::gmem<float, 1> marks) const {  // marks below 2^24: exact
    if (!ctx.cta_leader()) return;
    const int w = ctx.axis_index(0), tiles_n = sched.order.tiles_n();
    int j = 0;
    for (const tp::work_tile u : sched.worker(w, ctx.axis_size(0))) {
      for (int s = u.k_begin; s < u.k_end; ++s) marks.data[(u.tile.m * tiles_n + u.tile.n) * sched.steps + s] = static_cast<float>(w * max_units + j + 1);
      ++j;
    }
  }
};

TEST(Sched, TileSchedulerLoopInAKernelMatchesTheHost) {
  struct config {
    int tm, tn, steps, workers, group;
    tp::tile_order order;
    int min_saving;
  };
  for (const config c : {config{5, 7, 9, 4, 2, tp::tile_order::grouped, 0},     // 35 tiles on 4: 3 split
                         config{9, 3, 64, 7, 8, tp::tile_order::snake, 0},      // tiles split over 2-3 workers
                         config{2, 2, 40, 6, 1, tp::tile_order::snake, 0},      // fewer tiles than workers
                         config{6, 11, 5, 5, 4, tp::tile_order::grouped, tp::stream_k_off},
                         config{33, 4, 128, 132, 8, tp::tile_order::grouped, 0}}) {
    const tp::tile_scheduler<> sched{tp::tile_order_plan(c.tm, c.tn, c.group, c.order), c.steps, c.min_saving};
    int max_units = 0;
    for (int w = 0; w < c.workers; ++w) max_units = std::max(max_units, sched.worker(w, c.workers).size());
    std::vector<float> expected(static_cast<std::size_t>(c.tm) * c.tn * c.steps, 0.0f);
    for (int w = 0; w < c.workers; ++w) {
      int j = 0;
      for (const tp::work_tile u : sched.worker(w, c.workers)) {
        for (int s = u.k_begin; s < u.k_end; ++s) expected[(u.tile.m * c.tn + u.tile.n) * c.steps + s] = static_cast<float>(w * max_units + j + 1);
        ++j;
      }
    }
    const std::string what = std::to_string(c.tm) + "x" + std::to_string(c.tn) + " tiles x " + std::to_string(c.steps) +
                             " steps on " + std::to_string(c.workers) + " workers";
    ASSERT_EQ(std::count(expected.begin(), expected.end(), 0.0f), 0) << what;
    auto marks = tp::tensor<float, 1>::from_host(test::dev(), {static_cast<long long>(expected.size())},
                                                 std::vector<float>(expected.size(), 0.0f));
    tp::kernel(scheduler_loop_kernel{sched, max_units}, {.grid = {c.workers}})(test::dev(), marks);
    EXPECT_EQ(marks.to_host(), expected) << what;
  }
}
