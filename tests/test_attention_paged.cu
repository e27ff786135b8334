// Attention over a KV cache (attention_options::seqused_k and page_table, the decode kernel
// in kernels/attention_decode.cuh) against a float64 reference on fresh random inputs, and
// against the unpaged kernel on the same keys: query rows 1, 2, 7, 16 (decode) and 17 to 130
// (chunked prefill), GQA ratios 1, 4, 8,
// KV lengths 0, 1, one page, a page + 1 and ragged per sequence, page sizes 16 to 256 (one
// box per KV block where a page holds it, boxes of 16 rows from several pages where it does
// not), 1 to 64 splits with empty ones, masks, head dims and types. Page tables are
// shuffled: a sequence's pages lie anywhere in a pool larger than needed, the pages no
// sequence uses, the rows of a last page past its sequence's keys and the same rows of the
// unpaged cache are NaN, and table entries past a sequence's pages point outside the pool, so
// a read of anything but a sequence's keys shows. Outputs start as NaN. A paged run gives
// the bytes of the unpaged run with seqused_k (the KV blocks and splits are the same).
// Bad tables and lengths are reported by the kernel in the interpreter, and clipped in a
// release GPU build; bad shapes and page sizes by the host. An fp8 (e4m3) cache with scales
// per tensor and per KV head, against the reference on the values its codes stand for (its
// unused rows hold NaN codes).
#include "attention_instances.hpp"
#include "fp8_kv.hpp"
#include "test_util.hpp"

#include <tilepipe/kernels/attention.cuh>

#include "examples/common/attention_reference.hpp"

#include <cstring>
#include <numeric>

namespace {

struct problem {
  int sq = 1;             // query rows of every sequence (fixed-length queries)
  std::vector<int> used;  // keys per sequence (seqused_k)
  int hq = 4, hkv = 1, d = 64, page = 16;
  int splits = 1;  // attention_options::num_splits
  reference::attention_mask mask{};
  int spare_pages = 3;  // pages in the pool beyond those the sequences use
  std::vector<int> q_lengths{};  // non-empty: varlen queries, sequence b's rows (sq is ignored)

  bool varlen() const { return !q_lengths.empty(); }
  std::vector<int> query_rows() const { return varlen() ? q_lengths : std::vector<int>(used.size(), sq); }
  int max_sq() const {
    const auto rows = query_rows();
    return rows.empty() ? 0 : *std::max_element(rows.begin(), rows.end());
  }
};

std::vector<int> prefix(const std::vector<int>& n) {
  std::vector<int> cu{0};
  for (int x : n) cu.push_back(cu.back() + x);
  return cu;
}

/// The same keys and values three ways: packed for the reference, paged, and unpaged
/// [B, max_pages * page, Hkv, D] for the kernel with seqused_k alone. K and V of type KV: T,
/// or fp8_e4m3 codes with their scales (one, or one per KV head with fp8_per_head).
template <class T, class KV = T>
struct cache {
  int batches = 0, max_pages = 0, num_pages = 0;
  std::vector<T> q;                     // [B, Sq, Hq, D], or [total_q, Hq, D] for varlen queries
  std::vector<KV> k_packed, v_packed;   // [sum used, Hkv, D]
  std::vector<float> k_values, v_values;  // what k_packed and v_packed stand for (fp8: dequantised)
  test::fp8_scales scales;              // fp8: the scales
  std::vector<KV> k_pages, v_pages;     // [num_pages, page, Hkv, D]
  std::vector<KV> k_flat, v_flat;       // [B, max_pages * page, Hkv, D]
  std::vector<int> table;               // [B, max_pages]

