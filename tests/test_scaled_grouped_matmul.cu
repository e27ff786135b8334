// The fp8 grouped matmul with block and with row-wise scales (kernels/scaled_grouped_matmul.cuh)
// against a float64 reference computed from the dequantised inputs, on fresh random inputs: group-size
// patterns (empty groups at the start, middle and end, groups of one row, groups that end
// inside a tile, one group taking most rows), K not a multiple of 128 (an odd number of
// k-blocks, a partial last one, K under one block, K not a multiple of 16 through padded rows),
// N not a multiple of the tile, A's scales row-major (plain loads) and M-major (through SMEM
// by TMA, from a tile's first row at any row), the masked decode layout; a test whose data
// fails when a group's scales are misplaced; then bad input. Outputs start as a sentinel, so
// a row written by another group's tile, or a masked row past its group's count, shows; the
// masked rows past a count hold NaN inputs and scales, which must not reach a valid row.
#include "test_util.hpp"

#include <tilepipe/kernels/scaled_grouped_matmul.cuh>

#include <numeric>
#include <string>

namespace {

using fp8 = tp::fp8_e4m3;
constexpr float sentinel = 1234.0f;

/// Scale exponents: 10^(e + u), u uniform in [-1, 1].
double scale_of(double e, std::mt19937_64& rng) {
  return std::pow(10.0, e + std::uniform_real_distribution<double>(-1.0, 1.0)(rng));
}

/// The inputs of one call in host memory: a [rows, K] (rows of lda), b [G, N, K] (rows of
/// ldb), the scales (row-major) and the valid rows of each group. Block scales: scale_a
/// [rows, kb], scale_b [G, nb, kb]; row-wise: scale_a [rows], scale_b [G, N].
struct problem {
  long long rows = 0, K = 0, N = 0, lda = 0, ldb = 0, kb = 0, nb = 0;
  int G = 0;
  bool row_wise = false;
  std::vector<fp8> a, b;
  std::vector<float> sa, sb;
  std::vector<long long> begin;  // group g's first row
  std::vector<int> count;        // and its valid rows

  /// Values uniform in [-448, 448] before quantisation; A's scales 10^(-2 +- 1) per row (and
  /// k-block); B's 10^(group_exponent(g) +- 1) per group and 128 x 128 block (or column).
  template <class GroupExponent>
  problem(const std::vector<long long>& begin_, const std::vector<int>& count_, long long rows_, long long K_, long long N_,
          std::mt19937_64& rng, GroupExponent&& group_exponent, bool row_wise_ = false)
      : rows(rows_), K(K_), N(N_), lda((K_ + 15) / 16 * 16), ldb((K_ + 15) / 16 * 16), kb(row_wise_ ? 1 : (K_ + 127) / 128),
        nb(row_wise_ ? N_ : (N_ + 127) / 128), G(static_cast<int>(count_.size())), row_wise(row_wise_), begin(begin_),
        count(count_) {
    std::uniform_real_distribution<double> value(-448.0, 448.0);
    a.resize(static_cast<std::size_t>(std::max(rows, 1LL) * lda));
    for (auto& x : a) x = tp::from_float<fp8>(static_cast<float>(value(rng)));
    b.resize(static_cast<std::size_t>(G * N * ldb));
    for (auto& x : b) x = tp::from_float<fp8>(static_cast<float>(value(rng)));
    sa.resize(static_cast<std::size_t>(std::max(rows, 1LL) * kb));
    for (auto& s : sa) s = static_cast<float>(scale_of(-2.0, rng));
    sb.resize(static_cast<std::size_t>(G * nb * kb));
    for (int g = 0; g < G; ++g)
      for (long long i = 0; i < nb * kb; ++i) sb[g * nb * kb + i] = static_cast<float>(scale_of(group_exponent(g), rng));
  }

  /// The group of each row (-1: none's).
  std::vector<int> groups_of_rows() const {
    std::vector<int> group_of(static_cast<std::size_t>(rows), -1);
    for (int g = 0; g < G; ++g)
      for (int i = 0; i < count[g]; ++i) group_of[static_cast<std::size_t>(begin[g] + i)] = g;
    return group_of;
  }

