// tp::pallas_call: grids of 1, 2 and 3 axes with every mix of parallel and sequential axes
// that a reduction allows, edge blocks, input-output aliasing (in place, and its errors),
// the examples written with it (elementwise, matmul with a register accumulator as
// scratch), all against float64 references on fresh random inputs.
#include "test_util.hpp"

#include "examples/pallas_call/pallas_kernels.cuh"

#include <array>
#include <cstring>
#include <string>

namespace {

using tile = tp::tile<tp::block<8, 32>>;  // f32: 8 rows of 128 bytes

struct twice_plus_step {  // y = 2 x + (the step's index along the last axis)
  template <int N>
  TP_HD void operator()(tp::kernel_context&, tp::index<N> at, auto x, auto y) const {
    const float step = static_cast<float>(at[N - 1]);
    tp::map([step](float v) { return 2.0f * v + step; }, y, x);
  }
};

struct row_band {  // 1-axis grid: block (i, 0) of an array one block wide
  TP_HD constexpr auto operator()(auto i) const { return tp::idx(i, 0); }
};

std::vector<float> run_twice_plus_step_1d(tp::tensor<float, 2>& x, auto semantics) {
  const long long rows = x.shape(0);
  return tp::pallas_call(twice_plus_step{}, tp::grid(pallas_examples::cdiv(rows, 8)), tp::in_specs(tp::spec<tile>(row_band{})),
                         tp::out_specs(tp::spec<tile>(row_band{})), tp::out_shape(tp::out_type<float>(rows, 32)),
                         semantics)(test::dev(), x)
      .to_host();
}

TEST(PallasCall, OneAxisParallelOrSequential) {
  const long long rows = 8 * 5 + 3;  // the last block mostly outside
  const auto hx = test::random_values<float>(rows * 32);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {rows, 32}, hx);
  std::vector<double> ref(hx.size());
  for (long long i = 0; i < rows * 32; ++i) ref[i] = 2.0 * hx[i] + (i / 32) / 8;
  EXPECT_LT(test::rel_error(run_twice_plus_step_1d(x, tp::dimension_semantics<tp::parallel>), ref), 1e-6);
  EXPECT_LT(test::rel_error(run_twice_plus_step_1d(x, tp::dimension_semantics<tp::sequential>), ref), 1e-6);
}

template <class Semantics>
void check_two_axes(long long rows, long long cols) {
  const auto hx = test::random_values<float>(rows * cols);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {rows, cols}, hx);
  const auto y = tp::pallas_call(twice_plus_step{}, tp::grid(pallas_examples::cdiv(rows, 8), pallas_examples::cdiv(cols, 32)),
                                 tp::in_specs(tp::spec<tile>(tp::axes_map<0, 1>{})),
                                 tp::out_specs(tp::spec<tile>(tp::axes_map<0, 1>{})),
                                 tp::out_shape(tp::out_type<float>(rows, cols)), Semantics{},
                                 tp::max_concurrent_steps<3>)(test::dev(), x)
                     .to_host();
  std::vector<double> ref(hx.size());
  for (long long i = 0; i < rows * cols; ++i) ref[i] = 2.0 * hx[i] + (i % cols) / 32;
  EXPECT_LT(test::rel_error(y, ref), 1e-6) << rows << "x" << cols;
}

TEST(PallasCall, TwoAxesEveryMix) {
  check_two_axes<tp::dimension_semantics_t<tp::parallel, tp::parallel>>(21, 100);
  check_two_axes<tp::dimension_semantics_t<tp::parallel, tp::sequential>>(21, 100);
  check_two_axes<tp::dimension_semantics_t<tp::sequential, tp::parallel>>(21, 100);
  check_two_axes<tp::dimension_semantics_t<tp::sequential, tp::sequential>>(21, 100);
  check_two_axes<tp::dimension_semantics_t<tp::parallel, tp::sequential>>(8, 32);  // one block
}

// out[:, j-block] = sum over k of x[:, (k * col_blocks + j)-block]: grid (i, j, k), the
// reduction axis k last and sequential; the body accumulates in its output block, which
// stays in SMEM while consecutive steps visit it.
struct strided_blocks {
  int col_blocks;
  TP_HD constexpr auto operator()(auto i, auto j, auto k) const { return tp::idx(i, k * col_blocks + j); }
};

struct sum_over_k {
  TP_HD void operator()(tp::kernel_context&, tp::index<3> at, auto x, auto out) const {
    if (at[2] == 0) tp::map([](float v) { return v; }, out, x);
    else tp::map([](float o, float v) { return o + v; }, out, out, x);
  }
};

