// The collective matmuls on every GPU of the machine (at least 2), one process per GPU
// (tp::run_ranks), against references computed with NCCL and cuBLAS in the same processes:
// all_gather(a) by ncclAllGather, then a cuBLAS product in f32; a . b by cuBLAS in f32, then
// ncclReduceScatter in f32. Inputs are fresh random values, shards uneven, outputs poisoned.
// Labels gpu and multi_gpu; the interpreter's tests of the same kernels are in
// test_collective_matmul.cu.
#include <tilepipe/host/nccl.cuh>
#include <tilepipe/kernels/collective_matmul.cuh>

#include <cublas_v2.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace {

namespace tp = tilepipe;
using tp::bf16;

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) tp::detail::throw_formatted("%s failed: cuBLAS status %d", what, static_cast<int>(s));
}

/// c[M, N] (f32) = a[M, K] . b[K, N], row-major bf16 operands.
void cublas_matmul(cublasHandle_t h, const bf16* a, const bf16* b, float* c, long long M, long long N, long long K) {
  const float one = 1.0f, zero = 0.0f;
  check_cublas(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &one,
                            b, CUDA_R_16BF, static_cast<int>(N), a, CUDA_R_16BF, static_cast<int>(K), &zero, c, CUDA_R_32F,
                            static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx");
}

std::vector<bf16> random_bf16(std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<bf16> v(n);
  for (auto& x : v) x = tp::from_float<bf16>(d(rng));
  return v;
}

/// ||out - ref|| / ||ref||, NaN if out holds a NaN (an unwritten element).
double rel_error(const std::vector<bf16>& out, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const double o = tp::to_float(out[i]), r = ref[i];
    if (std::isnan(o)) return NAN;
    num += (o - r) * (o - r), den += r * r;
  }
  return std::sqrt(num / den);
}

/// What both tests run: every GPU (skipped below 2), uneven shards (device r has 1000 + 136 r
/// rows, not whole 128-row tiles), a partial K step and a partial column of tiles.
class CollectiveMatmulGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const int n = tp::gpu_count();
    if (n < 2) GTEST_SKIP() << "needs at least 2 GPUs";
    D = n;
    for (int r = 0; r < D; ++r) shards.push_back(1000 + 136 * r);
    for (long long rows : shards) M += rows, most = std::max(most, rows);
  }
  void check_all_gather(int stream_k_min_steps, bool stream_k);
  /// Whether rank r's all-gather on `ctas` CTAs can split its last wave: the tiles past the
  /// full waves must all be the ring's last step's, the shard of rank r - 1.
  bool last_wave_in_last_step(int r, int ctas) const {
    using kernel = tp::ring_matmul_kernel<bf16, tp::collective::all_gather>;
    const long long tiles_n = (N + kernel::block_n - 1) / kernel::block_n;
    auto tiles = [&](long long rows) { return (rows + kernel::block_m - 1) / kernel::block_m * tiles_n; };
    long long all = 0;
    for (long long rows : shards) all += tiles(rows);
    const long long last_wave = all % ctas;
    return last_wave > 0 && last_wave <= tiles(shards[(r + D - 1) % D]);
  }
  int D = 0;
  long long K = 1032, N = 2056, M = 0, most = 0;  // all-gather: K of a; reduce-scatter: each device's slice
  std::vector<long long> shards;
};

/// Runs body(group, device, rng) in one process per GPU, each with fresh random numbers; a
/// rank that throws fails the test.
template <class F>
void on_every_gpu(int devices, F&& body) {
  EXPECT_NO_THROW(tp::run_ranks(devices, [&](tp::nccl_group& g) {
    std::mt19937_64 rng(std::random_device{}());
    body(g, g.devices().local()[0], rng);
  }));
}

