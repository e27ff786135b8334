// The example kernels on shapes that are and are not multiples of their blocks, against
// float64 host references (small sizes in the interpreter, larger on the GPU).
#include "test_util.hpp"

#include <cstring>

#include "examples/elementwise/elementwise_kernel.cuh"
#include "examples/matmul/matmul_kernel.cuh"
#include "examples/matmul_ws/matmul_ws_kernel.cuh"
#include "examples/softmax/softmax_kernel.cuh"

namespace {

template <class T, b_layout BL, int BM = 128, int BN = 256, int WGs = 2>
void check_matmul(long long M, long long N, long long K) {
  using kernel = matmul_kernel<T, BM, BN, 3, WGs, BL>;
  const bool b_row = BL == b_layout::row_major;
  const auto ha = test::random_values<T>(M * K), hb = test::random_values<T>(K * N);
  auto a = tp::tensor<T, 2>::from_host(test::dev(), {M, K}, ha);
  auto b = tp::tensor<T, 2>::from_host(test::dev(), b_row ? std::array<long long, 2>{K, N} : std::array<long long, 2>{N, K}, hb);
  const auto kern = kernel::make(M, N, K, 4);
  const auto c = tp::kernel(kern, kern.config(), tp::out_type<T>(M, N))(test::dev(), a, b).to_host();
  std::vector<double> ref(M * N, 0.0);
  for (long long i = 0; i < M; ++i)
    for (long long kk = 0; kk < K; ++kk) {
      const double av = tp::to_float(ha[i * K + kk]);
      for (long long j = 0; j < N; ++j) ref[i * N + j] += av * tp::to_float(hb[b_row ? kk * N + j : j * K + kk]);
    }
  EXPECT_LT(test::rel_error(c, ref), 1e-2) << M << "x" << N << "x" << K;
}

// stream_k: with a partial-sum workspace and no minimum saving, so the last wave is split
// whenever the tiles do not divide evenly (the test asserts that it is).
template <class T, b_layout BL, int BM = 128, int BN = 256, int Cluster = 1>
void check_matmul_ws(long long M, long long N, long long K, bool bias_relu = false,
                     tp::tile_order order = tp::tile_order::grouped, bool stream_k = false) {
  const bool b_row = BL == b_layout::row_major;
  const auto ha = test::random_values<T>(M * K), hb = test::random_values<T>(K * N), hbias = test::random_values<T>(N);
  auto a = tp::tensor<T, 2>::from_host(test::dev(), {M, K}, ha);
  auto b = tp::tensor<T, 2>::from_host(test::dev(), b_row ? std::array<long long, 2>{K, N} : std::array<long long, 2>{N, K}, hb);
  auto bias = tp::tensor<T, 1>::from_host(test::dev(), {N}, hbias);
  std::vector<T> c;
  const int sms = test::on_gpu() ? test::dev().multiprocessors() : (stream_k ? 3 : 2) * Cluster;  // few CTAs: several tiles each
  auto run = [&](auto kern) {
    using kernel = decltype(kern);
    tp::partials_buffer partials(test::dev(), kernel::partial_slots(sms), kernel::partial_floats);
    kern.sched.order = kern.sched.order.reordered(2, order);  // bands of 2 tile rows: several bands in small problems
    if (stream_k) {
      kern.partials = partials.ref(), kern.sched.stream_k_min_saving = 0;
      EXPECT_TRUE(kern.sched.plan(sms / Cluster).streams()) << M << "x" << N << "x" << K << ": the last wave is not split";
    }
    c = tp::kernel(kern, kern.config(sms), tp::out_type<T>(M, N))(test::dev(), a, b).to_host();
  };
  if (bias_relu) run(matmul_ws_kernel<T, T, BM, BN, 3, BL, bias_relu_epilogue<T>, 64, Cluster>::make(M, N, K, {bias.data(), N}));
  else run(matmul_ws_kernel<T, T, BM, BN, 3, BL, no_epilogue, 64, Cluster>::make(M, N, K));
  std::vector<double> ref(M * N, 0.0);
  for (long long i = 0; i < M; ++i)
    for (long long kk = 0; kk < K; ++kk) {
      const double av = tp::to_float(ha[i * K + kk]);
      for (long long j = 0; j < N; ++j) ref[i * N + j] += av * tp::to_float(hb[b_row ? kk * N + j : j * K + kk]);
    }
  if (bias_relu)
    for (long long i = 0; i < M * N; ++i) ref[i] = std::max(ref[i] + tp::to_float(hbias[i % N]), 0.0);
  EXPECT_LT(test::rel_error(c, ref), 1e-2) << M << "x" << N << "x" << K;
}

// Rows padded to 16 bytes (TMA's stride rule), the kernel given a rows x cols view of them.
template <int WGs, int BC>
void check_softmax(long long rows, long long cols) {
  using kernel = softmax_kernel<WGs, BC, 3, 2>;
  const long long stride = (cols + 7) / 8 * 8;
  const auto hx = test::random_values<tp::bf16>(rows * stride, test::fresh_seed(), -8.0f, 8.0f);
  auto x_rows = tp::tensor<tp::bf16, 2>::from_host(test::dev(), {rows, stride}, hx);
  tp::tensor<tp::bf16, 2> y_rows(test::dev(), {rows, stride});
  y_rows.poison();
  auto x = tp::tensor_view<tp::bf16, 2>::wrap(x_rows.data(), {rows, cols}, test::on_gpu());
  auto y = tp::tensor_view<tp::bf16, 2>::wrap(y_rows.data(), {rows, cols}, test::on_gpu());
  x.stride = y.stride = {stride, 1};
  const auto kern = kernel::make(rows, cols);
  tp::kernel(kern, kern.config())(test::dev(), x, y);
  EXPECT_LT(test::softmax_error(hx, y_rows.to_host(), rows, cols, stride), 1e-2) << rows << "x" << cols;
}

}  // namespace

