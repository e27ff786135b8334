// The example kernels (examples/matmul, examples/elementwise, examples/softmax) in the interpreter with race
// detection on, in every copy mode and with shuffled CTAs: no report may fire on a correct
// kernel, and the results must match a float64 reference. Also prints how long the matmul
// example takes at 256 x 256 x 256 with detection on and off (docs/race-detector.md).
#include "planted.hpp"

#include "examples/elementwise/elementwise_kernel.cuh"
#include "examples/matmul/matmul_kernel.cuh"
#include "examples/matmul_ws/matmul_ws_kernel.cuh"
#include "examples/softmax/softmax_kernel.cuh"

#include <chrono>

namespace {

using test::copy_mode;

template <class Kernel, class T, b_layout BL>
double run_matmul(const tp::device& dev, long long M, long long N, long long K, double* seconds = nullptr) {
  const bool b_row = BL == b_layout::row_major;
  const auto ha = test::random_values<T>(static_cast<std::size_t>(M * K));
  const auto hb = test::random_values<T>(static_cast<std::size_t>(K * N));
  auto a = tp::tensor<T, 2>::from_host(dev, {M, K}, ha);
  auto b = tp::tensor<T, 2>::from_host(dev, b_row ? std::array<long long, 2>{K, N} : std::array<long long, 2>{N, K}, hb);
  const auto kern = Kernel::make(M, N, K);
  const auto t0 = std::chrono::steady_clock::now();
  auto c = tp::kernel(kern, kern.config(), tp::out_type<T>(M, N))(dev, a, b);
  if (seconds) *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto hc = c.to_host();
  std::vector<double> ref(static_cast<std::size_t>(M * N), 0.0);
  for (long long i = 0; i < M; ++i)
    for (long long kk = 0; kk < K; ++kk) {
      const double x = tp::to_float(ha[i * K + kk]);
      for (long long j = 0; j < N; ++j) ref[i * N + j] += x * tp::to_float(hb[b_row ? kk * N + j : j * K + kk]);
    }
  return test::rel_error(hc, ref);
}

TEST(ExamplesInterpreted, MatmulRunsCleanInEveryCopyMode) {
  TP_INTERPRETER_ONLY();
  using bf = tp::bf16;
  for (copy_mode m : test::all_copy_modes) {
    auto dev = test::interpreter(m);
    dev.interpreter.shuffle_ctas = m == copy_mode::shuffled;
    SCOPED_TRACE(test::mode_name(m));
    EXPECT_LT((run_matmul<matmul_kernel<bf, 128, 256, 4, 2>, bf, b_layout::row_major>(dev, 256, 256, 256)), 1e-2);
    EXPECT_LT((run_matmul<matmul_kernel<bf, 128, 256, 4, 2>, bf, b_layout::row_major>(dev, 200, 296, 200)), 1e-2);
    EXPECT_LT((run_matmul<matmul_kernel<tp::f16, 128, 256, 4, 2, b_layout::col_major>, tp::f16, b_layout::col_major>(
                  dev, 130, 264, 136)),
              1e-2);
    // One warpgroup, two slots, one K step (the pipeline clamps its slots), and many steps.
    EXPECT_LT((run_matmul<matmul_kernel<bf, 64, 64, 2, 1>, bf, b_layout::row_major>(dev, 64, 64, 64)), 1e-2);
    EXPECT_LT((run_matmul<matmul_kernel<bf, 64, 64, 2, 1>, bf, b_layout::row_major>(dev, 128, 64, 448)), 1e-2);
    EXPECT_LT((run_matmul<matmul_kernel<bf, 128, 128, 3, 2, b_layout::col_major>, bf, b_layout::col_major>(dev, 128, 128, 320)), 1e-2);
  }
}

template <int InSlots, int OutSlots>
double run_elementwise(const tp::device& dev, long long rows, long long cols, int ctas) {
  using T = tp::bf16;
  using kernel = axpb_kernel<T, 32, 256, InSlots, OutSlots>;
  const float a = 1.5f, b = -0.25f;
  const auto hx = test::random_values<T>(static_cast<std::size_t>(rows * cols));
  auto x = tp::tensor<T, 2>::from_host(dev, {rows, cols}, hx);
  const auto kern = kernel::make(rows, cols, a, b, ctas);
  auto y = tp::kernel(kern, kern.config(), tp::out_type<T>(rows, cols))(dev, x);
  const auto hy = y.to_host();
  std::vector<double> ref(hx.size());
  for (std::size_t i = 0; i < hx.size(); ++i) ref[i] = double(a) * tp::to_float(hx[i]) + b;
  return test::rel_error(hy, ref);
}

TEST(ExamplesInterpreted, ElementwiseRunsCleanInEveryCopyMode) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes) {
    auto dev = test::interpreter(m);
    dev.interpreter.shuffle_ctas = m == copy_mode::shuffled;
    SCOPED_TRACE(test::mode_name(m));
    EXPECT_LT((run_elementwise<4, 2>(dev, 300, 600, 3)), 1e-2);
    EXPECT_LT((run_elementwise<1, 1>(dev, 100, 512, 2)), 1e-2);
    EXPECT_LT((run_elementwise<2, 1>(dev, 64, 256, 1)), 1e-2);
    EXPECT_LT((run_elementwise<3, 3>(dev, 96, 1024, 5)), 1e-2);  // uneven split: the last CTA gets fewer blocks
  }
}