  /// Rows outside every group get NaN inputs and scales: they must not reach a valid row.
  void poison_rows_outside_groups() {
    const auto group_of = groups_of_rows();
    for (long long r = 0; r < rows; ++r)
      if (group_of[static_cast<std::size_t>(r)] < 0) {
        for (long long k = 0; k < K; ++k) a[static_cast<std::size_t>(r * lda + k)] = tp::from_float<fp8>(NAN);
        for (long long j = 0; j < kb; ++j) sa[static_cast<std::size_t>(r * kb + j)] = NAN;  // kb = 1: row-wise
      }
  }

  /// The scale of a(i, k), and of b(g, j, k) (row-wise: kb = 1 and nb = N).
  double a_scale(long long i, long long k) const { return sa[static_cast<std::size_t>(i * kb + (row_wise ? 0 : k / 128))]; }
  double b_scale(int g, long long j, long long k) const {
    return sb[static_cast<std::size_t>(row_wise ? g * N + j : (g * nb + j / 128) * kb + k / 128)];
  }

  /// out(i, j) in float64 from the dequantised operands, row i multiplied by group
  /// weight_group(g)'s weights with scale group scale_group(g)'s scales (g: row i's group).
  double reference(long long i, long long j, int weight_group, int scale_group) const {
    double s = 0;
    for (long long k = 0; k < K; ++k)
      s += double(tp::to_float(a[static_cast<std::size_t>(i * lda + k)])) * a_scale(i, k) *
           double(tp::to_float(b[static_cast<std::size_t>((weight_group * N + j) * ldb + k)])) * b_scale(scale_group, j, k);
    return s;
  }

