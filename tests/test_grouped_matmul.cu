// The ragged grouped matmul (kernels/grouped_matmul.cuh) against a float64 reference on
// fresh random inputs: group-size patterns (all rows in one group, empty groups at the
// start, middle and end, groups smaller than a tile, groups that end inside a tile, one
// group taking most rows), both rhs layouts, bf16 and f16, K and N that are not multiples
// of the tile (odd ones through padded strides), the masked decode layout; then bad input.
// Outputs start as a sentinel, so a row written by another group's tile, or a masked row
// past its group's count, shows.
#include "test_util.hpp"

#include <tilepipe/kernels/grouped_matmul.cuh>

#include <numeric>

namespace {

std::vector<int> cumulative(const std::vector<int>& sizes) {
  std::vector<int> ends(sizes.size());
  std::partial_sum(sizes.begin(), sizes.end(), ends.begin());
  return ends;
}

/// A K x N matrix of rhs group g, element (k, n), in either layout; `ld` the padded row length.
template <class T>
double rhs_at(const std::vector<T>& rhs, tp::rhs_layout layout, long long K, long long N, long long ld, int g,
              long long k, long long n) {
  const long long per_group = (layout == tp::rhs_layout::kn ? K : N) * ld;
  const long long at = layout == tp::rhs_layout::kn ? k * ld + n : n * ld + k;
  return tp::to_float(rhs[static_cast<std::size_t>(g * per_group + at)]);
}

constexpr float sentinel = 1234.0f;

/// Rows [begin[g], begin[g] + count[g]) of lhs (rows of `lda` elements) times rhs group g;
/// the other rows of out (`ldo`) must still hold the sentinel. Returns the relative error.
template <class T>
double compare(const std::vector<T>& lhs, const std::vector<T>& rhs, const std::vector<T>& out,
               const std::vector<long long>& begin, const std::vector<int>& count, tp::rhs_layout layout, long long rows,
               long long K, long long N, long long lda, long long ldb, long long ldo) {
  std::vector<int> group_of(static_cast<std::size_t>(rows), -1);
  for (std::size_t g = 0; g < count.size(); ++g)
    for (int i = 0; i < count[g]; ++i) group_of[static_cast<std::size_t>(begin[g] + i)] = static_cast<int>(g);
  std::vector<T> got;
  std::vector<double> want;
  int untouched_bad = 0;
  for (long long r = 0; r < rows; ++r) {
    const int g = group_of[static_cast<std::size_t>(r)];
    for (long long n = 0; n < N; ++n) {
      const T o = out[static_cast<std::size_t>(r * ldo + n)];
      if (g < 0) {
        if (tp::to_float(o) != tp::to_float(tp::from_float<T>(sentinel)) && untouched_bad++ < 5)
          ADD_FAILURE() << "row " << r << " (no group's) column " << n << " was written: " << tp::to_float(o);
        continue;
      }
      double acc = 0;
      for (long long k = 0; k < K; ++k)
        acc += tp::to_float(lhs[static_cast<std::size_t>(r * lda + k)]) * rhs_at(rhs, layout, K, N, ldb, g, k, n);
      got.push_back(o);
      want.push_back(acc);
    }
  }
  return want.empty() ? 0.0 : test::rel_error(got, want);
}

/// Runs grouped_matmul on groups of the given sizes; K and N may be odd, the row lengths in
/// memory are padded to 16 bytes (TMA).
template <class T>
void check(const std::vector<int>& sizes, long long K, long long N, tp::rhs_layout layout,
           const tp::device& dev = test::dev()) {
  const int G = static_cast<int>(sizes.size());
  const long long M = std::accumulate(sizes.begin(), sizes.end(), 0LL);
  auto pad = [](long long n) { return (n + 7) / 8 * 8; };
  const long long lda = pad(K), ldo = pad(N), ldb = layout == tp::rhs_layout::kn ? pad(N) : pad(K);
  const long long b_rows = layout == tp::rhs_layout::kn ? K : N;
  const auto hl = test::random_values<T>(static_cast<std::size_t>(std::max(M, 1LL) * lda));
  const auto hr = test::random_values<T>(static_cast<std::size_t>(G * b_rows * ldb));
  auto lhs_t = tp::tensor<T, 1>::from_host(dev, {static_cast<long long>(hl.size())}, hl);
  auto rhs_t = tp::tensor<T, 1>::from_host(dev, {static_cast<long long>(hr.size())}, hr);
  auto out_t = tp::tensor<T, 1>::from_host(dev, {std::max(M, 1LL) * ldo},
                                           std::vector<T>(static_cast<std::size_t>(std::max(M, 1LL) * ldo),
                                                          tp::from_float<T>(sentinel)));
  const auto ends = cumulative(sizes);
  auto offs = tp::tensor<int, 1>::from_host(dev, {G}, ends);
  const tp::tensor_view<T, 2> lhs{lhs_t.data(), {M, K}, {lda, 1}, dev.is_gpu()};
  const tp::tensor_view<T, 3> rhs{rhs_t.data(), {G, b_rows, layout == tp::rhs_layout::kn ? N : K},
                                  {b_rows * ldb, ldb, 1}, dev.is_gpu()};
  const tp::tensor_view<T, 2> out{out_t.data(), {M, N}, {ldo, 1}, dev.is_gpu()};
  tp::grouped_matmul<T>(dev, lhs, rhs, layout, offs.data(), out);
  std::vector<long long> begin(G);
  for (int g = 0; g < G; ++g) begin[g] = g ? ends[g - 1] : 0;
  const double err = compare(hl, hr, out_t.to_host(), begin, sizes, layout, M, K, N, lda, ldb, ldo);
  EXPECT_LT(err, 1e-2) << G << " groups, K " << K << ", N " << N;
}

/// The masked layout: lhs [G, Mmax, K], counts[g] valid rows per group.
template <class T>
void check_masked(const std::vector<int>& counts, long long mmax, long long K, long long N, tp::rhs_layout layout) {
  const auto& dev = test::dev();
  const int G = static_cast<int>(counts.size());
  const long long b_rows = layout == tp::rhs_layout::kn ? K : N, ldb = layout == tp::rhs_layout::kn ? N : K;
  const auto hl = test::random_values<T>(static_cast<std::size_t>(G * mmax * K));
  const auto hr = test::random_values<T>(static_cast<std::size_t>(G * b_rows * ldb));
  auto lhs = tp::tensor<T, 3>::from_host(dev, {G, mmax, K}, hl);
  auto rhs = tp::tensor<T, 3>::from_host(dev, {G, b_rows, ldb}, hr);
  auto out = tp::tensor<T, 3>::from_host(dev, {G, mmax, N},
                                         std::vector<T>(static_cast<std::size_t>(G * mmax * N), tp::from_float<T>(sentinel)));
  auto c = tp::tensor<int, 1>::from_host(dev, {G}, counts);
  tp::grouped_matmul_masked<T>(dev, lhs, rhs, layout, c.data(), out);
  std::vector<long long> begin(G);
  for (int g = 0; g < G; ++g) begin[g] = g * mmax;
  EXPECT_LT(compare(hl, hr, out.to_host(), begin, counts, layout, G * mmax, K, N, K, ldb, N), 1e-2);
}

constexpr auto kn = tp::rhs_layout::kn;
constexpr auto nk = tp::rhs_layout::nk;

}  // namespace