template <int WGs, int BC>
double run_softmax(const tp::device& dev, long long rows, long long cols) {
  using T = tp::bf16;
  using kernel = softmax_kernel<WGs, BC, 3, 2>;
  const long long stride = (cols + 7) / 8 * 8;  // rows padded to 16 bytes for TMA
  const auto hx = test::random_values<T>(static_cast<std::size_t>(rows * stride), test::fresh_seed(), -8.0f, 8.0f);
  auto x_rows = tp::tensor<T, 2>::from_host(dev, {rows, stride}, hx);
  tp::tensor<T, 2> y_rows(dev, {rows, stride});
  y_rows.poison();
  auto x = tp::tensor_view<T, 2>::wrap(x_rows.data(), {rows, cols}, false);
  auto y = tp::tensor_view<T, 2>::wrap(y_rows.data(), {rows, cols}, false);
  x.stride = y.stride = {stride, 1};
  const auto kern = kernel::make(rows, cols);
  tp::kernel(kern, kern.config())(dev, x, y);
  return test::softmax_error(hx, y_rows.to_host(), rows, cols, stride);
}

TEST(ExamplesInterpreted, SoftmaxRunsCleanInEveryCopyMode) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes) {
    auto dev = test::interpreter(m);
    dev.interpreter.shuffle_ctas = m == copy_mode::shuffled;
    SCOPED_TRACE(test::mode_name(m));
    EXPECT_LT((run_softmax<2, 64>(dev, 300, 1000)), 1e-2);  // two warpgroups, 16 column blocks
    EXPECT_LT((run_softmax<1, 128>(dev, 70, 7)), 1e-2);     // one column block, mostly past the row's end
    EXPECT_LT((run_softmax<1, 128>(dev, 64, 4096)), 1e-2);  // whole column blocks only
  }
}

// Two warpgroups share each step: each reads its 64 rows of the input block and adds them
// into its rows of the output block, which stays the same across the k axis (TPU output
// semantics: stored when the row block changes). y(block i) = sum_k x(block i, k).
struct row_block_sum_kernel {
  static constexpr int num_threads = 2;
  using tile_t = tp::tile<tp::block<128, 64>>;
  int row_blocks, k_blocks;

  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile_t> x, tp::gmem<float, 2, tile_t> y) const {
    const int wg = k.thread_index();
    auto body = [=](auto at, auto x_smem, auto y_smem) {
      const auto xs = tp::rows<64>(x_smem, 64 * wg);
      const auto ys = tp::rows<64>(y_smem, 64 * wg);
      auto v = tp::load<float>(xs);
      if (at[1] != 0) v = v + tp::load<float>(ys);
      tp::store(ys, v);
    };
    tp::emit_pipeline(body, tp::grid(row_blocks, k_blocks),
                      tp::in_specs(tp::spec<tile_t>([](auto i, auto kk) { return tp::idx(i, kk); })),
                      tp::out_specs(tp::spec<tile_t>([](auto i, auto) { return tp::idx(i, 0); })),
                      tp::max_concurrent_steps<3>)(k, x, y);
  }
};

TEST(ExamplesInterpreted, TwoWarpgroupsAccumulatingIntoOneOutputBlockRunClean) {
  TP_INTERPRETER_ONLY();
  const int row_blocks = 3, k_blocks = 4;
  const long long rows = 128LL * row_blocks, cols = 64LL * k_blocks;
  const auto hx = test::random_values<float>(static_cast<std::size_t>(rows * cols));
  std::vector<double> ref(static_cast<std::size_t>(rows * 64), 0.0);
  for (long long r = 0; r < rows; ++r)
    for (long long c = 0; c < cols; ++c) ref[r * 64 + c % 64] += hx[r * cols + c];
  for (copy_mode m : test::all_copy_modes)
    for (bool sync : {false, true}) {
      auto dev = test::interpreter(m);
      dev.interpreter.no_pipelining = sync;
      auto x = tp::tensor<float, 2>::from_host(dev, {rows, cols}, hx);
      const row_block_sum_kernel kern{row_blocks, k_blocks};
      std::vector<float> hy;
      EXPECT_EQ(test::error_of([&] { hy = tp::kernel(kern, {.grid = {1}}, tp::out_type<float>(rows, 64))(dev, x).to_host(); }),
                "")
          << test::mode_name(m);
      if (!hy.empty()) EXPECT_LT(test::rel_error(hy, ref), 1e-6) << test::mode_name(m);
    }
}