  /// The largest relative error of a group's rows of out (rows of ldo), with B's scales of
  /// group scale_group_of(g) for group g's rows (per group: the groups' magnitudes may differ
  /// by orders of magnitude); rows outside every group must hold the sentinel.
  template <class ScaleGroupOf>
  double error(const std::vector<tp::bf16>& out, long long ldo, ScaleGroupOf&& scale_group_of) const {
    const auto group_of = groups_of_rows();
    std::vector<std::vector<tp::bf16>> got(static_cast<std::size_t>(G));
    std::vector<std::vector<double>> want(static_cast<std::size_t>(G));
    int written = 0;
    for (long long r = 0; r < rows; ++r) {
      const int g = group_of[static_cast<std::size_t>(r)];
      for (long long j = 0; j < N; ++j) {
        const tp::bf16 o = out[static_cast<std::size_t>(r * ldo + j)];
        if (g < 0) {
          if (tp::to_float(o) != tp::to_float(tp::from_float<tp::bf16>(sentinel)) && written++ < 5)
            ADD_FAILURE() << "row " << r << " (no group's) column " << j << " was written: " << tp::to_float(o);
          continue;
        }
        got[g].push_back(o);
        want[g].push_back(reference(r, j, g, scale_group_of(g)));
      }
    }
    double worst = 0;
    for (int g = 0; g < G; ++g) {
      if (want[g].empty()) continue;
      const double e = test::rel_error(got[g], want[g]);
      if (std::isnan(e)) return NAN;
      worst = std::max(worst, e);
    }
    return worst;
  }
  double error(const std::vector<tp::bf16>& out, long long ldo) const {
    return error(out, ldo, [](int g) { return g; });
  }
};

/// A's scales M-major: the storage [kb, ld] (ld a multiple of 4 past rows), its padding NaN,
/// so that a scale read from the wrong place shows.
tp::tensor<float, 2> m_major_storage(const problem& p) {
  const long long ld = (p.rows + 3) / 4 * 4 + 4;
  std::vector<float> h(static_cast<std::size_t>(p.kb * ld), NAN);
  for (long long r = 0; r < p.rows; ++r)
    for (long long c = 0; c < p.kb; ++c) h[static_cast<std::size_t>(c * ld + r)] = p.sa[static_cast<std::size_t>(r * p.kb + c)];
  return tp::tensor<float, 2>::from_host(test::dev(), {p.kb, ld}, h);
}

/// The device tensors of a problem (flat: views give them their shapes and strides).
struct device_inputs {
  tp::tensor<fp8, 1> a, b;
  tp::tensor<float, 1> sa, sb;
  tp::tensor<float, 2> sa_m_major;
  tp::tensor<tp::bf16, 1> out;
  long long ldo;
  device_inputs(const problem& p, bool m_major, const tp::device& dev)
      : a(tp::tensor<fp8, 1>::from_host(dev, {static_cast<long long>(p.a.size())}, p.a)),
        b(tp::tensor<fp8, 1>::from_host(dev, {static_cast<long long>(p.b.size())}, p.b)),
        sa(tp::tensor<float, 1>::from_host(dev, {static_cast<long long>(p.sa.size())}, p.sa)),
        sb(tp::tensor<float, 1>::from_host(dev, {static_cast<long long>(p.sb.size())}, p.sb)),
        ldo((p.N + 7) / 8 * 8) {
    if (m_major) sa_m_major = m_major_storage(p);
    const long long n = std::max(p.rows, 1LL) * ldo;
    out = tp::tensor<tp::bf16, 1>::from_host(dev, {n}, std::vector<tp::bf16>(static_cast<std::size_t>(n),
                                                                               tp::from_float<tp::bf16>(sentinel)));
  }
};

/// A ragged call's inputs and its output (rows of ldo).
struct ragged_result {
  problem p;
  std::vector<tp::bf16> out;
  long long ldo;
};

/// The ragged layout: groups of `sizes` rows back to back; block scales (A's M-major or not)
/// or row-wise ones.
template <class GroupExponent>
ragged_result run_ragged(const std::vector<int>& sizes, long long K, long long N, bool m_major, std::uint64_t seed,
                         GroupExponent&& group_exponent, const tp::device& dev = test::dev(), bool row_wise = false) {
  std::mt19937_64 rng(seed);
  const int G = static_cast<int>(sizes.size());
  std::vector<long long> begin(G);
  std::vector<int> ends(G);
  std::partial_sum(sizes.begin(), sizes.end(), ends.begin());
  for (int g = 0; g < G; ++g) begin[g] = g ? ends[g - 1] : 0;
  const long long M = ends.back();
  problem p(begin, sizes, M, K, N, rng, group_exponent, row_wise);
  device_inputs d(p, m_major, dev);
  auto offs = tp::tensor<int, 1>::from_host(dev, {G}, ends);
  const bool gpu = dev.is_gpu();
  const tp::tensor_view<fp8, 2> a{d.a.data(), {M, K}, {p.lda, 1}, gpu};
  const tp::tensor_view<fp8, 3> b{d.b.data(), {G, N, K}, {N * p.ldb, p.ldb, 1}, gpu};
  const tp::tensor_view<float, 2> sa = m_major && !row_wise ? tp::m_major_scales(d.sa_m_major, M)
                                                            : tp::tensor_view<float, 2>{d.sa.data(), {M, p.kb}, {p.kb, 1}, gpu};
  const tp::tensor_view<float, 3> sb{d.sb.data(), {G, p.nb, p.kb}, {p.nb * p.kb, p.kb, 1}, gpu};
  const tp::tensor_view<tp::bf16, 2> out{d.out.data(), {M, N}, {d.ldo, 1}, gpu};
  if (row_wise) {
    const tp::tensor_view<float, 1> sa_rows{d.sa.data(), {M}, {1}, gpu};
    const tp::tensor_view<float, 2> sb_cols{d.sb.data(), {G, N}, {N, 1}, gpu};
    tp::scaled_grouped_matmul<fp8>(dev, a, b, sa_rows, sb_cols, offs.data(), out);
  } else {
    tp::scaled_grouped_matmul<fp8>(dev, a, b, sa, sb, offs.data(), out);
  }
  return {std::move(p), d.out.to_host(), d.ldo};
}

template <class GroupExponent>
double ragged_error(const std::vector<int>& sizes, long long K, long long N, bool m_major, std::uint64_t seed,
                    GroupExponent&& group_exponent, const tp::device& dev = test::dev(), bool row_wise = false) {
  const ragged_result r = run_ragged(sizes, K, N, m_major, seed, group_exponent, dev, row_wise);
  return r.p.error(r.out, r.ldo);
}

auto mild = [](int) { return -2.0; };

void check(const std::vector<int>& sizes, long long K, long long N, bool m_major, bool row_wise = false) {
  const std::uint64_t seed = test::fresh_seed();
  EXPECT_LT(ragged_error(sizes, K, N, m_major, seed, mild, test::dev(), row_wise), 6e-3)
      << sizes.size() << " groups, K " << K << ", N " << N << (m_major ? ", A's scales M-major" : "")
      << (row_wise ? ", row-wise scales" : "") << ", seed " << seed;
}

/// The masked layout: a [G, Mmax, K], counts[g] valid rows per group; the rows past a count
/// hold NaN.
void check_masked(const std::vector<int>& counts, long long mmax, long long K, long long N, bool m_major,
                  bool row_wise = false) {
  const auto& dev = test::dev();
  const std::uint64_t seed = test::fresh_seed();
  std::mt19937_64 rng(seed);
  const int G = static_cast<int>(counts.size());
  std::vector<long long> begin(G);
  for (int g = 0; g < G; ++g) begin[g] = g * mmax;
  problem p(begin, counts, G * mmax, K, N, rng, mild, row_wise);
  p.poison_rows_outside_groups();
  device_inputs d(p, m_major, dev);
  auto c = tp::tensor<int, 1>::from_host(dev, {G}, counts);
  const bool gpu = dev.is_gpu();
  const tp::tensor_view<fp8, 3> a{d.a.data(), {G, mmax, K}, {mmax * p.lda, p.lda, 1}, gpu};
  const tp::tensor_view<fp8, 3> b{d.b.data(), {G, N, K}, {N * p.ldb, p.ldb, 1}, gpu};
  tp::tensor_view<float, 3> sa{d.sa.data(), {G, mmax, p.kb}, {mmax * p.kb, p.kb, 1}, gpu};
  if (m_major && !row_wise) sa = {d.sa_m_major.data(), {G, mmax, p.kb}, {mmax, 1, d.sa_m_major.shape(1)}, gpu};
  const tp::tensor_view<float, 3> sb{d.sb.data(), {G, p.nb, p.kb}, {p.nb * p.kb, p.kb, 1}, gpu};
  const tp::tensor_view<tp::bf16, 3> out{d.out.data(), {G, mmax, N}, {mmax * d.ldo, d.ldo, 1}, gpu};
  if (row_wise) {
    const tp::tensor_view<float, 2> sa_rows{d.sa.data(), {G, mmax}, {mmax, 1}, gpu};
    const tp::tensor_view<float, 2> sb_cols{d.sb.data(), {G, N}, {N, 1}, gpu};
    tp::scaled_grouped_matmul_masked<fp8>(dev, a, b, sa_rows, sb_cols, c.data(), out);
  } else {
    tp::scaled_grouped_matmul_masked<fp8>(dev, a, b, sa, sb, c.data(), out);
  }
  EXPECT_LT(p.error(d.out.to_host(), d.ldo), 6e-3)
      << G << " groups of " << mmax << " rows, K " << K << ", N " << N << (m_major ? ", A's scales M-major" : "")
      << (row_wise ? ", row-wise scales" : "") << ", seed " << seed;
}

}  // namespace

