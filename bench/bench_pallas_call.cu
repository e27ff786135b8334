// pallas_call against the hand-written kernels it replaces, on the same inputs in one run,
// timed in alternating batches: the elementwise y = a x + b (examples/elementwise) and the
// non-specialised matmul (examples/matmul). Prints a table, writes JSON.
//   bench_pallas_call [out.json]
#include "../examples/elementwise/elementwise_kernel.cuh"
#include "../examples/matmul/matmul_kernel.cuh"
#include "../examples/pallas_call/pallas_kernels.cuh"
#include "bench_util.hpp"

#include <cstdio>
#include <string>

namespace {

void line(bench::json& js, const std::string& key, const char* unit, double hand, double pallas) {
  js.add(key + "_hand", hand);
  js.add(key + "_pallas_call", pallas);
  std::printf("%-34s hand-written %8.3f %s  pallas_call %8.3f %s  (%.3f of hand-written)\n", key.c_str(), hand, unit,
              pallas, unit, pallas / hand);
}

void elementwise(const tp::device& dev, bench::json& js) {
  const long long R = 65536, C = 8192;  // 1 GiB in, 1 GiB out
  auto x = bench::random_tensor<tp::bf16, 2>(dev, {R, C}, 5);
  tp::tensor<tp::bf16, 2> y(dev, {R, C});
  auto tbps = [&](double ms) { return 2.0 * R * C * 2 / (ms * 1e-3) / 1e12; };
  const auto hand = axpb_kernel<tp::bf16, 32, 256, 4, 2>::make(R, C, 1.5f, -0.25f, 2 * dev.multiprocessors());
  const auto hand_launch = tp::kernel(hand, hand.config());
  const auto pallas = pallas_examples::axpb<tp::bf16, 32, 256, 4>(R, C, 1.5f, -0.25f);
  const auto [hand_ms, pallas_ms] =
      bench::paired_ms([&](int) { hand_launch(dev, x, y); }, [&](int) { pallas.into(dev, x, y); }, 1, 12, 4);
  line(js, "elementwise_bf16_65536x8192", "TB/s", tbps(hand_ms), tbps(pallas_ms));
}

void matmul(const tp::device& dev, bench::json& js) {
  for (long long s : {2048LL, 4096LL, 8192LL}) {
    std::vector<tp::tensor<tp::bf16, 2>> a, b;
    const int sets = s >= 4096 ? 1 : 4;  // a pass over the sets is larger than the L2
    for (int i = 0; i < sets; ++i)
      a.push_back(bench::random_tensor<tp::bf16, 2>(dev, {s, s}, 11 + i)),
          b.push_back(bench::random_tensor<tp::bf16, 2>(dev, {s, s}, 97 + i));
    tp::tensor<tp::bf16, 2> c(dev, {s, s});
    auto tflops = [&](double ms) { return 2.0 * s * s * s / (ms * 1e-3) / 1e12; };
    const auto hand = matmul_kernel<tp::bf16, 128, 256, 4, 2>::make(s, s, s);
    const auto hand_launch = tp::kernel(hand, hand.config());
    // The output block is a pipeline slot here, so one input stage fewer fits in SMEM.
    const auto pallas = pallas_examples::matmul<tp::bf16, 128, 256, 3, 2>(s, s, s);
    const auto [hand_ms, pallas_ms] = bench::paired_ms([&](int i) { hand_launch(dev, a[i], b[i], c); },
                                                       [&](int i) { pallas.into(dev, a[i], b[i], c); }, sets, 12, 4);
    line(js, "matmul_bf16_" + std::to_string(s), "TFLOP/s", tflops(hand_ms), tflops(pallas_ms));
    // The same tiles in the hand-written kernel's grouped order (groups of 8 block rows).
    const auto grouped = pallas_examples::matmul_grouped<tp::bf16, 128, 256, 3, 2>(s, s, s, 8);
    const auto [hand2_ms, grouped_ms] = bench::paired_ms([&](int i) { hand_launch(dev, a[i], b[i], c); },
                                                         [&](int i) { grouped.into(dev, a[i], b[i], c); }, sets, 12, 4);
    line(js, "matmul_bf16_" + std::to_string(s) + "_grouped", "TFLOP/s", tflops(hand2_ms), tflops(grouped_ms));
    // Half as many columns of A per step, so twice the stages fit beside the output block.
    const auto bk32 = pallas_examples::matmul_grouped<tp::bf16, 128, 256, 6, 2, 32>(s, s, s, 8);
    const auto [hand5_ms, bk32_ms] = bench::paired_ms([&](int i) { hand_launch(dev, a[i], b[i], c); },
                                                      [&](int i) { bk32.into(dev, a[i], b[i], c); }, sets, 12, 4);
    line(js, "matmul_bf16_" + std::to_string(s) + "_grouped_bk32_6_stages", "TFLOP/s", tflops(hand5_ms), tflops(bk32_ms));
    // The hand-written kernel with pallas_call's stage count: how much of the gap is the
    // input stage that the output block's SMEM takes.
    const auto hand3 = matmul_kernel<tp::bf16, 128, 256, 3, 2>::make(s, s, s);
    const auto hand3_launch = tp::kernel(hand3, hand3.config());
    const auto [hand4_ms, hand3_ms] = bench::paired_ms([&](int i) { hand_launch(dev, a[i], b[i], c); },
                                                       [&](int i) { hand3_launch(dev, a[i], b[i], c); }, sets, 12, 4);
    js.add("matmul_bf16_" + std::to_string(s) + "_hand_3_stages", tflops(hand3_ms));
    std::printf("%-34s hand-written %8.3f %s  with 3 stages %8.3f %s  (%.3f)\n", ("matmul_bf16_" + std::to_string(s)).c_str(),
                tflops(hand4_ms), "TFLOP/s", tflops(hand3_ms), "TFLOP/s", hand4_ms / hand3_ms);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto dev = tp::device::open(tp::backend::gpu);
  bench::json js;
  js.add("device", dev.name());
  elementwise(dev, js);
  matmul(dev, js);
  js.write(argc, argv);
}