// Stream-K with CTAs in shuffled order: a tile's owner may run before the CTAs whose partial
// sums it adds; the interpreter then runs those ahead (backend/interpret/grid_runner.hpp).
TEST(ExamplesInterpreted, MatmulWsStreamKRunsCleanWithShuffledCtas) {
  TP_INTERPRETER_ONLY();
  using T = tp::f16;
  using kernel = matmul_ws_kernel<T, T, 128, 256, 3, b_layout::row_major>;
  const long long M = 392, N = 264, K = 200;
  const int sms = 3;
  const auto ha = test::random_values<T>(static_cast<std::size_t>(M * K)), hb = test::random_values<T>(static_cast<std::size_t>(K * N));
  std::vector<double> ref(static_cast<std::size_t>(M * N), 0.0);
  for (long long i = 0; i < M; ++i)
    for (long long kk = 0; kk < K; ++kk)
      for (long long j = 0; j < N; ++j) ref[i * N + j] += double(tp::to_float(ha[i * K + kk])) * tp::to_float(hb[kk * N + j]);
  for (copy_mode m : test::all_copy_modes)
    for (std::uint64_t seed : {1, 2, 3}) {
      auto dev = test::interpreter(m, seed);
      dev.interpreter.shuffle_ctas = true;
      auto a = tp::tensor<T, 2>::from_host(dev, {M, K}, ha), b = tp::tensor<T, 2>::from_host(dev, {K, N}, hb);
      tp::partials_buffer partials(dev, kernel::partial_slots(sms), kernel::partial_floats);
      auto kern = kernel::make(M, N, K, {}, partials.ref());
      kern.sched.order = kern.sched.order.reordered(2, tp::tile_order::grouped);
      kern.sched.stream_k_min_saving = 0;
      ASSERT_TRUE(kern.sched.plan(sms).streams());
      std::vector<T> hc;
      EXPECT_EQ(test::error_of([&] { hc = tp::kernel(kern, kern.config(sms), tp::out_type<T>(M, N))(dev, a, b).to_host(); }), "")
          << test::mode_name(m) << ", seed " << seed;
      if (!hc.empty()) EXPECT_LT(test::rel_error(hc, ref), 1e-2) << test::mode_name(m) << ", seed " << seed;
    }
}

// CTA 0 adds the partial sum of slot `slot`, which CTA 1 publishes when `publish`: with
// it, CTA 0's wait runs CTA 1 ahead; without, no CTA sets the flag, which on the GPU hangs.
struct partial_handoff_kernel {
  static constexpr int num_threads = 1;
  using tile_t = tp::tile<tp::block<64, 64>>;
  tp::partials_ref partials;
  bool publish;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile_t>) const {
    auto acc = tp::full<float, 64, 64>(1.0f);
    if (k.axis_index(0) == 0) tp::accumulate_partial(acc, partials, 1);
    else if (publish) tp::publish_partial(acc, partials, 1);
  }
};

TEST(ExamplesInterpreted, WaitingForAPartialSumNoCtaPublishesIsReported) {
  TP_INTERPRETER_ONLY();
  for (bool publish : {true, false}) {
    auto dev = test::interpreter();
    tp::partials_buffer partials(dev, 2, 64 * 64);
    const partial_handoff_kernel kern{partials.ref(), publish};
    const std::string err = test::error_of([&] { tp::kernel(kern, {.grid = {2}}, tp::out_type<float>(64, 64))(dev); });
    if (publish) EXPECT_EQ(err, "");
    else EXPECT_NE(err.find("waits for a flag that no CTA of the grid sets"), std::string::npos) << err;
  }
}

TEST(ExamplesInterpreted, MatmulTimeWithAndWithoutDetection) {
  TP_INTERPRETER_ONLY();
  using bf = tp::bf16;
  for (bool detect : {true, false}) {
    auto dev = test::interpreter();
    dev.interpreter.detect_races = detect;
    double s = 0;
    const double err = run_matmul<matmul_kernel<bf, 128, 256, 4, 2>, bf, b_layout::row_major>(dev, 256, 256, 256, &s);
    EXPECT_LT(err, 1e-2);
    std::printf("matmul example kernel (128 x 256 tiles, 4 stages, 2 warpgroups) at 256 x 256 x 256 in the "
                "interpreter, race detection %s: %.3f s\n",
                detect ? "on" : "off", s);
    RecordProperty(detect ? "seconds_detection_on" : "seconds_detection_off", std::to_string(s));
  }
}

}  // namespace
