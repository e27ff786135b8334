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