  explicit cache(const problem& p, bool fp8_per_head = false) {
    std::mt19937 rng(static_cast<unsigned>(test::fresh_seed()));
    batches = static_cast<int>(p.used.size());
    const long long row = static_cast<long long>(p.hkv) * p.d;  // elements per key
    std::vector<int> pages_of(batches);
    int needed = 0;
    for (int b = 0; b < batches; ++b) {
      pages_of[b] = (p.used[b] + p.page - 1) / p.page;
      needed += pages_of[b];
      max_pages = std::max(max_pages, pages_of[b]);
    }
    max_pages += 1;  // a column no sequence reaches: out-of-pool entries the kernel must not read
    num_pages = needed + p.spare_pages;
    q = test::random_values<T>(static_cast<std::size_t>(prefix(p.query_rows()).back()) * p.hq * p.d, test::fresh_seed(), -2, 2);
    const long long total = prefix(p.used).back();
    const auto n = static_cast<std::size_t>(total * row);
    if constexpr (std::is_same_v<KV, tp::fp8_e4m3>) {
      const test::fp8_tensor k(n, p.hkv, p.d, fp8_per_head, false, test::fresh_seed());
      const test::fp8_tensor v(n, p.hkv, p.d, fp8_per_head, false, test::fresh_seed());
      k_packed = k.codes, v_packed = v.codes, k_values = k.values, v_values = v.values;
      scales = {k.scale, v.scale, fp8_per_head};
    } else {
      k_packed = test::random_values<T>(n, test::fresh_seed(), -2, 2);
      v_packed = test::random_values<T>(n);
      k_values = test::as_floats(k_packed), v_values = test::as_floats(v_packed);
    }
    // The pool in a random order; entries past a sequence's pages alternate between one
    // past the pool and -1.
    std::vector<int> pool(num_pages);
    std::iota(pool.begin(), pool.end(), 0);
    std::shuffle(pool.begin(), pool.end(), rng);
    table.assign(static_cast<std::size_t>(batches) * max_pages, 0);
    int next = 0;
    for (int b = 0; b < batches; ++b)
      for (int i = 0; i < max_pages; ++i)
        table[b * max_pages + i] = i < pages_of[b] ? pool[next++] : (i % 2 ? -1 : num_pages);
    const KV nan = tp::from_float<KV>(NAN);  // e4m3: the NaN code 0x7f
    k_pages.assign(static_cast<std::size_t>(num_pages) * p.page * row, nan);
    v_pages = k_pages;
    k_flat.assign(static_cast<std::size_t>(batches) * max_pages * p.page * row, nan);
    v_flat = k_flat;
    const auto cu = prefix(p.used);
    for (int b = 0; b < batches; ++b)
      for (int j = 0; j < p.used[b]; ++j) {
        const long long from = (cu[b] + j) * row;
        const long long paged = (static_cast<long long>(table[b * max_pages + j / p.page]) * p.page + j % p.page) * row;
        const long long flat = (static_cast<long long>(b) * max_pages * p.page + j) * row;
        std::copy_n(k_packed.begin() + from, row, k_pages.begin() + paged);
        std::copy_n(v_packed.begin() + from, row, v_pages.begin() + paged);
        std::copy_n(k_packed.begin() + from, row, k_flat.begin() + flat);
        std::copy_n(v_packed.begin() + from, row, v_flat.begin() + flat);
      }
  }
};

template <class T>
struct outputs {
  std::vector<T> o;
  std::vector<float> lse;  // [B, Hq, Sq], or [Hq, total_q] for varlen queries
};

/// Runs attention on the paged cache (paged) or on the unpaged one with seqused_k.
template <class T, class KV>
outputs<T> run(const tp::device& dev, const problem& p, const cache<T, KV>& c, bool paged, tp::partials_ref ws) {
  const long long b = c.batches, rows = static_cast<long long>(c.max_pages) * p.page;
  const auto cu_q = prefix(p.query_rows());
  const long long total_q = cu_q.back();
  const std::size_t n_o = static_cast<std::size_t>(total_q) * p.hq * p.d;
  auto q4 = tp::tensor<T, 4>::from_host(dev, {b, p.sq, p.hq, p.d}, p.varlen() ? std::vector<T>(b * p.sq * p.hq * p.d) : c.q);
  auto o4 = tp::tensor<T, 4>::from_host(dev, {b, p.sq, p.hq, p.d}, std::vector<T>(b * p.sq * p.hq * p.d, tp::from_float<T>(NAN)));
  auto q3 = tp::tensor<T, 3>::from_host(dev, {total_q, p.hq, p.d}, p.varlen() ? c.q : std::vector<T>(n_o));
  auto o3 = tp::tensor<T, 3>::from_host(dev, {total_q, p.hq, p.d}, std::vector<T>(n_o, tp::from_float<T>(NAN)));
  auto cu = tp::tensor<int, 1>::from_host(dev, {b + 1}, cu_q);
  auto lse = tp::tensor<float, 1>::from_host(dev, {total_q * p.hq}, std::vector<float>(total_q * p.hq, NAN));
  auto used = tp::tensor<int, 1>::from_host(dev, {b}, p.used);
  const long long table_entries = b * c.max_pages;  // a named size: nvcc's front end rejects {b * c.max_pages} here
  auto table = tp::tensor<int, 1>::from_host(dev, {table_entries}, c.table);
  tp::attention_options opt{.causal = p.mask.causal, .window_left = p.mask.window_left,
                            .window_right = p.mask.window_right, .lse = lse.data(), .num_splits = p.splits,
                            .partials = ws, .seqused_k = used.data()};
  if (paged) opt.page_table = table.data(), opt.max_pages_per_seq = c.max_pages;
  tp::tensor<float, 1> k_scale, v_scale;
  if (!c.scales.k.empty()) {
    k_scale = tp::tensor<float, 1>::from_host(dev, {static_cast<long long>(c.scales.k.size())}, c.scales.k);
    v_scale = tp::tensor<float, 1>::from_host(dev, {static_cast<long long>(c.scales.v.size())}, c.scales.v);
    opt.k_scale = k_scale.data(), opt.v_scale = v_scale.data(), opt.kv_scale_per_head = c.scales.per_head;
  }
  auto k = paged ? tp::tensor<KV, 4>::from_host(dev, {c.num_pages, p.page, p.hkv, p.d}, c.k_pages)
                 : tp::tensor<KV, 4>::from_host(dev, {b, rows, p.hkv, p.d}, c.k_flat);
  auto v = paged ? tp::tensor<KV, 4>::from_host(dev, {c.num_pages, p.page, p.hkv, p.d}, c.v_pages)
                 : tp::tensor<KV, 4>::from_host(dev, {b, rows, p.hkv, p.d}, c.v_flat);
  if (p.varlen()) {
    tp::attention_forward_varlen<T>(dev, q3, k, v, o3, cu.data(), static_cast<int>(b), p.max_sq(), opt);
    return {o3.to_host(), lse.to_host()};
  }
  tp::attention_forward<T>(dev, q4, k, v, o4, opt);
  return {o4.to_host(), lse.to_host()};
}

template <class T, class KV>
void expect_matches_reference(const problem& p, const cache<T, KV>& c, const outputs<T>& out) {
  const std::vector<int> cu_q = prefix(p.query_rows()), cu_k = prefix(p.used);
  std::vector<double> ref_o, ref_lse;
  reference::attention(test::as_floats(c.q), c.k_values, c.v_values, p.hq, p.hkv, p.d, cu_q, cu_k,
                       1.0 / std::sqrt(static_cast<double>(p.d)), p.mask, ref_o, ref_lse);
  EXPECT_LT(test::rel_error(out.o, ref_o), 1e-2) << "O";
  const int total_q = cu_q.back();
  int bad = 0;
  for (int b = 0; b < c.batches; ++b)
    for (int h = 0; h < p.hq; ++h)
      for (int i = 0; i < cu_q[b + 1] - cu_q[b]; ++i) {
        const double want = ref_lse[static_cast<std::size_t>(h * total_q + cu_q[b] + i)];
        const float g = out.lse[static_cast<std::size_t>(p.varlen() ? h * total_q + cu_q[b] + i : (b * p.hq + h) * p.sq + i)];
        const bool ok = std::isinf(want) ? std::isinf(g) && g < 0 : std::abs(g - want) <= 2e-3 * std::max(1.0, std::abs(want));
        if (!ok && bad++ < 5)
          ADD_FAILURE() << "LSE of sequence " << b << " head " << h << " row " << i << ": " << g << ", want " << want;
      }
}

template <class T>
bool bitwise_equal(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

/// Fresh inputs: the paged run against the reference, and bitwise against the unpaged run;
/// K and V of type KV (fp8_e4m3: scales per KV head or per tensor).
template <class T, class KV = T>
void check(const problem& p, bool fp8_per_head = false) {
  ::testing::Message what;
  what << "sq";
  for (int x : p.query_rows()) what << " " << x;
  what << ", used";
  for (int x : p.used) what << " " << x;
  what << ", hq " << p.hq << " hkv " << p.hkv << " d " << p.d << " page " << p.page << " splits " << p.splits
       << (p.mask.causal ? " causal" : "") << " window " << p.mask.window_left << " " << p.mask.window_right
       << " K and V " << tp::dtype_traits<KV>::name << (fp8_per_head ? " scales per head" : "");
  SCOPED_TRACE(what);
  const auto& dev = test::dev();
  const cache<T, KV> c(p, fp8_per_head);
  const int tiles = c.batches * p.hkv * ((p.max_sq() * p.hq / p.hkv + 63) / 64);
  const tp::partials_buffer ws(dev, std::max(tp::attention_partial_slots(dev), tiles * std::max(p.splits, 1)),
                               tp::attention_partial_floats(p.d));
  const auto paged = run(dev, p, c, true, ws.ref());
  expect_matches_reference(p, c, paged);
  const auto flat = run(dev, p, c, false, ws.ref());
  expect_matches_reference(p, c, flat);
  EXPECT_TRUE(bitwise_equal(paged.o, flat.o)) << "O, paged and unpaged";
  EXPECT_TRUE(bitwise_equal(paged.lse, flat.lse)) << "LSE, paged and unpaged";
}

constexpr reference::attention_mask causal{.causal = true};

}  // namespace

// Lengths 0, 1, a page, a page + 1 and two pages and a half in one batch, for pages smaller
// than the KV block (boxes of 16 rows), equal to it and larger (one box per block).
TEST(AttentionPaged, LengthsAroundAPage) {
  for (int page : {16, 64, 256}) {
    check<tp::bf16>({.sq = 1, .used = {0, 1, page, page + 1, 5 * page / 2}, .hq = 4, .hkv = 1, .page = page, .splits = 2});
    check<tp::bf16>({.sq = 2, .used = {page + 1, 3}, .hq = 8, .hkv = 2, .page = page, .splits = 1, .mask = causal});
  }
  check<tp::bf16>({.sq = 1, .used = {0, 0}, .hq = 2, .hkv = 1, .page = 32, .splits = 3});  // no keys anywhere
  check<tp::bf16>({.sq = 1, .used = {129, 96}, .hq = 4, .hkv = 2, .page = 32, .splits = 2});  // two boxes per page
  check<tp::bf16>({.sq = 1, .used = {129, 96}, .hq = 4, .hkv = 2, .page = 128, .splits = 2});  // one page per block
}

// Packed rows sq x G, GQA 1, 4 and 8, ragged lengths, with and without splits and a mask.
TEST(AttentionPaged, QueryRowsTimesGroupedHeads) {
  for (int sq : {1, 2, 7, 16})
    for (int group : {1, 4, 8}) {
      check<tp::bf16>({.sq = sq, .used = {37, 150}, .hq = group, .hkv = 1, .page = 16, .splits = 1});
      check<tp::bf16>({.sq = sq, .used = {200, 17}, .hq = 2 * group, .hkv = 2, .page = 64, .splits = 2, .mask = causal});
    }
}

// 1 to 64 splits, most of them empty; the kernel's own choice (from the table's capacity).
TEST(AttentionPaged, SplitsWithEmptyOnes) {
  for (int splits : {1, 2, 5, 64, 0})
    check<tp::bf16>({.sq = 1, .used = {300, 20, 0}, .hq = 8, .hkv = 1, .page = 16, .splits = splits});
  check<tp::f16>({.sq = 3, .used = {260, 1}, .hq = 4, .hkv = 2, .page = 256, .splits = 64, .mask = causal});
}

TEST(AttentionPaged, MasksHeadDimsAndTypes) {
  check<tp::bf16>({.sq = 7, .used = {400, 90}, .hq = 4, .hkv = 1, .page = 16, .splits = 3,
                   .mask = {.window_left = 100, .window_right = 2}});
  check<tp::f16>({.sq = 5, .used = {300}, .hq = 2, .hkv = 2, .page = 32, .splits = 2,
                  .mask = {.causal = true, .window_left = 70}});
  check<tp::bf16>({.sq = 1, .used = {200, 33}, .hq = 4, .hkv = 1, .d = 128, .page = 16, .splits = 2});
  check<tp::f16>({.sq = 3, .used = {131, 128}, .hq = 8, .hkv = 2, .d = 128, .page = 128, .splits = 1, .mask = causal});
  check<tp::bf16>({.sq = 2, .used = {150, 40}, .hq = 4, .hkv = 1, .d = 256, .page = 16, .splits = 2, .mask = causal});
  check<tp::f16>({.sq = 1, .used = {150}, .hq = 2, .hkv = 1, .d = 256, .page = 64, .splits = 1});
}

// Chunked prefill: more than 16 new queries against the cache (the decode kernel's schedule,
// several 64-row tiles per KV head), causal aligned to the end of each sequence's keys.
TEST(AttentionPaged, ChunkedPrefill) {
  check<tp::bf16>({.sq = 17, .used = {40, 300}, .hq = 4, .hkv = 1, .page = 16, .splits = 2, .mask = causal});
  check<tp::bf16>({.sq = 64, .used = {64, 200}, .hq = 2, .hkv = 2, .page = 128, .splits = 1, .mask = causal});
  check<tp::f16>({.sq = 130, .used = {500, 131}, .hq = 1, .hkv = 1, .d = 128, .page = 32, .splits = 3, .mask = causal});
  check<tp::bf16>({.sq = 40, .used = {100, 90}, .hq = 8, .hkv = 2, .page = 64, .splits = 0});
}

// Varlen queries against the cache (attention_forward_varlen with 4-D k and v): decode rows
// and chunks of different lengths in one batch, empty ones too.
TEST(AttentionPaged, VariableLengthQueries) {
  check<tp::bf16>({.used = {300, 17, 0, 64}, .hq = 4, .hkv = 1, .page = 16, .splits = 2, .mask = causal,
                   .q_lengths = {1, 17, 0, 5}});
  check<tp::f16>({.used = {129, 40}, .hq = 8, .hkv = 2, .page = 128, .splits = 1, .q_lengths = {30, 2}});
  check<tp::bf16>({.used = {260, 90, 33}, .hq = 2, .hkv = 1, .d = 128, .page = 64, .splits = 0, .mask = causal,
                   .q_lengths = {70, 1, 33}});
}

// The boxes of a gathered block land in any order (the interpreter's shuffled copies), and
// any split of a tile may combine (shuffled CTAs): the same bytes (16-bit and fp8 caches).
template <class KV>
void expect_same_bytes_in_shuffled_orders() {
  const problem p{.sq = 2, .used = {300, 45}, .hq = 8, .hkv = 2, .page = 16, .splits = 3, .mask = causal};
  const cache<tp::bf16, KV> c(p, true);
  const auto& dev = test::dev();
  const tp::partials_buffer ws(dev, 64, tp::attention_partial_floats(p.d));
  const auto first = run(dev, p, c, true, ws.ref());
  expect_matches_reference(p, c, first);
  tp::device shuffled = dev;
  shuffled.interpreter.shuffle_ctas = true;
  shuffled.interpreter.copies = tp::interpret::copy_mode::shuffled;
  for (std::uint64_t seed : {5u, 6u}) {
    shuffled.interpreter.seed = seed;
    const auto other = run(shuffled, p, c, true, ws.ref());
    EXPECT_TRUE(bitwise_equal(first.o, other.o) && bitwise_equal(first.lse, other.lse)) << "seed " << seed;
  }
}

TEST(AttentionPaged, ShuffledCopyAndCtaOrders) {
  if (test::on_gpu()) GTEST_SKIP() << "the interpreter's copy and CTA orders";
  expect_same_bytes_in_shuffled_orders<tp::bf16>();
  expect_same_bytes_in_shuffled_orders<tp::fp8_e4m3>();
}

TEST(AttentionPaged, LargeOnTheGpu) {
  if (!test::on_gpu()) GTEST_SKIP() << "GPU sizes";
  check<tp::bf16>({.sq = 1, .used = {131072, 70000}, .hq = 32, .hkv = 8, .d = 128, .page = 16, .splits = 0});
  check<tp::bf16>({.sq = 4, .used = {32768, 1, 0, 9000}, .hq = 16, .hkv = 2, .d = 128, .page = 128, .splits = 0,
                   .mask = causal});
  check<tp::f16>({.sq = 16, .used = {8192, 8191}, .hq = 8, .hkv = 1, .d = 64, .page = 256, .splits = 64});
  check<tp::bf16>({.sq = 2, .used = {20000, 4097}, .hq = 8, .hkv = 1, .d = 256, .page = 32, .splits = 7});
}

TEST(AttentionPaged, BadShapesAreReported) {
  const auto& dev = test::dev();
  auto t = [&](long long a, long long b, long long h) { return tp::tensor<tp::bf16, 4>(dev, {a, b, h, 64}); };
  auto q = t(2, 1, 8), o = t(2, 1, 8);
  auto used = tp::tensor<int, 1>::from_host(dev, {2}, std::vector<int>{5, 5});
  auto table = tp::tensor<int, 1>::from_host(dev, {8}, std::vector<int>(8, 0));
  auto error = [&](long long pages, long long page, tp::attention_options opt) {
    auto k = t(pages, page, 2), v = t(pages, page, 2);
    return test::error_of([&] { tp::attention_forward<tp::bf16>(dev, q, k, v, o, opt); });
  };
  const tp::attention_options ok{.seqused_k = used.data(), .page_table = table.data(), .max_pages_per_seq = 4};
  EXPECT_EQ(error(3, 16, ok), "");
  for (long long page : {8, 48, 512})
    EXPECT_NE(error(3, page, ok).find("page size " + std::to_string(page) + " (dimension 1 of the paged k and v, "
                                      "[num_pages, page_size, Hkv, D]) is not supported: a power of two from 16 to 256"),
              std::string::npos);
  auto without_lengths = ok;
  without_lengths.seqused_k = nullptr;
  EXPECT_NE(error(3, 16, without_lengths).find("page_table needs seqused_k"), std::string::npos);
  auto no_row = ok;
  no_row.max_pages_per_seq = 0;
  EXPECT_NE(error(3, 16, no_row).find("page_table needs max_pages_per_seq, its row length (>= 1), got 0"),
            std::string::npos);
  // A cache is k and v as a whole, not packed rows; varlen queries against one need the lengths.
  auto q3 = tp::tensor<tp::bf16, 3>(dev, {4, 8, 64}), k3 = tp::tensor<tp::bf16, 3>(dev, {10, 2, 64});
  auto cu = tp::tensor<int, 1>::from_host(dev, {3}, std::vector<int>{0, 2, 4});
  EXPECT_NE(test::error_of([&] {
              tp::attention_forward_varlen<tp::bf16>(dev, q3, k3, k3, q3, cu.data(), cu.data(), 2, 2,
                                                     {.seqused_k = used.data()});
            }).find("not packed rows with cu_seqlens_k"),
            std::string::npos);
  auto cache_k = t(2, 16, 2), pages_k = t(3, 16, 2);
  EXPECT_NE(test::error_of([&] { tp::attention_forward_varlen<tp::bf16>(dev, q3, cache_k, cache_k, q3, cu.data(), 2, 2, {}); })
                .find("varlen queries against a 4-D k and v need seqused_k"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] {
              tp::attention_forward_varlen<tp::bf16>(dev, q3, t(3, 16, 2), t(3, 16, 2), q3, cu.data(), 2, 2,
                                                     {.seqused_k = used.data()});
            }).find("k has 3 sequences, the batch 2"),
            std::string::npos);
  EXPECT_EQ(test::error_of([&] { tp::attention_forward_varlen<tp::bf16>(dev, q3, pages_k, pages_k, q3, cu.data(), 2, 2, ok); }),
            "");
}