/// all_gather_matmul (stream_k_min_steps as its constructor takes it) against ncclAllGather
/// + cuBLAS, three launches. stream_k: any saving suffices, so each rank must split its
/// last wave exactly when that wave lies in its last ring step, and some rank must.
void CollectiveMatmulGpu::check_all_gather(int stream_k_min_steps, bool stream_k) {
  on_every_gpu(D, [&](tp::nccl_group& g, const tp::device& dev, std::mt19937_64& rng) {
    const long long mine = shards[g.rank()];
    auto a = tp::tensor<bf16, 2>::from_host(dev, {mine, K}, random_bf16(mine * K, rng));
    auto b = tp::tensor<bf16, 2>::from_host(dev, {K, N}, random_bf16(K * N, rng));
    tp::tensor<bf16, 2> c(dev, {M, N});
    c.poison();
    tp::all_gather_matmul<bf16> ag(g.devices(), shards, K, N, 0, stream_k_min_steps);
    bool some_rank_splits = false;
    for (int r = 0; r < D; ++r) some_rank_splits |= stream_k && last_wave_in_last_step(r, ag.ctas());
    if (stream_k && !some_rank_splits)
      tp::detail::throw_formatted("no rank's last wave lies in its last ring step on %d CTAs: no split to test", ag.ctas());
    const bool split = stream_k && last_wave_in_last_step(g.rank(), ag.ctas());
    if (ag.splits_last_wave(g.rank()) != split)
      tp::detail::throw_formatted("rank %d: the last wave is%s split", g.rank(), split ? " not" : "");
    for (int launch = 0; launch < 3; ++launch) ag(dev, a, b, c);  // later launches wait for their own counts
    TP_CUDA_CHECK(cudaDeviceSynchronize());
    // Reference: ncclAllGather needs equal counts, so each shard is padded to the largest.
    tp::tensor<bf16, 2> padded(dev, {most, K}), gathered(dev, {D * most, K});
    TP_CUDA_CHECK(cudaMemset(padded.data(), 0, padded.bytes()));
    TP_CUDA_CHECK(cudaMemcpy(padded.data(), a.data(), a.bytes(), cudaMemcpyDeviceToDevice));
    TP_NCCL_CHECK(ncclAllGather(padded.data(), gathered.data(), most * K, ncclBfloat16, g.comm(), nullptr));
    tp::tensor<bf16, 2> packed(dev, {M, K});
    long long row = 0;
    for (int r = 0; r < D; ++r, row += shards[r - 1])
      TP_CUDA_CHECK(cudaMemcpy(packed.data() + row * K, gathered.data() + r * most * K, shards[r] * K * sizeof(bf16),
                               cudaMemcpyDeviceToDevice));
    tp::tensor<float, 2> ref(dev, {M, N});
    cublasHandle_t h;
    check_cublas(cublasCreate(&h), "cublasCreate");
    cublas_matmul(h, packed.data(), b.data(), ref.data(), M, N, K);
    TP_CUDA_CHECK(cudaDeviceSynchronize());
    cublasDestroy(h);
    const double err = rel_error(c.to_host(), ref.to_host());
    std::printf("all_gather_matmul, rank %d of %d: relative error %.2e against ncclAllGather + cuBLAS\n", g.rank(), D, err);
    if (!(err < 1e-2)) tp::detail::throw_formatted("relative error %.3e", err);
  });
}

// 17 k-steps a tile: the default threshold (a split must save each CTA 24) keeps whole tiles.
TEST_F(CollectiveMatmulGpu, AllGatherMatmulAgainstNcclAndCublas) {
  check_all_gather(tp::ring_matmul_kernel<bf16, tp::collective::all_gather>::stream_k_min_steps, false);
}
// With any saving enough, the last wave (21 tiles on 2 H200s, 78 on 4) split over every SM
// on the ranks whose last ring step holds it (both of 2; on 4, not rank 1: its last step,
// rank 0's shard, has 72 tiles).
TEST_F(CollectiveMatmulGpu, AllGatherMatmulStreamKAgainstNcclAndCublas) { check_all_gather(0, true); }