// Column blocks visited in a zigzag (0, cb-1, 1, cb-2, ...): the branch on k keeps the
// axis analysis from following the map (it does not compile with probes), so the spec
// declares depends_on and every entry of its block index is recomputed at each step (none
// is taken as invariant).
struct zigzag_columns {
  int col_blocks;
  TP_HD constexpr auto operator()(auto i, auto k) const {
    return tp::idx(i, k % 2 == 0 ? k / 2 : col_blocks - 1 - k / 2);
  }
};

TEST(PallasCall, MapWithDeclaredDependenceIsRecomputedEveryStep) {
  const long long rows = 21;
  const int col_blocks = 5;
  const long long cols = 32LL * col_blocks;
  const auto hx = test::random_values<float>(rows * cols);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {rows, cols}, hx);
  const zigzag_columns zigzag{col_blocks};
  const auto y = tp::pallas_call(twice_plus_step{}, tp::grid(pallas_examples::cdiv(rows, 8), col_blocks),
                                 tp::in_specs(tp::spec<tile>(zigzag, tp::depends_on<0, 1>)),
                                 tp::out_specs(tp::spec<tile>(zigzag, tp::depends_on<0, 1>)),
                                 tp::out_shape(tp::out_type<float>(rows, cols)),
                                 tp::dimension_semantics<tp::parallel, tp::sequential>)(test::dev(), x)
                     .to_host();
  std::vector<double> ref(hx.size());
  for (int k = 0; k < col_blocks; ++k) {
    const int block = zigzag(0, k)[1];
    for (long long r = 0; r < rows; ++r)
      for (long long c = 32LL * block; c < 32LL * (block + 1); ++c) ref[r * cols + c] = 2.0 * hx[r * cols + c] + k;
  }
  EXPECT_LT(test::rel_error(y, ref), 1e-6);
}

template <class Semantics>
void check_three_axes(long long rows, int col_blocks, int k_steps) {
  const long long cols = 32LL * col_blocks * k_steps;
  const auto hx = test::random_values<float>(rows * cols);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {rows, cols}, hx);
  const auto out = tp::pallas_call(sum_over_k{}, tp::grid(pallas_examples::cdiv(rows, 8), col_blocks, k_steps),
                                   tp::in_specs(tp::spec<tile>(strided_blocks{col_blocks})),
                                   tp::out_specs(tp::spec<tile>(tp::axes_map<0, 1>{})),
                                   tp::out_shape(tp::out_type<float>(rows, 32LL * col_blocks)), Semantics{})(test::dev(), x)
                       .to_host();
  std::vector<double> ref(rows * 32 * col_blocks, 0.0);
  for (long long r = 0; r < rows; ++r)
    for (long long c = 0; c < 32LL * col_blocks; ++c)
      for (int k = 0; k < k_steps; ++k) ref[r * 32 * col_blocks + c] += hx[r * cols + k * 32LL * col_blocks + c];
  EXPECT_LT(test::rel_error(out, ref), 1e-6) << rows << " rows, " << col_blocks << " column blocks, " << k_steps << " k steps";
}

TEST(PallasCall, ThreeAxesEveryMixWithASequentialReduction) {
  using tp::parallel, tp::sequential;
  check_three_axes<tp::dimension_semantics_t<parallel, parallel, sequential>>(19, 2, 3);
  check_three_axes<tp::dimension_semantics_t<parallel, sequential, sequential>>(19, 2, 3);
  check_three_axes<tp::dimension_semantics_t<sequential, parallel, sequential>>(19, 2, 3);
  check_three_axes<tp::dimension_semantics_t<sequential, sequential, sequential>>(19, 2, 3);
}