TEST(Examples, MatmulWsShapes) {
  const long long s = test::on_gpu() ? 4 : 1;
  check_matmul_ws<tp::bf16, b_layout::row_major>(256 * s, 512 * s, 256);                  // square-ish, several tiles per CTA
  check_matmul_ws<tp::f16, b_layout::col_major>(520 * s, 136, 200, false, tp::tile_order::snake);  // tall, edges everywhere
  check_matmul_ws<tp::bf16, b_layout::row_major>(72, 776 * s, 136);                       // wide
  check_matmul_ws<tp::bf16, b_layout::col_major>(200, 264, 8);                            // K smaller than a block
  check_matmul_ws<tp::f16, b_layout::row_major, 256, 128>(333, 200, 456, true);           // 256 x 128 tiles, bias + ReLU
}

// Clusters of CTAs sharing the B block by TMA multicast, including a last tile row that is
// entirely outside C (its CTA still loads and multicasts its share of B).
TEST(Examples, MatmulWsClusterMulticast) {
  const long long s = test::on_gpu() ? 4 : 1;
  check_matmul_ws<tp::bf16, b_layout::row_major, 128, 256, 2>(256 * s, 512 * s, 256);
  check_matmul_ws<tp::f16, b_layout::col_major, 128, 256, 2>(300 * s, 264, 136, false, tp::tile_order::snake);
  check_matmul_ws<tp::bf16, b_layout::col_major, 128, 256, 2>(300, 520, 72, true);  // odd tile rows, bias + ReLU
  check_matmul_ws<tp::f16, b_layout::row_major, 128, 256, 4>(520, 264 * s, 200);    // clusters of 4
}

// The last wave split by stream-K: tiles shared by two to four CTAs (small K, many CTAs per
// tile), several whole tiles per CTA before the split, bias + ReLU applied once after the
// partial sums are added, column-major B, and clusters; a last wave under half a wave split
// with the full wave before it (the first shape on 3 CTAs, the last on the GPU's SMs).
TEST(Examples, MatmulWsStreamK) {
  const long long s = test::on_gpu() ? 4 : 1;
  check_matmul_ws<tp::bf16, b_layout::row_major>(640 * s, 264, 1000, false, tp::tile_order::grouped, true);
  check_matmul_ws<tp::f16, b_layout::col_major>(392 * s, 264 * s, 200, true, tp::tile_order::snake, true);
  check_matmul_ws<tp::bf16, b_layout::col_major>(130, 1000 * s, 456, false, tp::tile_order::grouped, true);
  check_matmul_ws<tp::f16, b_layout::row_major, 128, 256, 2>(264 * s, 776 * s, 328, false, tp::tile_order::grouped, true);
  check_matmul_ws<tp::bf16, b_layout::row_major>(1024 * s, 1280, 136, false, tp::tile_order::grouped, true);
}

