// Index maps that break the pipeline's rules are reported, naming the spec, the step and the
// block: a block wholly outside its array, an output block visited again after other blocks.
// Group tables of the grouped matmul and the page tables of attention's KV cache, which only
// the device reads, are reported too.
// The interpreter always checks; the GPU build of this test has TILEPIPE_DEBUG, where a
// failed check reports its message and traps, so every case runs in a fresh process.
#include "test_util.hpp"

#include <tilepipe/kernels/attention.cuh>
#include <tilepipe/kernels/grouped_matmul.cuh>

#include <cstdlib>
#include <string>

namespace {

using tile = tp::tile<tp::block<16, 32>>;

/// y = x block by block, through index maps In and Out over a (rows, cols) grid of blocks.
template <bool WS, class In, class Out>
struct copy_blocks {
  static constexpr int num_threads = WS ? 2 : 1;
  int rows, cols;
  In in_map;
  Out out_map;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> y) const {
    auto body = [](auto, auto xs, auto ys) { tp::map([](float v) { return v; }, ys, xs); };
    const auto grid = tp::grid(rows, cols);
    if constexpr (WS)
      tp::emit_pipeline_warp_specialized(body, grid, tp::in_specs(tp::spec<tile>(in_map)),
                                         tp::out_specs(tp::spec<tile>(out_map)), tp::num_compute_wgs<1>,
                                         tp::memory_registers<40>)(k, x, y);
    else
      tp::emit_pipeline(body, grid, tp::in_specs(tp::spec<tile>(in_map)), tp::out_specs(tp::spec<tile>(out_map)))(k, x, y);
  }
};

template <bool WS, class In, class Out>
std::string run(In in_map, Out out_map, int rows = 2, int cols = 3) {
  tp::tensor<float, 2> x(test::dev(), {16LL * rows, 32LL * cols}), y(test::dev(), {16LL * rows, 32LL * cols});
  return test::error_of([&] {
    tp::kernel(copy_blocks<WS, In, Out>{rows, cols, in_map, out_map}, {})(test::dev(), x, y);
    (void)y.to_host();
  });
}

/// Runs the kernel in a death test's child (fresh process: a GPU trap ends the context) and
/// expects its error to match `pattern`.
#define EXPECT_REPORTED(statement, pattern)                                     \
  EXPECT_EXIT(                                                                  \
      {                                                                         \
        const std::string err = (statement);                                    \
        std::fprintf(stderr, "%s\n", err.c_str());                              \
        std::exit(err.empty() ? 0 : 3);                                         \
      },                                                                        \
      ::testing::ExitedWithCode(3), pattern)

// Index maps (named types: a __global__ template may not take a lambda's closure type).
struct same {
  TP_HD auto operator()(auto i, auto j) const { return tp::idx(i, j); }
};
struct off_by_100 {
  TP_HD auto operator()(auto i, auto j) const { return tp::idx(i + 100, j); }
};
struct minus_one {
  TP_HD auto operator()(auto i, auto j) const { return tp::idx(i, j - 1); }
};
struct past_the_end {  // the last column's block is outside
  TP_HD auto operator()(auto i, auto j) const { return tp::idx(i, j + 1); }
};
struct column_only {
  TP_HD auto operator()(auto, auto j) const { return tp::idx(0, j); }
};
struct row_only {
  TP_HD auto operator()(auto i, auto) const { return tp::idx(i, 0); }
};

}  // namespace

class DebugChecks : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(DebugChecks, InputBlockOutsideTheArray) {
  EXPECT_REPORTED(run<false>(off_by_100{}, same{}),
                  "input 0 at pipeline step 0: its index map returns block index 100 in dimension 0, elements "
                  "\\[1600, 1616\\), wholly outside the array's extent 32");
  EXPECT_REPORTED(run<true>(off_by_100{}, same{}), "input 0 at pipeline step 0: .*block index 100 in dimension 0");
}

TEST_F(DebugChecks, NegativeBlockIndex) {
  EXPECT_REPORTED(run<false>(minus_one{}, same{}),
                  "input 0 at pipeline step 0: its index map returns block index -1 in dimension 1, elements "
                  "\\[-32, 0\\), wholly outside the array's extent 96");
  EXPECT_REPORTED(run<true>(minus_one{}, same{}), "input 0 at pipeline step 0: .*block index -1 in dimension 1");
}

TEST_F(DebugChecks, OutputBlockOutsideTheArray) {
  EXPECT_REPORTED(run<false>(same{}, past_the_end{}), "output 0 at pipeline step 2: .*block index 3 in dimension 1");
  EXPECT_REPORTED(run<true>(same{}, past_the_end{}), "output 0 at pipeline step 2: .*block index 3 in dimension 1");
}

