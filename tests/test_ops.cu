// Register-tile operations against host arithmetic: elementwise math, row reductions and
// broadcasts, casts, index-aware maps, stores to swizzled SMEM and TMA stores.
#include "test_util.hpp"

namespace {

constexpr int M = 128, N = 64;
using x_tile = tp::tile<tp::block<M, N>>;
using z_tile = tp::tile<tp::block<M, N>, tp::swizzle<128>>;
using s_tile = tp::tile<tp::block<M, 8>>;

struct ops_kernel {
  // x -> y = softmax rows of x via exp2, z = bf16(max(x, 0) * 2 - x / 4 + 1) in a swizzled
  // tile, s = (row max, row sum) broadcast to 8 columns, u = x masked below the diagonal.
  TP_HD void operator()(tp::kernel_context&, tp::gmem<float, 2, x_tile> x, tp::gmem<float, 2, x_tile> y,
                        tp::gmem<tp::bf16, 2, z_tile> z, tp::gmem<float, 2, s_tile> s, tp::gmem<float, 2, x_tile> u,
                        tp::smem<float, x_tile> xs, tp::smem<tp::bf16, z_tile> zs, tp::smem<float, s_tile> ss,
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
  }
};

}  // namespace

TEST(Ops, FragmentMathReductionsCastsAndStores) {
  const auto hx = test::random_values<float>(M * N, test::fresh_seed(), -3.0f, 3.0f);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {M, N}, hx);
  tp::tensor<float, 2> y(test::dev(), {M, N}), u(test::dev(), {M, N}), s(test::dev(), {M, 8});
  tp::tensor<tp::bf16, 2> z(test::dev(), {M, N});
  y.poison(), u.poison(), s.poison(), z.poison();
  tp::kernel(ops_kernel{}, {.grid = {1}})(test::dev(), x, y, z, s, u);
  const auto hy = y.to_host(), hu = u.to_host(), hs = s.to_host();
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
    }
  }
}