TEST(PallasCall, AliasedOutputUpdatesTheInputInPlace) {
  const long long rows = 30, cols = 68;
  const auto hx = test::random_values<float>(rows * cols);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {rows, cols}, hx);
  const auto call = tp::pallas_call(twice_plus_step{}, tp::grid(pallas_examples::cdiv(rows, 8), pallas_examples::cdiv(cols, 32)),
                                    tp::in_specs(tp::spec<tile>(tp::axes_map<0, 1>{})),
                                    tp::out_specs(tp::spec<tile>(tp::axes_map<0, 1>{})),
                                    tp::out_shape(tp::aliased<0>(tp::out_type<float>(rows, cols))),
                                    tp::dimension_semantics<tp::parallel, tp::sequential>);
  const tp::tensor_view<float, 2> y = call(test::dev(), x);
  EXPECT_EQ(y.data, x.data()) << "the aliased output is the input, not a copy";
  const auto hy = x.to_host();
  std::vector<double> ref(hx.size());
  for (long long i = 0; i < rows * cols; ++i) ref[i] = 2.0 * hx[i] + (i % cols) / 32;
  EXPECT_LT(test::rel_error(hy, ref), 1e-6);

  // The same call on a tensor of another shape: the alias no longer matches.
  auto other = tp::tensor<float, 2>::from_host(test::dev(), {rows, cols + 4}, test::random_values<float>(rows * (cols + 4)));
  const std::string e = test::error_of([&] { call(test::dev(), other); });
  EXPECT_NE(e.find("aliased output: input 0 has shape (30, 72) but the output aliasing it is declared (30, 68)"),
            std::string::npos)
      << e;
}

TEST(PallasCall, OutputThatIgnoresAParallelAxisIsReported) {
  // A matmul-like reduction whose k axis was left parallel (the default): every CTA along k
  // would write the same output block.
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {16, 96}, test::random_values<float>(16 * 96));
  auto call = [&](auto semantics) {
    return test::error_of([&] {
      tp::pallas_call(sum_over_k{}, tp::grid(2, 1, 3), tp::in_specs(tp::spec<tile>(strided_blocks{1})),
                      tp::out_specs(tp::spec<tile>(tp::axes_map<0, 1>{})), tp::out_shape(tp::out_type<float>(16, 32)),
                      semantics)(test::dev(), x);
    });
  };
  const std::string e = call(tp::dimension_semantics<tp::parallel, tp::parallel, tp::parallel>);
  EXPECT_NE(e.find("output 0's index map does not use parallel grid axis 2 (extent 3)"), std::string::npos) << e;
  EXPECT_EQ(call(tp::dimension_semantics<tp::parallel, tp::parallel, tp::sequential>), "");  // k sequential: fine
}

TEST(PallasCall, ParallelAxisTooLargeForTheCudaGridIsReported) {
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {8, 32}, test::random_values<float>(8 * 32));
  const std::string e = test::error_of([&] {
    tp::pallas_call(twice_plus_step{}, tp::grid(1, 70000), tp::in_specs(tp::spec<tile>(tp::axes_map<0, 1>{})),
                    tp::out_specs(tp::spec<tile>(tp::axes_map<0, 1>{})), tp::out_shape(tp::out_type<float>(8, 32)))(
        test::dev(), x);
  });
  EXPECT_NE(e.find("parallel grid axis 1 has 70000 indices; as the CUDA grid's y axis it may have at most 65535"),
            std::string::npos)
      << e;
}

TEST(PallasCall, ElementwiseExample) {
  for (auto [rows, cols] : {std::pair<long long, long long>{100, 600}, {32, 256}}) {
    const auto hx = test::random_values<tp::bf16>(rows * cols);
    auto x = tp::tensor<tp::bf16, 2>::from_host(test::dev(), {rows, cols}, hx);
    const auto y = pallas_examples::axpb<tp::bf16>(rows, cols, 1.5f, -0.25f)(test::dev(), x).to_host();
    std::vector<double> ref(rows * cols);
    for (long long i = 0; i < rows * cols; ++i) ref[i] = 1.5 * tp::to_float(hx[i]) - 0.25;
    EXPECT_LT(test::rel_error(y, ref), 1e-2) << rows << "x" << cols;
  }
}

TEST(PallasCall, IntoWritesGivenOutputsAndChecksTheirShapes) {
  const long long rows = 40, cols = 256;
  const auto hx = test::random_values<tp::bf16>(rows * cols);
  auto x = tp::tensor<tp::bf16, 2>::from_host(test::dev(), {rows, cols}, hx);
  tp::tensor<tp::bf16, 2> y(test::dev(), {rows, cols});
  y.poison();
  const auto call = pallas_examples::axpb<tp::bf16>(rows, cols, -0.5f, 2.0f);
  call.into(test::dev(), x, y);
  std::vector<double> ref(rows * cols);
  for (long long i = 0; i < rows * cols; ++i) ref[i] = -0.5 * tp::to_float(hx[i]) + 2.0;
  EXPECT_LT(test::rel_error(y.to_host(), ref), 1e-2);

  tp::tensor<tp::bf16, 2> short_y(test::dev(), {rows - 8, cols});
  const std::string e = test::error_of([&] { call.into(test::dev(), x, short_y); });
  EXPECT_NE(e.find("pallas_call(...).into: output 0 has extent 32 along dimension 0, but its out_shape says 40"),
            std::string::npos)
      << e;
}