// Grid (2, 3), output block (0, j): row 1 of the grid comes back to block (0, 0) at step 3.
TEST_F(DebugChecks, OutputBlockRevisitedAfterOtherBlocks) {
  const char* want = "output 0: its index map returns block \\(0, 0\\) at step 3, which step 0 visited before";
  EXPECT_REPORTED(run<false>(same{}, column_only{}), want);
  EXPECT_REPORTED(run<true>(same{}, column_only{}), want);
}

// Consecutive visits of one output block and partial edge blocks are fine.
TEST_F(DebugChecks, ConsecutiveVisitsAndEdgeBlocksRunClean) {
  EXPECT_EQ((run<false>(same{}, row_only{})), "");
  EXPECT_EQ((run<true>(same{}, row_only{})), "");
  const int rows = 3, cols = 2;  // a 40 x 50 array in 16 x 32 blocks: partial blocks at both edges
  const auto hx = test::random_values<float>(40 * 52);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {40, 52}, hx);
  tp::tensor<float, 2> y(test::dev(), {40, 56});
  auto view = [](const tp::tensor<float, 2>& t) {  // 50 of each row's elements
    auto v = tp::tensor_view<float, 2>::wrap(t.data(), {40, 50}, test::on_gpu());
    v.stride[0] = t.shape(1);
    return v;
  };
  const auto kern = copy_blocks<false, same, same>{rows, cols, {}, {}};
  EXPECT_EQ(test::error_of([&] { tp::kernel(kern, {})(test::dev(), view(x), view(y)); }), "");
  const auto hy = y.to_host();
  for (int r = 0; r < 40; ++r)
    for (int c = 0; c < 50; ++c) ASSERT_EQ(hy[r * 56 + c], hx[r * 52 + c]) << r << ", " << c;
}

// Group offsets and counts live on the device: the kernel checks them (in the interpreter and
// in TILEPIPE_DEBUG GPU builds).
TEST_F(DebugChecks, GroupedMatmulGroupTables) {
  auto with_offsets = [](std::vector<int> ends) {
    const auto& dev = test::dev();
    tp::tensor<tp::bf16, 2> lhs(dev, {64, 64}), out(dev, {64, 64});
    tp::tensor<tp::bf16, 3> rhs(dev, {3, 64, 64});
    auto offs = tp::tensor<int, 1>::from_host(dev, {3}, ends);
    return test::error_of([&] {
      tp::grouped_matmul<tp::bf16>(dev, lhs, rhs, tp::rhs_layout::kn, offs.data(), out);
      (void)out.to_host();
    });
  };
  EXPECT_REPORTED(with_offsets({10, 40, 60}), "the group sizes add up to 60 rows, but lhs has 64");
  EXPECT_REPORTED(with_offsets({30, 20, 64}), "group 1 has -10 rows");
  EXPECT_EQ(with_offsets({0, 64, 64}), "");
  auto with_counts = [](std::vector<int> counts) {
    const auto& dev = test::dev();
    tp::tensor<tp::bf16, 3> lhs(dev, {3, 16, 64}), rhs(dev, {3, 64, 64}), out(dev, {3, 16, 64});
    auto c = tp::tensor<int, 1>::from_host(dev, {3}, counts);
    return test::error_of([&] {
      tp::grouped_matmul_masked<tp::bf16>(dev, lhs, rhs, tp::rhs_layout::nk, c.data(), out);
      (void)out.to_host();
    });
  };
  EXPECT_REPORTED(with_counts({4, 17, 0}), "group 1 has 17 valid rows, more than the 16 rows per group of lhs");
  EXPECT_REPORTED(with_counts({-1, 3, 0}), "group 0 has -1 rows");
}

// A paged KV cache's table and lengths live on the device: the decode kernel checks them (a
// release GPU build clips them instead: test_attention_paged).
TEST_F(DebugChecks, AttentionPageTables) {
  auto with_table = [](std::vector<int> used, std::vector<int> table) {
    const auto& dev = test::dev();
    tp::tensor<tp::bf16, 4> q(dev, {2, 1, 4, 64}), o(dev, {2, 1, 4, 64}), k(dev, {5, 16, 1, 64}), v(dev, {5, 16, 1, 64});
    auto u = tp::tensor<int, 1>::from_host(dev, {2}, used);
    auto t = tp::tensor<int, 1>::from_host(dev, {4}, table);
    return test::error_of([&] {
      tp::attention_forward<tp::bf16>(dev, q, k, v, o, {.seqused_k = u.data(), .page_table = t.data(), .max_pages_per_seq = 2});
      (void)o.to_host();
    });
  };
  EXPECT_REPORTED(with_table({20, 5}, {4, 5, 0, 9}), "page_table\\[0\\]\\[1\\] = 5, outside the 5 pages of k and v");
  EXPECT_REPORTED(with_table({33, 5}, {4, 1, 0, 9}), "seqused_k\\[0\\] = 33 keys, outside \\[0, 32\\]");
  EXPECT_EQ(with_table({20, 5}, {4, 1, 0, 9}), "");
}