TEST(ScaledGroupedMatmul, GroupPatterns) {
  for (bool m_major : {false, true}) {
    check({300}, 272, 136, m_major);                     // one group: tiles of 128, 128 and 44 rows; 3 k-blocks
    check({0, 0, 70, 0, 1, 129, 0}, 400, 128, m_major);  // empty at the start, middle and end; one row
    check({5, 17, 3, 31, 2, 60}, 144, 264, m_major);     // every group smaller than a tile
    check({100, 100, 100}, 256, 200, m_major);           // groups end inside tiles
    check({250, 3, 2, 1}, 528, 136, m_major);            // skewed: one group takes most rows
  }
}

// K not a multiple of 128 or of 16 (rows padded to 16 bytes), under one k-block, and N not a
// multiple of 8 (out's rows padded).
TEST(ScaledGroupedMatmul, OddShapes) {
  for (bool m_major : {false, true}) {
    check({33, 0, 65}, 16, 128, m_major);   // one partial k-block
    check({33, 0, 65}, 200, 100, m_major);  // K and N odd multiples of 8 and 4: padded rows
    check({77, 51}, 77, 264, m_major);      // K = 77
  }
}

TEST(ScaledGroupedMatmul, MaskedDecodeLayout) {
  for (bool m_major : {false, true}) {
    check_masked({3, 0, 64, 1}, 64, 272, 128, m_major);
    check_masked({130, 0, 7}, 136, 400, 200, m_major);  // a group over one tile; an empty one
    check_masked({0, 0}, 16, 128, 128, m_major);        // nothing valid: nothing written
    check_masked({5, 37, 0, 20}, 37, 272, 136, m_major);  // Mmax odd: groups start off 16-byte boundaries
  }
}

