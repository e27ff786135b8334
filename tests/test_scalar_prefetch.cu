// Scalar prefetch (ops/scalar_prefetch.cuh): a paged-KV-cache gather whose index map reads
// a block table prefetched into SMEM and whose pipeline grid extent is a second table's
// entry, on both pipelines (the warp-specialised one with two warpgroups sharing the
// prefetch); the index-map analysis through a table lookup; and the interpreter's check of
// table reads against the table's extent; blocks gathered from several pages
// (tp::gathered_spec) on both pipelines.
#include "test_util.hpp"

namespace {

constexpr int page_rows = 8, head_dim = 32;
using page_tile = tp::tile<tp::block<page_rows, head_dim>>;
constexpr float sentinel = -7.0f;

/// Sequence b (grid axis 0) copies its pages, cache pages block_table[b * max_pages + p] for
/// p < page_counts[b], into rows [(b * max_pages + p) * page_rows, ...) of out, times 2;
/// with emit_pipeline, or with emit_pipeline_warp_specialized (one compute warpgroup).
template <bool WarpSpecialized>
struct paged_gather_kernel {
  static constexpr tp::warp_specialization<1, 40> ws{};
  static constexpr int num_threads = WarpSpecialized ? ws.num_threads : 1;
  tp::scalar_source block_table;  // [sequences * max_pages]
  tp::scalar_source page_counts;  // [sequences]
  int max_pages;

  TP_HD void operator()(tp::kernel_context& ctx, tp::gmem<float, 2, page_tile> cache,
                        tp::gmem<float, 2, page_tile> out) const {
    const tp::scalar_table pages = tp::prefetch_scalars(ctx, block_table, "block_table");
    const tp::scalar_table counts = tp::prefetch_scalars(ctx, page_counts, "page_counts");
    const int b = ctx.axis_index(0), first = b * max_pages;
    auto cache_map = [=](auto p) { return tp::idx(pages[first + p], 0); };
    auto out_map = [=](auto p) { return tp::idx(first + p, 0); };
    // The analysis follows the lookup: the cache block depends on the grid axis.
    static_assert(tp::axes_used_v<decltype(cache_map), 1> == 1u);
    auto body = [](auto, auto src, auto dst) { tp::map([](float v) { return 2 * v; }, dst, src); };
    const auto ins = tp::in_specs(tp::spec<page_tile>(cache_map));
    const auto outs = tp::out_specs(tp::spec<page_tile>(out_map));
    if constexpr (WarpSpecialized)
      tp::emit_pipeline_warp_specialized(body, tp::grid(counts[b]), ins, outs, ws, tp::max_concurrent_steps<3>)(ctx, cache,
                                                                                                                  out);
    else
      tp::emit_pipeline(body, tp::grid(counts[b]), ins, outs, tp::max_concurrent_steps<3>)(ctx, cache, out);
  }
};

struct gather_result {
  std::vector<float> cache, out;
};

template <bool WarpSpecialized = false>
gather_result run_gather(const std::vector<int>& table, const std::vector<int>& counts, int max_pages, int cache_pages) {
  const auto& dev = test::dev();
  const int sequences = static_cast<int>(counts.size());
  const long long out_rows = static_cast<long long>(sequences) * max_pages * page_rows;
  gather_result r;
  r.cache = test::random_values<float>(static_cast<std::size_t>(cache_pages) * page_rows * head_dim);
  auto cache = tp::tensor<float, 2>::from_host(dev, {cache_pages * static_cast<long long>(page_rows), head_dim}, r.cache);
  auto out = tp::tensor<float, 2>::from_host(dev, {out_rows, head_dim},
                                             std::vector<float>(static_cast<std::size_t>(out_rows) * head_dim, sentinel));
  auto t = tp::tensor<int, 1>::from_host(dev, {static_cast<long long>(table.size())}, table);
  auto c = tp::tensor<int, 1>::from_host(dev, {sequences}, counts);
  const paged_gather_kernel<WarpSpecialized> kern{{t.data(), static_cast<int>(table.size())}, {c.data(), sequences}, max_pages};
  tp::kernel(kern, {.grid = {sequences}})(dev, cache, out);
  r.out = out.to_host();
  return r;
}

template <bool WarpSpecialized>
void check_paged_gather() {
  // Three sequences of 3, 0 and 4 pages (of at most 4) scattered over a cache of 9 pages,
  // one page shared by two sequences.
  const int max_pages = 4, cache_pages = 9;
  const std::vector<int> table = {5, 0, 7, -1, -1, -1, -1, -1, 2, 8, 5, 1};
  const std::vector<int> counts = {3, 0, 4};
  const auto r = run_gather<WarpSpecialized>(table, counts, max_pages, cache_pages);
  for (int b = 0; b < 3; ++b)
    for (int p = 0; p < max_pages; ++p)
      for (int i = 0; i < page_rows * head_dim; ++i) {
        const std::size_t at = static_cast<std::size_t>(b * max_pages + p) * page_rows * head_dim + i;
        const float want = p < counts[b] ? 2 * r.cache[static_cast<std::size_t>(table[b * max_pages + p]) * page_rows * head_dim + i]
                                         : sentinel;  // pages past the count are not written
        ASSERT_EQ(r.out[at], want) << "sequence " << b << " page " << p << " element " << i;
      }
}

/// Blocks gathered from pages (tp::gathered_spec): sequence b's block s is its pages
/// 4 s .. 4 s + 3, block_table[b * max_pages + 4 s + j], moved in boxes of one page each
/// into one slot; the body copies it, times 2, to rows [(b * max_pages + 4 s) * page_rows,
/// ...) of out. Both pipelines.
constexpr int pages_per_block = 4, block_rows = pages_per_block * page_rows;
using gathered_tile = tp::tile<tp::block<tp::element(block_rows), head_dim>, tp::box_rows<page_rows>>;
using out_block_tile = tp::tile<tp::block<block_rows, head_dim>>;

template <bool WarpSpecialized>
struct gathered_kernel {
  static constexpr tp::warp_specialization<1, 40> ws{};
  static constexpr int num_threads = WarpSpecialized ? ws.num_threads : 1;
  tp::scalar_source block_table;  // [sequences * max_pages]
  int max_pages, blocks;          // blocks per sequence: max_pages / pages_per_block

