// matmul (examples/matmul, non-specialised emit_pipeline) against cuBLAS, same run, same
// inputs; several tile / stage / warpgroup configurations. Prints a table, writes JSON.
//   bench_matmul [out.json]
#include "../examples/matmul/matmul_kernel.cuh"
#include "bench_util.hpp"

#include <cublasLt.h>

namespace {

template <class T>
cudaDataType_t cuda_type() {
  return std::is_same_v<T, tp::bf16> ? CUDA_R_16BF : CUDA_R_16F;
}

template <class T>
struct problem {
  long long M, N, K;
  std::vector<tp::tensor<T, 2>> a, b;  // several sets, rotated
  tp::tensor<T, 2> c;
  problem(const tp::device& dev, long long m, long long n, long long k, int sets) : M(m), N(n), K(k), c(dev, {m, n}) {
    for (int s = 0; s < sets; ++s) {
      a.push_back(bench::random_tensor<T, 2>(dev, {M, K}, 11 + s));
      b.push_back(bench::random_tensor<T, 2>(dev, {K, N}, 97 + s));
    }
  }
  double tflops(double ms) const { return 2.0 * M * N * K / (ms * 1e-3) / 1e12; }
};

/// cuBLASLt with a 64 MiB workspace and its heuristic's first choice, as PyTorch calls it.
template <class T>
double cublas_ms(cublasLtHandle_t h, problem<T>& p) {
  const float one = 1, zero = 0;
  // Row-major C = A B is column-major C^T = B^T A^T: B is the first operand.
  cublasLtMatmulDesc_t op;
  cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatrixLayout_t lb, la, lc;
  cublasLtMatrixLayoutCreate(&lb, cuda_type<T>(), p.N, p.K, p.N);
  cublasLtMatrixLayoutCreate(&la, cuda_type<T>(), p.K, p.M, p.K);
  cublasLtMatrixLayoutCreate(&lc, cuda_type<T>(), p.N, p.M, p.N);
  const std::size_t ws_bytes = 64 << 20;
  void* ws;
  TP_CUDA_CHECK(cudaMalloc(&ws, ws_bytes));
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
  cublasLtMatmulHeuristicResult_t algo{};
  int found = 0;
  cublasLtMatmulAlgoGetHeuristic(h, op, lb, la, lc, lc, pref, 1, &algo, &found);
  if (!found) throw tp::error("cuBLASLt found no algorithm");
  const double ms = bench::median_ms([&](int s) {
    cublasLtMatmul(h, op, &one, p.b[s].data(), lb, p.a[s].data(), la, &zero, p.c.data(), lc, p.c.data(), lc, &algo.algo, ws,
                   ws_bytes, nullptr);
  }, static_cast<int>(p.a.size()));
  cudaFree(ws);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(op);
  return ms;
}

template <class Kernel, class T>
double ours_ms(const tp::device& dev, problem<T>& p, int group) {
  const auto kern = Kernel::make(p.M, p.N, p.K, group);
  const auto launch = tp::kernel(kern, kern.config());
  return bench::median_ms([&](int s) { launch(dev, p.a[s], p.b[s], p.c); }, static_cast<int>(p.a.size()));
}

}  // namespace

template <class T>
void run_dtype(const tp::device& dev, cublasLtHandle_t h, bench::json& js, const char* name) {
  for (long long s : {2048LL, 4096LL, 8192LL}) {
    const int sets = s <= 2048 ? 8 : s <= 4096 ? 3 : 1;
    problem<T> p(dev, s, s, s, sets);
    const double cb = p.tflops(cublas_ms(h, p));
    const std::string key = std::string(name) + "_" + std::to_string(s);
    js.add(key + "_cublas_TFLOPs", cb);
    std::printf("%-5s %5lld^3  cuBLAS %6.1f TFLOP/s\n", name, s, cb);
    auto one = [&](const char* cfg, double tf) {
      js.add(key + "_" + cfg + "_TFLOPs", tf);
      std::printf("%-5s %5lld^3  %-22s %6.1f TFLOP/s  %.3fx cuBLAS\n", name, s, cfg, tf, tf / cb);
    };
    one("128x256_s4_wg2_g8", p.tflops(ours_ms<matmul_kernel<T, 128, 256, 4, 2>>(dev, p, 8)));
    one("128x256_s4_wg2_g16", p.tflops(ours_ms<matmul_kernel<T, 128, 256, 4, 2>>(dev, p, 16)));
    one("128x256_s3_wg2_g8", p.tflops(ours_ms<matmul_kernel<T, 128, 256, 3, 2>>(dev, p, 8)));
    one("256x128_s4_wg2_g8", p.tflops(ours_ms<matmul_kernel<T, 256, 128, 4, 2>>(dev, p, 8)));
    one("128x128_s3_wg1_g8_2cta", p.tflops(ours_ms<matmul_kernel<T, 128, 128, 3, 1>>(dev, p, 8)));
    one("128x128_s3_wg2_g8_2cta", p.tflops(ours_ms<matmul_kernel<T, 128, 128, 3, 2>>(dev, p, 8)));
    one("128x256_s4_wg2_g4", p.tflops(ours_ms<matmul_kernel<T, 128, 256, 4, 2>>(dev, p, 4)));
  }
}

int main(int argc, char** argv) {
  const auto dev = tp::device::open(tp::backend::gpu);
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  bench::json js;
  js.add("device", dev.name());
  run_dtype<tp::bf16>(dev, h, js, "bf16");
  run_dtype<tp::f16>(dev, h, js, "f16");
  cublasLtDestroy(h);
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "w");
    js.print(f);
    std::fclose(f);
  }
  js.print(stdout);
}