// Entries of the table outside the pool and lengths beyond the table: the kernel reports
// them in the interpreter (and TILEPIPE_DEBUG GPU builds); a release GPU build clips them
// (a wrong page, never a read outside k and v: compute-sanitizer's memcheck shows none).
TEST(AttentionPaged, BadTablesAreReportedByTheKernelOrClipped) {
  const auto& dev = test::dev();
  const int pages = 6, page = 16, max_pages = 3;
  auto t = [&](long long a, long long b, long long h) {
    return tp::tensor<tp::bf16, 4>::from_host(dev, {a, b, h, 64},
                                              test::random_values<tp::bf16>(static_cast<std::size_t>(a * b * h * 64)));
  };
  auto q = t(2, 1, 4), o = t(2, 1, 4), k = t(pages, page, 1), v = t(pages, page, 1);
  auto flat_k = t(2, 40, 1), flat_v = t(2, 40, 1);
  const tp::partials_buffer ws(dev, 64, tp::attention_partial_floats(64));
  auto run = [&](std::vector<int> used, std::vector<int> table, bool paged) {
    auto u = tp::tensor<int, 1>::from_host(dev, {2}, used);
    auto tb = tp::tensor<int, 1>::from_host(dev, {2 * max_pages}, table);
    tp::attention_options opt{.num_splits = 2, .partials = ws.ref(), .seqused_k = u.data()};
    if (paged) opt.page_table = tb.data(), opt.max_pages_per_seq = max_pages;
    return test::error_of([&] {
      if (paged) tp::attention_forward<tp::bf16>(dev, q, k, v, o, opt);
      else tp::attention_forward<tp::bf16>(dev, q, flat_k, flat_v, o, opt);
    });
  };
  EXPECT_EQ(run({40, 17}, {5, 0, 2, 1, 3, 4}, true), "");
  const std::string out_of_pool = run({40, 17}, {5, 0, 2, 1, 6, 4}, true);
  const std::string negative = run({40, 17}, {5, -3, 2, 1, 3, 4}, true);
  const std::string too_long = run({49, 17}, {5, 0, 2, 1, 3, 4}, true);
  const std::string negative_length = run({40, -1}, {5, 0, 2, 1, 3, 4}, true);
  const std::string beyond_k = run({41, 17}, {5, 0, 2, 1, 3, 4}, false);
  // No keys at all: the call gives the kernel one row of q as k, which a length must not reach.
  auto empty = tp::tensor<tp::bf16, 4>(dev, {2, 0, 1, 64});
  auto one_key = tp::tensor<int, 1>::from_host(dev, {2}, std::vector<int>{0, 1});
  const std::string beyond_empty_k = test::error_of([&] {
    tp::attention_forward<tp::bf16>(dev, q, empty, empty, o, {.seqused_k = one_key.data()});
  });
  if (test::on_gpu()) {
#ifndef TILEPIPE_DEBUG
    for (const auto& e : {out_of_pool, negative, too_long, negative_length, beyond_k, beyond_empty_k}) EXPECT_EQ(e, "");
#endif
    return;
  }
  EXPECT_NE(out_of_pool.find("page_table[1][1] = 6, outside the 6 pages of k and v"), std::string::npos) << out_of_pool;
  EXPECT_NE(negative.find("page_table[0][1] = -3, outside the 6 pages of k and v"), std::string::npos) << negative;
  EXPECT_NE(too_long.find("seqused_k[0] = 49 keys, outside [0, 48]: the page table has 3 pages of 16 keys per "
                          "sequence"),
            std::string::npos)
      << too_long;
  EXPECT_NE(negative_length.find("seqused_k[1] = -1 keys, outside [0, 48]"), std::string::npos) << negative_length;
  EXPECT_NE(beyond_k.find("seqused_k[0] = 41 keys, outside [0, 40] (the rows of k)"), std::string::npos) << beyond_k;
  EXPECT_NE(beyond_empty_k.find("seqused_k[1] = 1 keys, outside [0, 0] (the rows of k)"), std::string::npos)
      << beyond_empty_k;
}