// 8-bit integers through the pipeline's copies and map: y (i8) = 1.5 x + 3 and z (u8) =
// 2 x + 100, rounded to nearest even and saturated; edge blocks in both dimensions.
struct int8_body {
  TP_HD void operator()(tp::kernel_context&, tp::index<2>, auto x, auto y, auto z) const {
    tp::map([](float v) { return 1.5f * v + 3.0f; }, y, x);
    tp::map([](float v) { return 2.0f * v + 100.0f; }, z, x);
  }
};

double saturate_round(double v, double lo, double hi) { return std::min(hi, std::max(lo, std::nearbyint(v))); }

TEST(PallasCall, Int8ElementsThroughCopiesAndMap) {
  using i8_tile = tp::tile<tp::block<8, 64>>;  // 64 bytes per row
  const long long rows = 37, cols = 96;
  std::vector<tp::i8> hx(rows * cols);
  std::mt19937_64 rng(test::fresh_seed());
  for (auto& v : hx) v = static_cast<tp::i8>(static_cast<int>(rng() % 256) - 128);
  auto x = tp::tensor<tp::i8, 2>::from_host(test::dev(), {rows, cols}, hx);
  const auto [y, z] = tp::pallas_call(int8_body{}, tp::grid(pallas_examples::cdiv(rows, 8), pallas_examples::cdiv(cols, 64)),
                                      tp::in_specs(tp::spec<i8_tile>(tp::axes_map<0, 1>{})),
                                      tp::out_specs(tp::spec<i8_tile>(tp::axes_map<0, 1>{}), tp::spec<i8_tile>(tp::axes_map<0, 1>{})),
                                      tp::out_shape(tp::out_type<tp::i8>(rows, cols), tp::out_type<tp::u8>(rows, cols)),
                                      tp::dimension_semantics<tp::parallel, tp::sequential>)(test::dev(), x);
  const auto hy = y.to_host();
  const auto hz = z.to_host();
  long long wrong_y = 0, wrong_z = 0, saturated = 0;
  for (long long i = 0; i < rows * cols; ++i) {
    const double ry = saturate_round(1.5 * hx[i] + 3.0, -128, 127), rz = saturate_round(2.0 * hx[i] + 100.0, 0, 255);
    wrong_y += hy[i] != ry;
    wrong_z += hz[i] != rz;
    saturated += rz == 0 || rz == 255;
  }
  EXPECT_EQ(wrong_y, 0);
  EXPECT_EQ(wrong_z, 0);
  EXPECT_GT(saturated, 0) << "the inputs exercise saturation";
}

// Out-of-bounds fill per spec: the same edge blocks loaded through a tile with
// oob_fill<oob::nan> and through one with the default (zeros), copied whole into an output
// that covers them, so what the loads filled in lands inside an array.
struct copy_two {
  TP_HD void operator()(tp::kernel_context&, tp::index<2>, auto x_nan, auto x_zero, auto y_nan, auto y_zero) const {
    tp::map([](float v) { return v; }, y_nan, x_nan);
    tp::map([](float v) { return v; }, y_zero, x_zero);
  }
};

TEST(PallasCall, OutOfBoundsFillPerSpec) {
  using nan_tile = tp::tile<tp::block<8, 32>, tp::oob_fill<tp::oob::nan>>;
  const long long rows = 10, cols = 40;  // blocks of 8 x 32: a 16 x 64 cover
  const auto hx = test::random_values<float>(rows * cols);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {rows, cols}, hx);
  const auto [y_nan, y_zero] =
      tp::pallas_call(copy_two{}, tp::grid(2, 2), tp::in_specs(tp::spec<nan_tile>(tp::axes_map<0, 1>{}), tp::spec<tile>(tp::axes_map<0, 1>{})),
                      tp::out_specs(tp::spec<tile>(tp::axes_map<0, 1>{}), tp::spec<tile>(tp::axes_map<0, 1>{})),
                      tp::out_shape(tp::out_type<float>(16, 64), tp::out_type<float>(16, 64)))(test::dev(), x, x);
  const auto hn = y_nan.to_host(), hz = y_zero.to_host();
  long long wrong = 0;
  std::string first;
  for (long long r = 0; r < 16; ++r)
    for (long long c = 0; c < 64; ++c) {
      const bool inside = r < rows && c < cols;
      std::uint32_t n_bits, z_bits, x_bits = 0;
      std::memcpy(&n_bits, &hn[r * 64 + c], 4);
      std::memcpy(&z_bits, &hz[r * 64 + c], 4);
      if (inside) std::memcpy(&x_bits, &hx[r * cols + c], 4);
      const std::uint32_t want_n = inside ? x_bits : 0x7ff77ff7u;  // TMA's NaN fill (read back on an H100)
      if ((n_bits != want_n || z_bits != x_bits) && first.empty()) {
        char b[160];
        std::snprintf(b, sizeof b, "(%lld, %lld): NaN-filled 0x%08x (want 0x%08x), zero-filled 0x%08x (want 0x%08x)", r, c,
                      n_bits, want_n, z_bits, x_bits);
        first = b;
      }
      wrong += n_bits != want_n;
      wrong += z_bits != x_bits;
    }
  EXPECT_EQ(wrong, 0) << "first: " << first;
}