// A last wave that would be split with a workspace too small for the grid: reported on the
// host, before the launch, with the sizes.
TEST(Examples, MatmulWsReportsATooSmallStreamKWorkspace) {
  using kernel = matmul_ws_kernel<tp::bf16, tp::bf16, 128, 256, 3, b_layout::row_major>;
  const tp::partials_buffer partials(test::dev(), kernel::partial_slots(2), kernel::partial_floats);  // for 2 CTAs
  auto kern = kernel::make(640, 264, 1000, {}, partials.ref());  // 5 x 2 tiles: on 3 CTAs, one is split
  kern.sched.stream_k_min_saving = 0;
  const std::string err = test::error_of([&] { kern.config(3); });
  EXPECT_NE(err.find("workspace has 4 slots of 16384 floats; the grid needs 6 of 16384"), std::string::npos) << err;
  EXPECT_EQ(test::error_of([&] { kern.config(2); }), "");  // 2 CTAs: 5 whole tiles each, nothing split
}

// C with a leading dimension wider than N: the kernels write exactly the M x N view and
// leave the padding of every row alone (TMA alone would write it up to 16-byte chunks).
template <class Kernel>
void check_padded_c(Kernel kern, tp::launch_config cfg, long long M, long long N, long long K, long long ldc) {
  using T = tp::bf16;
  const auto ha = test::random_values<T>(M * K), hb = test::random_values<T>(N * K);  // B column-major (N x K)
  const auto sentinel = test::random_values<T>(M * ldc, test::fresh_seed(), 40.0f, 50.0f);
  auto a = tp::tensor<T, 2>::from_host(test::dev(), {M, K}, ha);
  auto b = tp::tensor<T, 2>::from_host(test::dev(), {N, K}, hb);
  auto c = tp::tensor<T, 2>::from_host(test::dev(), {M, ldc}, sentinel);
  auto cv = tp::tensor_view<T, 2>::wrap(c.data(), {M, N}, test::on_gpu());
  cv.stride[0] = ldc;
  tp::kernel(kern, cfg)(test::dev(), a, b, cv);
  const auto hc = c.to_host();
  std::vector<T> inside;
  std::vector<double> ref;
  long long clobbered = 0;
  for (long long i = 0; i < M; ++i)
    for (long long j = 0; j < ldc; ++j) {
      if (j >= N) {
        clobbered += std::memcmp(&hc[i * ldc + j], &sentinel[i * ldc + j], sizeof(T)) != 0;
        continue;
      }
      double r = 0;
      for (long long kk = 0; kk < K; ++kk) r += double(tp::to_float(ha[i * K + kk])) * tp::to_float(hb[j * K + kk]);
      ref.push_back(r);
      inside.push_back(hc[i * ldc + j]);
    }
  EXPECT_LT(test::rel_error(inside, ref), 1e-2) << M << "x" << N << "x" << K;
  EXPECT_EQ(clobbered, 0) << "elements of C's padding overwritten";
}

TEST(Examples, MatmulWritesExactlyAPaddedC) {
  for (auto [M, N, ldc] : {std::array<long long, 3>{129, 257, 264}, {64, 57, 72}, {3, 1, 8}}) {
    const long long K = 136;
    const auto plain = matmul_kernel<tp::bf16, 128, 256, 3, 2, b_layout::col_major>::make(M, N, K, 4);
    check_padded_c(plain, plain.config(), M, N, K, ldc);
    const auto ws = matmul_ws_kernel<tp::bf16, tp::bf16, 128, 256, 3, b_layout::col_major>::make(M, N, K);
    check_padded_c(ws, ws.config(test::on_gpu() ? test::dev().multiprocessors() : 2), M, N, K, ldc);
  }
}

TEST(Examples, MatmulShapes) {
  const long long s = test::on_gpu() ? 4 : 1;  // larger problems on the GPU
  check_matmul<tp::bf16, b_layout::row_major>(256 * s, 256 * s, 256 * s);      // square, multiples
  check_matmul<tp::bf16, b_layout::row_major>(520 * s, 136, 200);              // tall, edges everywhere
  check_matmul<tp::f16, b_layout::col_major>(72, 776 * s, 136);                // wide
  check_matmul<tp::bf16, b_layout::col_major>(200, 264, 8);                    // K smaller than one block
  check_matmul<tp::f16, b_layout::row_major, 128, 128, 1>(333, 200, 456 * s);  // one warpgroup, odd sizes
}

