// fp8 matmul with scales (kernels/scaled_matmul.cuh) in every scaling mode beside tp::matmul
// in bf16 on the same shape (the rate fp8 should double), timed in alternating batches.
// Prints TFLOP/s and the ratio to bf16; writes JSON. "block" passes A's scales M-major (as
// torch._scaled_mm and DeepGEMM take them: loaded by TMA into SMEM), "block_row_major_scales"
// row-major [M, K/128] (read from global memory by the compute warpgroups). cuBLASLt's fp8 (torch._scaled_mm), the
// issue's peer, is bench/scaled_matmul_peers_torch.py on the same shapes and mode names;
// bench/scaled_matmul_table.py joins the two (rows keyed by "case" = MODE_MxNxK), and
// `scripts/gpu-run bench-fp8` runs them in alternating rounds.
//   bench_scaled_matmul [out.json]      (TP_BENCH_ONLY=text: only the cases whose name contains it)
#include <tilepipe/kernels/scaled_matmul.cuh>

#include "bench_util.hpp"

#include <cstdlib>
#include <string>

namespace {

using tp::fp8_scaling;

struct mode {
  const char* name;
  fp8_scaling scaling;
  bool promote;
  bool m_major_a = false;  // block: A's scales M-major (TMA into SMEM), else row-major (plain loads)
};

}  // namespace

int main(int argc, char** argv) {
  const auto dev = tp::device::open();
  if (!dev.is_gpu()) {
    std::printf("bench_scaled_matmul: no GPU\n");
    return 1;
  }
  const char* only = std::getenv("TP_BENCH_ONLY");
  const mode modes[] = {{"per_tensor", fp8_scaling::per_tensor, false},
                        {"per_tensor_promoted", fp8_scaling::per_tensor, true},
                        {"row_wise", fp8_scaling::row_wise, false},
                        {"block", fp8_scaling::block, true, true},
                        {"block_row_major_scales", fp8_scaling::block, true}};
  std::vector<std::string> rows;
  // 4096^3, 8192^3 and DeepSeek-V3's linear shapes (N x K) at 4096 tokens.
  for (auto [m, n, k] : {std::array<long long, 3>{4096, 4096, 4096}, {8192, 8192, 8192}, {4096, 7168, 2048},
                         {4096, 2048, 7168}, {4096, 4096, 7168}, {4096, 7168, 18432}}) {
    const int sets = static_cast<int>(std::max<long long>(2, (400LL << 20) / ((m + n) * k * 3) + 1));
    std::vector<tp::tensor<tp::bf16, 2>> a16, b16;
    std::vector<tp::tensor<tp::fp8_e4m3, 2>> a8, b8;
    for (int i = 0; i < sets; ++i) {
      a16.push_back(bench::random_tensor<tp::bf16, 2>(dev, {m, k}, 2 * i));
      b16.push_back(bench::random_tensor<tp::bf16, 2>(dev, {n, k}, 2 * i + 1));
      a8.push_back(bench::random_tensor<tp::fp8_e4m3, 2>(dev, {m, k}, 2 * i));
      b8.push_back(bench::random_tensor<tp::fp8_e4m3, 2>(dev, {n, k}, 2 * i + 1));
    }
    tp::tensor<tp::bf16, 2> c(dev, {m, n});
    const long long kb = (k + 127) / 128;
    for (const auto& md : modes) {
      const std::string key = std::string(md.name) + "_" + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
      if (only && key.find(only) == std::string::npos) continue;
      const std::array<long long, 2> sa_shape = md.scaling == fp8_scaling::per_tensor ? std::array<long long, 2>{1, 1}
                                                : md.scaling == fp8_scaling::row_wise ? std::array<long long, 2>{m, 1}
                                                                                       : std::array<long long, 2>{m, kb};
      const std::array<long long, 2> sb_shape = md.scaling == fp8_scaling::per_tensor ? std::array<long long, 2>{1, 1}
                                                : md.scaling == fp8_scaling::row_wise ? std::array<long long, 2>{n, 1}
                                                                                       : std::array<long long, 2>{(n + 127) / 128, kb};
      const auto sa = bench::random_tensor<float, 2>(dev, sa_shape, 7), sb = bench::random_tensor<float, 2>(dev, sb_shape, 8);
      const auto sa_storage = bench::random_tensor<float, 2>(dev, {kb, (m + 3) / 4 * 4}, 7);  // M-major: [K/128, M]
      const tp::tensor_view<float, 2> sa_view = md.m_major_a ? tp::m_major_scales(sa_storage, m) : sa.view();
      auto bf16 = [&](int i) { tp::matmul<tp::bf16>(dev, a16[i], b16[i], tp::b_layout::col_major, c); };
      auto fp8 = [&](int i) {
        tp::scaled_matmul<tp::fp8_e4m3, tp::fp8_e4m3, tp::bf16>(dev, a8[i], b8[i], c, md.scaling, sa_view, sb,
                                                                 {.promote = md.promote});
      };
      const auto [bf16_ms, fp8_ms] = bench::paired_ms(bf16, fp8, sets);
      const double flops = 2.0 * m * n * k, bf16_tf = flops / (bf16_ms * 1e-3) / 1e12, fp8_tf = flops / (fp8_ms * 1e-3) / 1e12;
      std::printf("%-40s fp8 %.4f ms %7.1f TFLOP/s   bf16 %7.1f TFLOP/s   %.2fx bf16\n", key.c_str(), fp8_ms, fp8_tf,
                  bf16_tf, fp8_tf / bf16_tf);
      char row[320];
      std::snprintf(row, sizeof row,
                    "{\"case\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, \"ms\": %.5f, \"tflops\": %.1f, "
                    "\"bf16_tflops\": %.1f}",
                    key.c_str(), m, n, k, fp8_ms, fp8_tf, bf16_tf);
      rows.push_back(row);
    }
  }
  if (argc > 1) bench::write_results(argv[1], dev, rows);
  return 0;
}
