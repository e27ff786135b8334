// fp8 quantisation of activations (kernels/quantize.cuh) against the HBM bandwidth bound:
// bytes read and written (x once, or twice with row-wise scales; q and the scales once)
// per second, beside a device-to-device copy of x's bytes timed in alternating batches.
//   bench_quantize [out.json]
#include <tilepipe/kernels/quantize.cuh>

#include "bench_util.hpp"

int main(int argc, char** argv) {
  const auto dev = tp::device::open();
  if (!dev.is_gpu()) {
    std::printf("bench_quantize: no GPU\n");
    return 1;
  }
  std::vector<std::string> rows;
  // DeepSeek-V3's activations (K 7168 and 2048) at prefill and decode token counts.
  for (auto [m, k] : {std::pair{8192LL, 7168LL}, {4096LL, 2048LL}, {128LL, 7168LL}, {16384LL, 4096LL}})
    for (int group : {128, 0}) {
      const int sets = static_cast<int>(std::max<long long>(2, (400LL << 20) / (m * k * 3) + 1));
      std::vector<tp::tensor<tp::bf16, 2>> x, copy;
      std::vector<tp::tensor<tp::fp8_e4m3, 2>> q;
      std::vector<tp::tensor<float, 2>> s;
      const long long groups = group == 0 ? 1 : (k + 127) / 128;
      for (int i = 0; i < sets; ++i) {
        x.push_back(bench::random_tensor<tp::bf16, 2>(dev, {m, k}, i));
        copy.emplace_back(dev, std::array<long long, 2>{m, k});
        q.emplace_back(dev, std::array<long long, 2>{m, k});
        s.emplace_back(dev, std::array<long long, 2>{m, groups});
      }
      auto ours = [&](int i) { tp::quantize_fp8<tp::bf16>(dev, x[i], q[i], s[i], {.group = group}); };
      auto memcpy = [&](int i) {
        TP_CUDA_CHECK(cudaMemcpyAsync(copy[i].data(), x[i].data(), m * k * 2, cudaMemcpyDeviceToDevice));
      };
      const auto [copy_ms, our_ms] = bench::paired_ms(memcpy, ours, sets);
      const double bytes = m * k * (group == 0 ? 2 * 2 + 1 : 2 + 1) + 4.0 * m * groups;
      const double copy_tbs = 2.0 * m * k * 2 / (copy_ms * 1e-3) / 1e12, our_tbs = bytes / (our_ms * 1e-3) / 1e12;
      std::printf("quantize bf16 %lld x %lld group %d: %.4f ms, %.2f TB/s (copy %.2f TB/s): %.2f of the copy rate\n", m,
                  k, group, our_ms, our_tbs, copy_tbs, our_tbs / copy_tbs);
      char row[256];
      std::snprintf(row, sizeof row,
                    "{\"m\": %lld, \"k\": %lld, \"group\": %d, \"ms\": %.5f, \"tbs\": %.3f, \"copy_tbs\": %.3f}", m, k,
                    group, our_ms, our_tbs, copy_tbs);
      rows.push_back(row);
    }
  if (argc > 1) bench::write_results(argv[1], dev, rows);
  return 0;
}