// Row-wise scales (torch._scaled_grouped_mm's recipe) on the 128 x 256 kernel: the group
// patterns, odd K and N (N past one and two column tiles), the masked layout.
TEST(ScaledGroupedMatmul, RowWiseScales) {
  check({300}, 272, 264, false, true);                     // a group over three row tiles, N over two column tiles
  check({0, 0, 70, 0, 1, 129, 0}, 400, 128, false, true);  // empty groups, a group of one row
  check({5, 17, 3, 31, 2, 60}, 144, 520, false, true);     // every group smaller than a tile
  check({250, 3, 2, 1}, 77, 100, false, true);             // skewed; K = 77, N = 100 (padded rows)
  check_masked({3, 0, 64, 1}, 64, 272, 136, false, true);
  check_masked({5, 37, 0, 20}, 37, 200, 264, false, true);  // Mmax odd
}

// Each group's B scales of a magnitude of their own (10^(3g - 6)): the kernel's result matches
// the reference only with every group's own scales, and the data shows it: the same reference
// with the groups' scales rotated by one (a scale read for the neighbouring group) is far off.
TEST(ScaledGroupedMatmul, EveryGroupReadsItsOwnScales) {
  const std::uint64_t seed = test::fresh_seed();
  const std::vector<int> sizes{40, 0, 130, 7, 90};
  auto spread = [](int g) { return 3.0 * g - 6.0; };
  for (int mode = 0; mode < 3; ++mode) {  // block scales (A's row-major, M-major), row-wise scales
    const bool m_major = mode == 1, row_wise = mode == 2;
    const ragged_result r = run_ragged(sizes, 400, 136, m_major, seed, spread, test::dev(), row_wise);
    const char* what = row_wise ? "row-wise scales, " : m_major ? "A's scales M-major, " : "";
    EXPECT_LT(r.p.error(r.out, r.ldo), 6e-3) << what << "seed " << seed;
    const int G = static_cast<int>(sizes.size());
    EXPECT_GT(r.p.error(r.out, r.ldo, [G](int g) { return (g + 1) % G; }), 0.5)
        << what << "the data does not expose a group's scales read for another group";
  }
}

TEST(ScaledGroupedMatmul, EveryCopyOrderAndShuffledCtas) {
  if (test::on_gpu()) GTEST_SKIP() << "interpreter schedules";
  for (auto mode : {tp::interpret::copy_mode::eager, tp::interpret::copy_mode::shuffled}) {
    tp::device dev = test::dev();
    dev.interpreter.copies = mode;
    dev.interpreter.shuffle_ctas = true;
    dev.interpreter.seed = test::fresh_seed();
    const std::uint64_t seed = test::fresh_seed();
    EXPECT_LT(ragged_error({0, 90, 1, 200, 0}, 400, 264, true, seed, mild, dev), 6e-3) << "seed " << seed;
    EXPECT_LT(ragged_error({0, 90, 1, 200, 0}, 400, 264, false, seed, mild, dev, true), 6e-3)
        << "row-wise scales, seed " << seed;
  }
}

TEST(ScaledGroupedMatmul, LargeOnTheGpu) {
  if (!test::on_gpu()) GTEST_SKIP() << "GPU sizes";
  check({1000, 0, 37, 600, 129, 300}, 1040, 384, true);
  check({1000, 0, 37, 600, 129, 300}, 1040, 384, false);
  check(std::vector<int>(32, 96), 512, 256, true);
  check_masked({200, 0, 37, 256}, 256, 1024, 512, true);
  check({1000, 0, 37, 600, 129, 300}, 1040, 600, false, true);  // row-wise
  check_masked({200, 0, 37, 256}, 256, 1024, 512, false, true);
}