// ---- an fp8 (e4m3) cache ---------------------------------------------------------------

template <class T>
void check_fp8(const problem& p, bool per_head) {
  check<T, tp::fp8_e4m3>(p, per_head);
}

// Lengths around a page for pages smaller than, equal to and larger than the KV block, GQA
// 1, 4 and 8, query rows 1 to 16, splits with empty ones, and scales per tensor and per head.
TEST(AttentionPagedFp8Kv, LengthsPagesAndGroups) {
  for (int page : {16, 64, 256}) {
    check_fp8<tp::bf16>({.sq = 1, .used = {0, 1, page, page + 1, 5 * page / 2}, .hq = 4, .hkv = 1, .page = page,
                         .splits = 2}, false);
    check_fp8<tp::bf16>({.sq = 2, .used = {page + 1, 3}, .hq = 8, .hkv = 2, .page = page, .splits = 1, .mask = causal},
                        true);
  }
  for (int sq : {1, 7, 16})
    for (int group : {1, 8})
      check_fp8<tp::bf16>({.sq = sq, .used = {200, 17}, .hq = 2 * group, .hkv = 2, .page = 64, .splits = 3,
                           .mask = causal}, true);
  for (int splits : {5, 64, 0})
    check_fp8<tp::bf16>({.sq = 1, .used = {300, 20, 0}, .hq = 8, .hkv = 2, .page = 16, .splits = splits}, true);
}