TEST(GroupedMatmul, GroupPatterns) {
  check<tp::bf16>({300}, 64, 64, kn);                     // one group, tiles of 128, 128 and 44 rows
  check<tp::bf16>({0, 0, 70, 0, 1, 129, 0}, 64, 64, kn);  // empty at the start, middle and end; 1 row
  check<tp::bf16>({5, 17, 3, 31, 2, 60}, 64, 64, nk);     // every group smaller than a tile
  check<tp::bf16>({100, 100, 100}, 64, 64, nk);           // groups end inside tiles
  check<tp::f16>({250, 3, 2, 1}, 64, 64, kn);             // skewed: one group takes most rows
}

TEST(GroupedMatmul, LayoutsTypesAndOddShapes) {
  check<tp::bf16>({40, 90}, 200, 264, kn);  // K and N not multiples of the 64 x 256 tile
  check<tp::f16>({40, 90}, 200, 264, nk);
  check<tp::bf16>({33, 0, 65}, 77, 43, kn);  // odd K and N (rows padded to 16 bytes)
  check<tp::f16>({33, 0, 65}, 77, 43, nk);
}

TEST(GroupedMatmul, EveryCopyOrderAndShuffledCtas) {
  if (test::on_gpu()) GTEST_SKIP() << "interpreter schedules";
  for (auto mode : {tp::interpret::copy_mode::eager, tp::interpret::copy_mode::shuffled}) {
    tp::device dev = test::dev();
    dev.interpreter.copies = mode;
    dev.interpreter.shuffle_ctas = true;
    dev.interpreter.seed = test::fresh_seed();
    check<tp::bf16>({0, 90, 1, 200, 0}, 128, 300, nk, dev);  // 3 x 2 tiles + one of 1 row, over 4 CTAs
  }
}

