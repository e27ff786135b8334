// Register-tile operations against host arithmetic: elementwise math, row reductions and
// broadcasts, casts, index-aware maps, stores to swizzled SMEM and TMA stores, and the
// arithmetic of row vectors (online softmax statistics).
#include "test_util.hpp"

namespace {

constexpr int M = 128, N = 64;
using x_tile = tp::tile<tp::block<M, N>>;
using z_tile = tp::tile<tp::block<M, N>, tp::swizzle<128>>;
using s_tile = tp::tile<tp::block<M, 8>>;

struct ops_kernel {
  // x -> y = softmax rows of x via exp2, z = bf16(max(x, 0) * 2 - x / 4 + 1) in a swizzled
  // tile, s = (row max, row sum) broadcast to 8 columns, u = x masked below the diagonal,
  // w = x outside a band of columns (mask_columns) set to -inf.
  TP_HD void operator()(tp::kernel_context&, tp::gmem<float, 2, x_tile> x, tp::gmem<float, 2, x_tile> y,
                        tp::gmem<tp::bf16, 2, z_tile> z, tp::gmem<float, 2, s_tile> s, tp::gmem<float, 2, x_tile> u,
                        tp::gmem<float, 2, x_tile> w, tp::smem<float, x_tile> xs, tp::smem<tp::bf16, z_tile> zs, tp::smem<float, s_tile> ss,
                        tp::barriers<1> bar) const {
    tp::copy_gmem_to_smem(x, tp::idx(0, 0), xs, bar[0]);
    tp::barrier_wait(bar[0], 0);
    const auto f = tp::load<float>(xs);
    tp::commit_smem();  // every thread has read xs before it is rewritten below

    const auto mx = tp::row_max(f);
    const auto e = tp::exp2(f - mx);
    const auto sum = tp::row_sum(e);
    tp::store(xs, e / sum);
    tp::commit_smem();
    tp::copy_smem_to_gmem(xs, y, tp::idx(0, 0));
    tp::wait_smem_to_gmem<0>();

    tp::store(zs, tp::cast<tp::bf16>(tp::max(f, 0.0f) * 2.0f - f / 4.0f + 1.0f));
    const auto stats = tp::map(tp::zeros<float, M, 8>(), [&](float, int, int c) { return c; });
    tp::store(ss, tp::broadcast_rows(tp::broadcast_rows(stats, mx, [](float c, float m) { return c == 0 ? m : c; }), sum,
                                     [](float c, float v) { return c == 1 ? v : c; }));
    tp::commit_smem();
    tp::copy_smem_to_gmem(zs, z, tp::idx(0, 0));
    tp::copy_smem_to_gmem(ss, s, tp::idx(0, 0));
    tp::wait_smem_to_gmem<0>();

    tp::store(xs, tp::map(f, [](float v, int r, int c) { return c <= r ? v : 0.0f; }));
    tp::commit_smem();
    tp::copy_smem_to_gmem(xs, u, tp::idx(0, 0));
    tp::wait_smem_to_gmem<0>();

    auto banded = f;
    tp::mask_columns(banded, [](int r) { return tp::column_range{r / 2 - 7, r + 3}; }, -INFINITY);
    tp::store(xs, banded);
    tp::commit_smem();
    tp::copy_smem_to_gmem(xs, w, tp::idx(0, 0));
    tp::wait_smem_to_gmem<0>();
  }
};

}  // namespace

TEST(Ops, FragmentMathReductionsCastsAndStores) {
  const auto hx = test::random_values<float>(M * N, test::fresh_seed(), -3.0f, 3.0f);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {M, N}, hx);
  tp::tensor<float, 2> y(test::dev(), {M, N}), u(test::dev(), {M, N}), w(test::dev(), {M, N}), s(test::dev(), {M, 8});
  tp::tensor<tp::bf16, 2> z(test::dev(), {M, N});
  y.poison(), u.poison(), w.poison(), s.poison(), z.poison();
  tp::kernel(ops_kernel{}, {.grid = {1}})(test::dev(), x, y, z, s, u, w);
  const auto hy = y.to_host(), hu = u.to_host(), hw = w.to_host(), hs = s.to_host();
  const auto hz = z.to_host();
  for (int r = 0; r < M; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int c = 0; c < N; ++c) mx = std::max<double>(mx, hx[r * N + c]);
    for (int c = 0; c < N; ++c) sum += std::exp2(hx[r * N + c] - mx);
    ASSERT_FLOAT_EQ(hs[r * 8 + 0], static_cast<float>(mx)) << "row max " << r;
    ASSERT_NEAR(hs[r * 8 + 1], sum, 1e-4 * sum) << "row sum " << r;
    for (int c = 2; c < 8; ++c) ASSERT_EQ(hs[r * 8 + c], c);
    for (int c = 0; c < N; ++c) {
      const float v = hx[r * N + c];
      ASSERT_NEAR(hy[r * N + c], std::exp2(v - mx) / sum, 1e-6) << r << "," << c;
      const float zw = tp::to_float(tp::from_float<tp::bf16>(std::max(v, 0.0f) * 2.0f - v / 4.0f + 1.0f));
      ASSERT_NEAR(tp::to_float(hz[r * N + c]), zw, std::abs(zw) * 1e-2 + 1e-6) << r << "," << c;
      ASSERT_EQ(hu[r * N + c], c <= r ? v : 0.0f);
      ASSERT_EQ(hw[r * N + c], c >= r / 2 - 7 && c < r + 3 ? v : -INFINITY) << r << "," << c;
    }
  }
}