  TP_HD void operator()(tp::kernel_context& ctx, tp::gmem<float, 2, gathered_tile> cache,
                        tp::gmem<float, 2, out_block_tile> out) const {
    const tp::scalar_table pages = tp::prefetch_scalars(ctx, block_table, "block_table");
    const int b = ctx.axis_index(0), first = b * max_pages;
    // The block's identity: its first logical row; where its rows are: the table.
    auto logical = [=](auto s) { return tp::idx(first * page_rows + s * block_rows, 0); };
    auto box_source = [=](tp::index<2> blk, int row) { return tp::idx(pages[(blk[0] + row) / page_rows] * page_rows, 0); };
    auto out_map = [=](auto s) { return tp::idx(first / pages_per_block + s, 0); };
    auto body = [](auto, auto src, auto dst) { tp::map([](float v) { return 2 * v; }, dst, src); };
    const auto ins = tp::in_specs(tp::gathered_spec<gathered_tile>(logical, box_source));
    const auto outs = tp::out_specs(tp::spec<out_block_tile>(out_map));
    if constexpr (WarpSpecialized)
      tp::emit_pipeline_warp_specialized(body, tp::grid(blocks), ins, outs, ws, tp::max_concurrent_steps<2>)(ctx, cache, out);
    else
      tp::emit_pipeline(body, tp::grid(blocks), ins, outs, tp::max_concurrent_steps<2>)(ctx, cache, out);
  }
};

template <bool WarpSpecialized>
void check_gathered_blocks() {
  // Two sequences of two blocks of four pages, scattered over a cache of 20 pages.
  const int max_pages = 8, cache_pages = 20, sequences = 2;
  const std::vector<int> table = {13, 2, 19, 0, 7, 7, 11, 4, 1, 18, 3, 16, 9, 5, 12, 6};
  const auto& dev = test::dev();
  const auto cache_values = test::random_values<float>(static_cast<std::size_t>(cache_pages) * page_rows * head_dim);
  auto cache = tp::tensor<float, 2>::from_host(dev, {cache_pages * static_cast<long long>(page_rows), head_dim}, cache_values);
  const long long out_rows = static_cast<long long>(sequences) * max_pages * page_rows;
  auto out = tp::tensor<float, 2>::from_host(dev, {out_rows, head_dim},
                                             std::vector<float>(static_cast<std::size_t>(out_rows) * head_dim, sentinel));
  auto t = tp::tensor<int, 1>::from_host(dev, {static_cast<long long>(table.size())}, table);
  const gathered_kernel<WarpSpecialized> kern{{t.data(), static_cast<int>(table.size())}, max_pages,
                                              max_pages / pages_per_block};
  tp::kernel(kern, {.grid = {sequences}})(dev, cache, out);
  const auto got = out.to_host();
  for (std::size_t p = 0; p < table.size(); ++p)
    for (int i = 0; i < page_rows * head_dim; ++i)
      ASSERT_EQ(got[p * page_rows * head_dim + i], 2 * cache_values[static_cast<std::size_t>(table[p]) * page_rows * head_dim + i])
          << "table entry " << p << " element " << i;
}

}  // namespace

TEST(ScalarPrefetch, GatheredBlocksFollowTheBlockTable) { check_gathered_blocks<false>(); }
TEST(ScalarPrefetch, WarpSpecializedGatheredBlocks) { check_gathered_blocks<true>(); }

TEST(ScalarPrefetch, PagedGatherFollowsTheBlockTable) { check_paged_gather<false>(); }
TEST(ScalarPrefetch, WarpSpecializedPagedGather) { check_paged_gather<true>(); }

TEST(ScalarPrefetch, ReadsOutsideATableAreReported) {
  if (test::on_gpu()) GTEST_SKIP() << "device-side check: the interpreter reports it (TILEPIPE_DEBUG on the GPU)";
  // The last sequence claims 5 pages: its index map reads block_table[12] of 12 entries.
  const std::string e = test::error_of([] { run_gather({0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3}, {4, 4, 5}, 4, 8); });
  EXPECT_NE(e.find("scalar table 'block_table' read at index 12, outside its 12 entries"), std::string::npos) << e;
  // An entry that names a page outside the cache is the pipeline's block-index check.
  const std::string e2 = test::error_of([] { run_gather({0, 9}, {2}, 2, 8); });
  EXPECT_NE(e2.find("outside"), std::string::npos) << e2;
}
