// The peer of the matmul benchmarks: cuBLASLt with a 64 MiB workspace and its heuristic's
// first choice (as PyTorch calls it), on the same inputs, rotated so L2 does not hold them.
#pragma once

#include "bench_util.hpp"

#include <cublasLt.h>

namespace bench {

template <class T>
cudaDataType_t cuda_type() {
  return std::is_same_v<T, tp::bf16> ? CUDA_R_16BF : CUDA_R_16F;
}

template <class T>
struct problem {
  long long M, N, K;
  bool col_b;                          // B stored column-major (N x K row-major): the K-major operand
  std::vector<tp::tensor<T, 2>> a, b;  // several sets, rotated
  tp::tensor<T, 2> c;
  // Enough input sets that one pass over them is larger than the L2 (50-60 MB).
  problem(const tp::device& dev, long long m, long long n, long long k, bool col_major_b = false)
      : M(m), N(n), K(k), col_b(col_major_b), c(dev, {m, n}) {
    const long long bytes = (m * k + k * n) * static_cast<long long>(sizeof(T));
    const int sets = static_cast<int>(bytes >= (128ll << 20) ? 1 : ((128ll << 20) + bytes - 1) / bytes);
    for (int s = 0; s < sets; ++s) {
      a.push_back(bench::random_tensor<T, 2>(dev, {M, K}, 11 + s));
      b.push_back(bench::random_tensor<T, 2>(dev, col_b ? std::array<long long, 2>{N, K} : std::array<long long, 2>{K, N}, 97 + s));
    }
  }
  double tflops(double ms) const { return 2.0 * M * N * K / (ms * 1e-3) / 1e12; }
};

/// cuBLASLt with a 64 MiB workspace and its heuristic's first choice, as PyTorch calls it.
template <class T>
inline double cublas_ms(cublasLtHandle_t h, problem<T>& p) {
  const float one = 1, zero = 0;
  // Row-major C = A B is column-major C^T = B^T A^T: B is the first operand; a column-major B
  // is, seen column-major, K x N, used transposed.
  cublasLtMatmulDesc_t op;
  cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (p.col_b) {
    const cublasOperation_t t = CUBLAS_OP_T;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
  }
  cublasLtMatrixLayout_t lb, la, lc;
  if (p.col_b) cublasLtMatrixLayoutCreate(&lb, cuda_type<T>(), p.K, p.N, p.K);
  else cublasLtMatrixLayoutCreate(&lb, cuda_type<T>(), p.N, p.K, p.N);
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

}  // namespace bench