TEST(Examples, Elementwise) {
  using kernel = axpb_kernel<tp::bf16, 32, 256, 4, 2>;
  for (auto [rows, cols] : {std::pair<long long, long long>{300, 600}, {64, 256}, {1000, 8}}) {
    const auto hx = test::random_values<tp::bf16>(rows * cols);
    auto x = tp::tensor<tp::bf16, 2>::from_host(test::dev(), {rows, cols}, hx);
    const auto kern = kernel::make(rows, cols, 1.5f, -0.25f, test::on_gpu() ? 64 : 3);
    const auto y = tp::kernel(kern, kern.config(), tp::out_type<tp::bf16>(rows, cols))(test::dev(), x).to_host();
    std::vector<double> ref(rows * cols);
    for (long long i = 0; i < rows * cols; ++i) ref[i] = 1.5 * tp::to_float(hx[i]) - 0.25;
    EXPECT_LT(test::rel_error(y, ref), 1e-2) << rows << "x" << cols;
  }
}

// Column counts that are and are not multiples of the column block, below one block and
// odd (rows padded), and row counts that leave the last row block partly outside the tensor.
TEST(Examples, Softmax) {
  const long long s = test::on_gpu() ? 16 : 1;
  check_softmax<1, 128>(200 * s, 1000);
  check_softmax<1, 128>(70 * s, 4096);
  check_softmax<1, 128>(64 * s, 5000);
  check_softmax<1, 128>(130 * s, 7);
  check_softmax<2, 64>(300 * s, 333);
  check_softmax<2, 64>(1, 1);
  check_softmax<1, 256>(129 * s, 8192 + 24);
}

// tp::matmul, the library's entry to the persistent matmul (kernels/matmul.cuh): both B
// layouts, with a bias and each activation of the run-time epilogue.
TEST(Examples, MatmulHostApiBiasAndActivations) {
  const long long M = 200, N = 264, K = 136;
  const auto ha = test::random_values<tp::bf16>(M * K), hb = test::random_values<tp::bf16>(K * N);
  const auto hbias = test::random_values<tp::bf16>(N);
  auto a = tp::tensor<tp::bf16, 2>::from_host(test::dev(), {M, K}, ha);
  auto bias = tp::tensor<tp::bf16, 1>::from_host(test::dev(), {N}, hbias);
  const std::pair<tp::activation, double (*)(double)> acts[] = {
      {tp::activation::none, [](double x) { return x; }},
      {tp::activation::relu, [](double x) { return std::max(x, 0.0); }},
      {tp::activation::gelu, [](double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }},
      {tp::activation::gelu_tanh,
       [](double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }},
      {tp::activation::silu, [](double x) { return x / (1.0 + std::exp(-x)); }},
  };
  for (const bool b_row : {true, false}) {
    auto b = tp::tensor<tp::bf16, 2>::from_host(test::dev(), b_row ? std::array<long long, 2>{K, N} : std::array<long long, 2>{N, K}, hb);
    for (const auto& [act, f] : acts) {
      tp::tensor<tp::bf16, 2> c(test::dev(), {M, N});
      c.poison();
      tp::matmul(test::dev(), a.view(), b.view(), b_row ? tp::b_layout::row_major : tp::b_layout::col_major, c.view(),
                 {.bias = bias.data(), .act = act});
      std::vector<double> ref(M * N, 0.0);
      for (long long i = 0; i < M; ++i)
        for (long long j = 0; j < N; ++j) {
          double s = tp::to_float(hbias[j]);
          for (long long kk = 0; kk < K; ++kk)
            s += static_cast<double>(tp::to_float(ha[i * K + kk])) * tp::to_float(hb[b_row ? kk * N + j : j * K + kk]);
          ref[i * N + j] = f(s);
        }
      EXPECT_LT(test::rel_error(c.to_host(), ref), 1e-2) << "activation " << static_cast<int>(act) << (b_row ? " B row-major" : " B column-major");
    }
  }
}