TEST(ScaledGroupedMatmul, HostErrors) {
  const auto& dev = test::dev();
  const long long M = 64, N = 128, K = 256;
  tp::tensor<fp8, 2> a(dev, {M, K}), a24(dev, {M, 24});
  tp::tensor<fp8, 3> b(dev, {2, N, K}), b24(dev, {2, N, 24}), b3(dev, {3, N, K});
  tp::tensor<tp::bf16, 2> out(dev, {M, N});
  tp::tensor<float, 2> sa(dev, {M, 2}), sa_wrong(dev, {M, 1}), sa24(dev, {M, 1});
  tp::tensor<float, 3> sb(dev, {2, 1, 2}), sb_wrong(dev, {2, 1, 1}), sb24(dev, {2, 1, 1}), sb_wide(dev, {2, 4, 2});
  auto offs = tp::tensor<int, 1>::from_host(dev, {2}, std::vector<int>{32, 64});
  auto expect_error = [&](auto&& call, const std::string& message) {
    const std::string got = test::error_of(call);
    EXPECT_NE(got.find(message), std::string::npos) << "got: " << got << "\nwanted: " << message;
  };
  auto ragged = [&](const tp::tensor_view<fp8, 2>& l, const tp::tensor_view<fp8, 3>& r, const tp::tensor_view<float, 2>& s,
                    const tp::tensor_view<float, 3>& t) {
    return [&, l, r, s, t] { tp::scaled_grouped_matmul<fp8>(dev, l, r, s, t, offs.data(), out); };
  };
  expect_error(ragged(a, b, sa_wrong, sb), "scale_a is [64, 1], expected [64, 2]");
  expect_error(ragged(a, b, sa, sb_wrong), "scale_b is [2, 1, 1], expected [2, 1, 2]");
  expect_error(ragged(a, b3, sa, sb), "scale_b is [2, 1, 2], expected [3, 1, 2]");  // b's groups set G
  expect_error(ragged(a24, b24, sa24, sb24), "a's stride 24 in dimension 0 is not a multiple of 16 bytes");
  expect_error(ragged(a, tp::tensor<fp8, 3>(dev, {2, N, 128}), sa, sb), "a has K = 256 columns, b's matrices have K = 128");
  // scale_b's groups not back to back (N = 256: two blocks of N a group, in a [2, 4, 2] tensor).
  tp::tensor<fp8, 3> b256(dev, {2, 256, K});
  tp::tensor<tp::bf16, 2> out256(dev, {M, 256});
  const tp::tensor_view<float, 3> sb_strided{sb_wide.data(), {2, 2, 2}, {8, 2, 1}, dev.is_gpu()};
  expect_error([&] { tp::scaled_grouped_matmul<fp8>(dev, a, b256, sa, sb_strided, offs.data(), out256); },
               "scale_b's groups must lie back to back (stride 8 in dimension 0, expected 2 blocks x 2)");
  // The masked layout: groups of a, out and the scales.
  tp::tensor<fp8, 3> a3(dev, {2, 16, K});
  tp::tensor<tp::bf16, 3> o3(dev, {2, 16, N}), o3_short(dev, {2, 8, N});
  tp::tensor<float, 3> s3(dev, {2, 16, 2}), s3_three(dev, {3, 16, 2});
  auto masked = [&](const tp::tensor_view<float, 3>& s, const tp::tensor_view<tp::bf16, 3>& o) {
    return [&, s, o] { tp::scaled_grouped_matmul_masked<fp8>(dev, a3, b, s, sb, offs.data(), o); };
  };
  expect_error(masked(s3_three, o3), "a has 2 groups, b 2, out 2 and scale_a 3");
  expect_error(masked(s3, o3_short), "a has 16 rows per group, out 8 and scale_a 16");
  // Row-wise scales: scale_a [M] (masked [G, Mmax], groups back to back), scale_b [G, N].
  tp::tensor<float, 1> sa_rows(dev, {M}), sa_short(dev, {M - 1});
  tp::tensor<float, 2> sb_cols(dev, {2, N}), sb_cols_short(dev, {2, N - 8}), sa_masked(dev, {2, 32});
  auto row_wise = [&](const tp::tensor_view<float, 1>& s, const tp::tensor_view<float, 2>& t) {
    return [&, s, t] { tp::scaled_grouped_matmul<fp8>(dev, a, b, s, t, offs.data(), out); };
  };
  expect_error(row_wise(sa_short, sb_cols), "row-wise scale_a has 63 scales, expected one per row of a (64)");
  expect_error(row_wise(sa_rows, sb_cols_short), "row-wise scale_b is [2, 120], expected [2, 128]");
  const tp::tensor_view<float, 2> sa_gapped{sa_masked.data(), {2, 16}, {32, 1}, dev.is_gpu()};
  expect_error([&] { tp::scaled_grouped_matmul_masked<fp8>(dev, a3, b, sa_gapped, sb_cols.view(), offs.data(), o3); },
               "scale_a's groups must lie back to back (stride 32 in dimension 0, expected 16 x 1)");
}