namespace {

constexpr int RM = 128, RN = 64;  // two 64-row blocks: row vectors of two slots per thread on the GPU
using r_tile = tp::tile<tp::block<RM, RN>>;

// Statistics of x kept online over its two column halves, as a softmax over column blocks
// keeps them, and the other row-vector operations; each result is broadcast into its own
// 8-column slice of the output: out[:, 8 k : 8 k + 8] = result k.
struct row_vector_kernel {
  TP_HD void operator()(tp::kernel_context&, tp::gmem<float, 2, r_tile> x, tp::gmem<float, 2, r_tile> out,
                        tp::smem<float, r_tile> xs, tp::smem<float, r_tile> os, tp::barriers<1> bar) const {
    using rv = tp::row_vector<RM>;
    tp::copy_gmem_to_smem(x, tp::idx(0, 0), xs, bar[0]);
    tp::barrier_wait(bar[0], 0);
    const auto left = tp::load<float>(tp::cols<RN / 2>(xs, 0)), right = tp::load<float>(tp::cols<RN / 2>(xs, RN / 2));

    // l with the row sums finished at every block, lp with this thread's partial sums,
    // finished once at the end (FlashAttention's deferred reduction)
    rv m = tp::full<rv>(-INFINITY), l = tp::full<rv>(0.0f), lp = tp::full<rv>(0.0f);
    auto add_block = [&](const auto& s) {
      const rv m_new = tp::max(m, tp::row_max(s));
      l = l * tp::exp2(m - m_new) + tp::row_sum(tp::exp2(s - m_new));
      lp = lp * tp::exp2(m - m_new) + tp::partial_row_sum(tp::exp2(s - m_new));
      m = m_new;
    };
    add_block(left);
    add_block(right);
    lp = tp::finish_row_sum(lp);
    const rv results[8] = {
        m,
        l,
        tp::map(m, [](float v, int row) { return v + row; }),
        (2.0f * l - 1.0f) / (l + 3.0f),
        tp::max(tp::row_max(left), 0.5f) - tp::full<rv>(0.25f),
        tp::zip(tp::row_max(left), tp::row_max(right), [](float a, float b) { return a * b; }),
        1.0f / l + m * l,
        lp - tp::max(tp::row_max(right), tp::row_max(left)),
    };
    for (int k = 0; k < 8; ++k)
      tp::store(tp::cols<8>(os, 8 * k), tp::broadcast_rows(tp::zeros<float, RM, 8>(), results[k], [](float, float v) { return v; }));
    tp::commit_smem();
    tp::copy_smem_to_gmem(os, out, tp::idx(0, 0));
    tp::wait_smem_to_gmem<0>();
  }
};

}  // namespace

TEST(Ops, RowVectorArithmeticAndOnlineStatistics) {
  const auto hx = test::random_values<float>(RM * RN, test::fresh_seed(), -3.0f, 3.0f);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {RM, RN}, hx);
  tp::tensor<float, 2> out(test::dev(), {RM, RN});
  out.poison();
  tp::kernel(row_vector_kernel{}, {.grid = {1}})(test::dev(), x, out);
  const auto h = out.to_host();
  for (int r = 0; r < RM; ++r) {
    const float* xr = &hx[r * RN];
    double max_left = -INFINITY, max_right = -INFINITY, l = 0;
    for (int c = 0; c < RN / 2; ++c) max_left = std::max<double>(max_left, xr[c]);
    for (int c = RN / 2; c < RN; ++c) max_right = std::max<double>(max_right, xr[c]);
    const double m = std::max(max_left, max_right);
    for (int c = 0; c < RN; ++c) l += std::exp2(xr[c] - m);
    const double want[8] = {m,
                            l,
                            m + r,
                            (2 * l - 1) / (l + 3),
                            std::max(max_left, 0.5) - 0.25,
                            max_left * max_right,
                            1 / l + m * l,
                            l - std::max(max_left, max_right)};
    for (int k = 0; k < 8; ++k)
      for (int c = 0; c < 8; ++c)
        ASSERT_NEAR(h[r * RN + 8 * k + c], want[k], 1e-5 * (1 + std::abs(want[k]))) << "result " << k << ", row " << r;
  }
}