template <class T, int BM, int BN, int Stages, int WGs, class Semantics, int BK = 64>
void check_matmul(long long M, long long N, long long K) {
  const auto ha = test::random_values<T>(M * K), hb = test::random_values<T>(K * N);
  auto a = tp::tensor<T, 2>::from_host(test::dev(), {M, K}, ha);
  auto b = tp::tensor<T, 2>::from_host(test::dev(), {K, N}, hb);
  const auto c = pallas_examples::matmul<T, BM, BN, Stages, WGs, Semantics, BK>(M, N, K)(test::dev(), a, b).to_host();
  std::vector<double> ref(M * N, 0.0);
  for (long long i = 0; i < M; ++i)
    for (long long k = 0; k < K; ++k)
      for (long long j = 0; j < N; ++j) ref[i * N + j] += double(tp::to_float(ha[i * K + k])) * tp::to_float(hb[k * N + j]);
  EXPECT_LT(test::rel_error(c, ref), 1e-2) << M << "x" << N << "x" << K;
}

TEST(PallasCall, GroupedTileMapsFollowTheGroupedOrder) {
  for (auto [tm, tn, group] : {std::array<int, 3>{7, 5, 3}, {8, 3, 8}, {3, 9, 8}, {16, 16, 4}}) {
    const pallas_examples::grouped_tiles g{tm, tn, group < tm ? group : tm};
    for (int t = 0; t < tm * tn; ++t) {
      const tp::tile_coord want = tp::grouped_tile_order(t, tm, tn, group < tm ? group : tm);
      ASSERT_EQ(g.m(t), want.m) << tm << "x" << tn << " group " << group << " tile " << t;
      ASSERT_EQ(g.n(t), want.n) << tm << "x" << tn << " group " << group << " tile " << t;
    }
  }
}

TEST(PallasCall, MatmulExample) {
  using tp::parallel, tp::sequential;
  // Edges in every dimension; n sequential too (the accumulator is reused across C blocks).
  check_matmul<tp::bf16, 128, 64, 2, 2, tp::dimension_semantics_t<parallel, parallel, sequential>>(136, 72, 136);
  check_matmul<tp::f16, 64, 64, 3, 1, tp::dimension_semantics_t<parallel, sequential, sequential>>(70, 136, 200);
  // 32 columns of A per step (64-byte swizzle), 6 stages; K = 200 ends inside a step.
  check_matmul<tp::bf16, 128, 64, 6, 2, tp::dimension_semantics_t<parallel, parallel, sequential>, 32>(136, 72, 200);
  // Grid (tile, k) in grouped order: 3 x 3 tiles in bands of 2 rows (the last band 1).
  const long long M = 300, N = 136, K = 72;
  const auto ha = test::random_values<tp::bf16>(M * K), hb = test::random_values<tp::bf16>(K * N);
  auto a = tp::tensor<tp::bf16, 2>::from_host(test::dev(), {M, K}, ha);
  auto b = tp::tensor<tp::bf16, 2>::from_host(test::dev(), {K, N}, hb);
  const auto c = pallas_examples::matmul_grouped<tp::bf16, 128, 64, 2, 2>(M, N, K, 2)(test::dev(), a, b).to_host();
  std::vector<double> ref(M * N, 0.0);
  for (long long i = 0; i < M; ++i)
    for (long long k = 0; k < K; ++k)
      for (long long j = 0; j < N; ++j) ref[i * N + j] += double(tp::to_float(ha[i * K + k])) * tp::to_float(hb[k * N + j]);
  EXPECT_LT(test::rel_error(c, ref), 1e-2) << "grouped";
}

}  // namespace