TEST(GroupedMatmul, ManyGroups) {
  std::vector<int> sizes(256, 0);
  for (int g = 0; g < 256; g += 3) sizes[g] = g % 7;  // 256 groups, most empty or tiny
  sizes[255] = 9;
  check<tp::bf16>(sizes, 64, 64, nk);
}

TEST(GroupedMatmul, MaskedDecodeLayout) {
  check_masked<tp::bf16>({3, 0, 64, 1}, 64, 64, 64, kn);
  check_masked<tp::f16>({130, 0, 7}, 136, 72, 64, nk);  // a group over one tile; an empty one
  check_masked<tp::bf16>({0, 0}, 16, 64, 64, kn);       // nothing valid: nothing written
}

TEST(GroupedMatmul, LargeOnTheGpu) {
  if (!test::on_gpu()) GTEST_SKIP() << "GPU sizes";
  check<tp::bf16>({1000, 0, 37, 2000, 129, 700}, 1024, 1000, kn);
  check<tp::bf16>(std::vector<int>(64, 96), 512, 768, nk);
  check_masked<tp::bf16>({200, 0, 37, 256}, 256, 512, 512, nk);
}

TEST(GroupedMatmul, BadInputIsReportedByTheHost) {
  const auto& dev = test::dev();
  auto lhs = tp::tensor<tp::bf16, 2>(dev, {64, 64});
  auto rhs = tp::tensor<tp::bf16, 3>(dev, {2, 64, 64});
  auto out = tp::tensor<tp::bf16, 2>(dev, {64, 64});
  auto offs = tp::tensor<int, 1>::from_host(dev, {2}, std::vector<int>{32, 64});
  auto run = [&](const tp::tensor_view<tp::bf16, 2>& l, const tp::tensor_view<tp::bf16, 3>& r,
                 const tp::tensor_view<tp::bf16, 2>& o) {
    return test::error_of([&] { tp::grouped_matmul<tp::bf16>(dev, l, r, kn, offs.data(), o); });
  };
  EXPECT_NE(run(lhs, tp::tensor<tp::bf16, 3>(dev, {2, 32, 64}), out).find("lhs has K = 64 columns, rhs's matrices have K = 32"),
            std::string::npos);
  EXPECT_NE(run(lhs, rhs, tp::tensor<tp::bf16, 2>(dev, {64, 32})).find("out is 64 x 32, expected 64 x 64"),
            std::string::npos);
  auto wide = tp::tensor<tp::bf16, 2>(dev, {64, 72});
  tp::tensor_view<tp::bf16, 2> skewed = wide.view();
  skewed.shape = {64, 64}, skewed.stride = {68, 1};  // rows 136 bytes apart
  EXPECT_NE(run(skewed, rhs, out).find("lhs's stride 68 in dimension 0 is not a multiple of 16 bytes"), std::string::npos);
  EXPECT_NE(run(lhs, tp::tensor<tp::bf16, 3>(dev, {257, 64, 64}), out).find("257 groups; 1 to 256"), std::string::npos);
  // G mismatch in the masked layout.
  auto l3 = tp::tensor<tp::bf16, 3>(dev, {3, 16, 64}), o3 = tp::tensor<tp::bf16, 3>(dev, {3, 16, 64});
  EXPECT_NE(test::error_of([&] { tp::grouped_matmul_masked<tp::bf16>(dev, l3, rhs, kn, offs.data(), o3); })
                .find("lhs has 3 groups, rhs 2 and out 3"),
            std::string::npos);
}