TEST_F(CollectiveMatmulGpu, MatmulReduceScatterAgainstNcclAndCublas) {
  on_every_gpu(D, [&](tp::nccl_group& g, const tp::device& dev, std::mt19937_64& rng) {
    auto a = tp::tensor<bf16, 2>::from_host(dev, {M, K}, random_bf16(M * K, rng));
    auto b = tp::tensor<bf16, 2>::from_host(dev, {K, N}, random_bf16(K * N, rng));
    const long long mine = shards[g.rank()];
    tp::tensor<bf16, 2> c(dev, {mine, N});
    c.poison();
    tp::matmul_reduce_scatter<bf16> rs(g.devices(), shards, K, N);
    for (int launch = 0; launch < 3; ++launch) rs(dev, a, b, c);
    TP_CUDA_CHECK(cudaDeviceSynchronize());
    // Reference: the f32 partial product, each shard padded to the largest, then ncclReduceScatter.
    tp::tensor<float, 2> partial(dev, {M, N}), padded(dev, {D * most, N}), ref(dev, {most, N});
    cublasHandle_t h;
    check_cublas(cublasCreate(&h), "cublasCreate");
    cublas_matmul(h, a.data(), b.data(), partial.data(), M, N, K);
    TP_CUDA_CHECK(cudaMemset(padded.data(), 0, padded.bytes()));
    long long row = 0;
    for (int r = 0; r < D; ++r, row += shards[r - 1])
      TP_CUDA_CHECK(cudaMemcpy(padded.data() + r * most * N, partial.data() + row * N, shards[r] * N * sizeof(float),
                               cudaMemcpyDeviceToDevice));
    TP_NCCL_CHECK(ncclReduceScatter(padded.data(), ref.data(), most * N, ncclFloat32, ncclSum, g.comm(), nullptr));
    TP_CUDA_CHECK(cudaDeviceSynchronize());
    cublasDestroy(h);
    auto want = ref.to_host();
    want.resize(static_cast<std::size_t>(mine * N));
    const double err = rel_error(c.to_host(), want);
    std::printf("matmul_reduce_scatter, rank %d of %d: relative error %.2e against cuBLAS + ncclReduceScatter\n", g.rank(),
                D, err);
    if (!(err < 1e-2)) tp::detail::throw_formatted("relative error %.3e", err);
  });
}

// One process constructs the all-gather with another K: every process reports it, naming
// the setting and the device, before any symmetric memory or kernel exists.
TEST_F(CollectiveMatmulGpu, ProcessesThatDisagreeAreReported) {
  on_every_gpu(D, [&](tp::nccl_group& g, const tp::device&, std::mt19937_64&) {
    const long long odd_k = K + 64;
    try {
      tp::all_gather_matmul<bf16> ag(g.devices(), shards, g.rank() == D - 1 ? odd_k : K, N);
    } catch (const std::exception& e) {
      const std::string want = "K is " + std::to_string(odd_k) + " on device " + std::to_string(D - 1);
      if (std::string(e.what()).find(want) == std::string::npos) throw;  // an error, but not this one
      return;
    }
    tp::detail::throw_formatted("rank %d: no error although device %d passed K = %lld", g.rank(), D - 1, odd_k);
  });
}

// A rank that fails while the others wait for it in a collective: run_ranks stops them and
// names it (before, it waited for them forever).
TEST_F(CollectiveMatmulGpu, RunRanksStopsTheOthersWhenOneFails) {
  const auto start = std::chrono::steady_clock::now();
  try {
    tp::run_ranks(D, [&](tp::nccl_group& g) {
      if (g.rank() == D - 1) tp::detail::throw_formatted("planted failure");
      tp::tensor<float, 1> x(g.devices().local()[0], {1024});
      TP_NCCL_CHECK(ncclAllReduce(x.data(), x.data(), 1024, ncclFloat32, ncclSum, g.comm(), nullptr));
      TP_CUDA_CHECK(cudaDeviceSynchronize());  // never returns: the last rank is gone
    });
    FAIL() << "run_ranks returned although a rank failed";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("rank(s) " + std::to_string(D - 1) + " (exit 1) failed"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
}

}  // namespace
