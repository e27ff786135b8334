// The peer of the matmul benchmarks: cuBLASLt with a 64 MiB workspace and its heuristic's
// first choice (as PyTorch calls it), on the same inputs, rotated so L2 does not hold them.
#pragma once

#include "bench_util.hpp"

#include <cublasLt.h>

#include <cstdlib>

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

/// cuBLASLt with a 64 MiB workspace and its heuristic's first choice, as PyTorch calls it:
/// call it with an input set index to run one product.
template <class T>
class cublas_peer {
 public:
  cublas_peer(cublasLtHandle_t h, problem<T>& p) : h_(h), p_(p) {
    // Row-major C = A B is column-major C^T = B^T A^T: B is the first operand; a column-major
    // B is, seen column-major, K x N, used transposed.
    cublasLtMatmulDescCreate(&op_, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (p.col_b) {
      const cublasOperation_t t = CUBLAS_OP_T;
      cublasLtMatmulDescSetAttribute(op_, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t);
    }
    if (p.col_b) cublasLtMatrixLayoutCreate(&lb_, cuda_type<T>(), p.K, p.N, p.K);
    else cublasLtMatrixLayoutCreate(&lb_, cuda_type<T>(), p.N, p.K, p.N);
    cublasLtMatrixLayoutCreate(&la_, cuda_type<T>(), p.K, p.M, p.K);
    cublasLtMatrixLayoutCreate(&lc_, cuda_type<T>(), p.N, p.M, p.N);
    TP_CUDA_CHECK(cudaMalloc(&ws_, ws_bytes));
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof ws_bytes);
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(h, op_, lb_, la_, lc_, lc_, pref, 1, &algo_, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (!found) throw tp::error("cuBLASLt found no algorithm");
  }
  ~cublas_peer() {
    cudaFree(ws_);
    cublasLtMatrixLayoutDestroy(lb_), cublasLtMatrixLayoutDestroy(la_), cublasLtMatrixLayoutDestroy(lc_);
    cublasLtMatmulDescDestroy(op_);
  }
  void operator()(int s) const {
    const float one = 1, zero = 0;
    cublasLtMatmul(h_, op_, &one, p_.b[s].data(), lb_, p_.a[s].data(), la_, &zero, p_.c.data(), lc_, p_.c.data(), lc_,
                   &algo_.algo, ws_, ws_bytes, nullptr);
  }

 private:
  static constexpr std::size_t ws_bytes = 64 << 20;
  cublasLtHandle_t h_;
  problem<T>& p_;
  cublasLtMatmulDesc_t op_;
  cublasLtMatrixLayout_t lb_, la_, lc_;
  void* ws_ = nullptr;
  cublasLtMatmulHeuristicResult_t algo_{};
};

/// Times `ours` (a function of the input set) against cuBLASLt on problem p, records both in
/// the JSON under key_cfg and prints one table row; with TP_BENCH_HOST set, also each side's
/// host time per call (the CPU's cost of a launch).
template <class T, class Ours>
void compare(problem<T>& p, cublas_peer<T>& peer, Ours&& ours, json& js, const std::string& key, const char* cfg) {
  const auto [peer_ms, our_ms] = paired_ms(peer, ours, static_cast<int>(p.a.size()));
  js.add(key + "_" + cfg + "_cublas_TFLOPs", p.tflops(peer_ms));
  js.add(key + "_" + cfg + "_TFLOPs", p.tflops(our_ms));
  std::printf("%-32s %-22s %6.1f TFLOP/s  cuBLAS %6.1f  %.3fx\n", key.c_str(), cfg, p.tflops(our_ms), p.tflops(peer_ms),
              peer_ms / our_ms);
  if (std::getenv("TP_BENCH_HOST"))
    std::printf("    host us per call: ours %.1f, cuBLAS %.1f\n", host_us_per_call(ours, static_cast<int>(p.a.size())),
                host_us_per_call(peer, static_cast<int>(p.a.size())));
}

/// The main() of the matmul benchmarks: opens the GPU and cuBLASLt, calls
/// cases(dev, handle, json, T{}, col_b, name) for bf16 and f16 with B row-major
/// (col_b = std::false_type) and column-major (std::true_type), and writes the JSON to
/// argv[1] when given.
template <class Cases>
int matmul_main(int argc, char** argv, Cases&& cases) {
  const auto dev = tp::device::open(tp::backend::gpu);
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  json js;
  js.add("device", dev.name());
  cases(dev, h, js, tp::bf16{}, std::false_type{}, "bf16");
  cases(dev, h, js, tp::bf16{}, std::true_type{}, "bf16");
  cases(dev, h, js, tp::f16{}, std::false_type{}, "f16");
  cases(dev, h, js, tp::f16{}, std::true_type{}, "f16");
  cublasLtDestroy(h);
  js.write(argc, argv);
  return 0;
}

}  // namespace bench