TEST(GroupedMatmul, BadGroupTablesAreReportedByTheKernel) {
  if (test::on_gpu()) GTEST_SKIP() << "device-side checks trap on the GPU; the interpreter reports them";
  const auto& dev = test::dev();
  auto lhs = tp::tensor<tp::bf16, 2>(dev, {64, 64});
  auto rhs = tp::tensor<tp::bf16, 3>(dev, {3, 64, 64});
  auto out = tp::tensor<tp::bf16, 2>(dev, {64, 64});
  auto with_offsets = [&](std::vector<int> ends) {
    auto offs = tp::tensor<int, 1>::from_host(dev, {3}, ends);
    return test::error_of([&] { tp::grouped_matmul<tp::bf16>(dev, lhs, rhs, kn, offs.data(), out); });
  };
  EXPECT_NE(with_offsets({10, 40, 60}).find("the group sizes add up to 60 rows, but lhs has 64"), std::string::npos);
  EXPECT_NE(with_offsets({30, 20, 64}).find("group 1 has -10 rows"), std::string::npos);
  auto l3 = tp::tensor<tp::bf16, 3>(dev, {3, 16, 64}), o3 = tp::tensor<tp::bf16, 3>(dev, {3, 16, 64});
  auto counts = tp::tensor<int, 1>::from_host(dev, {3}, std::vector<int>{4, 17, 0});
  EXPECT_NE(test::error_of([&] { tp::grouped_matmul_masked<tp::bf16>(dev, l3, rhs, kn, counts.data(), o3); })
                .find("group 1 has 17 valid rows, more than the 16 rows per group"),
            std::string::npos);
}

TEST(GroupedMatmul, GroupTilesCoverEveryRowOnceWithinItsGroup) {
  // sched/group_tiles.cuh on host tables: random sizes with many empty groups, both layouts.
  std::mt19937_64 rng(test::fresh_seed());
  for (int trial = 0; trial < 20; ++trial) {
    const int G = 1 + static_cast<int>(rng() % 40), tile_rows = trial % 2 ? 128 : 64, stride = trial % 3 ? 0 : 300;
    std::vector<int> sizes(G);
    for (int& s : sizes) s = rng() % 3 == 0 ? 0 : static_cast<int>(rng() % 300);
    const tp::group_rows<std::vector<int>> rows{stride ? sizes : cumulative(sizes), stride};
    std::vector<int> starts(G + 1);
    for (int g = 0; g <= G; ++g) starts[g] = tp::group_tiles_before(rows, g, tile_rows);
    std::vector<int> covered(static_cast<std::size_t>(stride ? G * stride : starts[G] * tile_rows + 1), 0);
    long long valid = 0;
    for (int g = 0; g < G; ++g) valid += sizes[g];
    long long seen = 0;
    for (int t = 0; t < starts[G]; ++t) {
      const tp::group_tile u = tp::locate_group_tile(rows, starts, tile_rows, t);
      ASSERT_TRUE(u.rows >= 1 && u.rows <= tile_rows) << "tile " << t << " has " << u.rows << " rows";
      ASSERT_TRUE(u.row0 >= rows.begin(u.group) && u.row0 + u.rows <= rows.begin(u.group) + sizes[u.group])
          << "tile " << t << " leaves group " << u.group;
      for (int r = u.row0; r < u.row0 + u.rows; ++r) ++covered[static_cast<std::size_t>(r)], ++seen;
    }
    EXPECT_EQ(seen, valid);
    for (int c : covered) ASSERT_LE(c, 1);
  }
}