TEST(AttentionPagedFp8Kv, HeadDimsTypesChunksAndVarlen) {
  check_fp8<tp::f16>({.sq = 3, .used = {131, 128}, .hq = 8, .hkv = 2, .d = 128, .page = 128, .splits = 1,
                      .mask = causal}, true);
  check_fp8<tp::bf16>({.sq = 2, .used = {150, 40}, .hq = 4, .hkv = 2, .d = 256, .page = 16, .splits = 2, .mask = causal},
                      true);
  check_fp8<tp::f16>({.sq = 1, .used = {150}, .hq = 2, .hkv = 1, .d = 256, .page = 64, .splits = 1}, false);
  check_fp8<tp::bf16>({.sq = 40, .used = {100, 90}, .hq = 8, .hkv = 2, .page = 32, .splits = 2, .mask = causal}, true);
  check_fp8<tp::bf16>({.used = {300, 17, 0, 64}, .hq = 4, .hkv = 2, .d = 128, .page = 16, .splits = 2, .mask = causal,
                       .q_lengths = {1, 17, 0, 5}}, true);
}

TEST(AttentionPagedFp8Kv, LargeOnTheGpu) {
  if (!test::on_gpu()) GTEST_SKIP() << "GPU sizes";
  check_fp8<tp::bf16>({.sq = 1, .used = {131072, 70000}, .hq = 32, .hkv = 8, .d = 128, .page = 16, .splits = 0}, true);
  check_fp8<tp::bf16>({.sq = 4, .used = {32768, 1, 0, 9000}, .hq = 16, .hkv = 2, .d = 128, .page = 128, .splits = 0,
                       .mask = causal}, false);
  check_fp8<tp::f16>({.sq = 2, .used = {20000, 4097}, .hq = 8, .hkv = 1, .d = 256, .page = 32, .splits = 7}, true);
}
