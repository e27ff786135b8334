// Elementwise y = a x + b (examples/elementwise) against a device-to-device copy of the
// same bytes, same run; several block / slot configurations. Prints a table, writes JSON.
//   bench_elementwise [out.json]
#include "../examples/elementwise/elementwise_kernel.cuh"
#include "bench_util.hpp"

template <class Kernel>
double ours(const tp::device& dev, const tp::tensor_view<tp::bf16, 2>& x, const tp::tensor_view<tp::bf16, 2>& y, long long R,
            long long C, int ctas) {
  const auto kern = Kernel::make(R, C, 1.5f, -0.25f, ctas);
  const auto launch = tp::kernel(kern, kern.config());
  return bench::median_ms([&](int) { launch(dev, x, y); }, 1);
}

int main(int argc, char** argv) {
  const auto dev = tp::device::open(tp::backend::gpu);
  const long long R = 65536, C = 8192;  // 1 GiB in, 1 GiB out
  auto x = bench::random_tensor<tp::bf16, 2>(dev, {R, C}, 5);
  tp::tensor<tp::bf16, 2> y(dev, {R, C});
  const double bytes = 2.0 * R * C * 2;
  const double copy_ms =
      bench::median_ms([&](int) { TP_CUDA_CHECK(cudaMemcpyAsync(y.data(), x.data(), x.bytes(), cudaMemcpyDeviceToDevice)); }, 1);
  const double copy = bytes / (copy_ms * 1e-3) / 1e12;
  bench::json js;
  js.add("device", dev.name());
  js.add("copy_TBps", copy);
  std::printf("copy (cudaMemcpy D2D)          %.3f TB/s\n", copy);
  const int sms = dev.multiprocessors();
  // The same bytes seen as rows of 256 elements: every block is one contiguous range.
  const auto xf = tp::tensor_view<tp::bf16, 2>::wrap(x.data(), {R * C / 256, 256}, true);
  const auto yf = tp::tensor_view<tp::bf16, 2>::wrap(y.data(), {R * C / 256, 256}, true);
  auto one = [&](const char* cfg, double ms) {
    const double tb = bytes / (ms * 1e-3) / 1e12;
    js.add(std::string(cfg) + "_TBps", tb);
    std::printf("%-30s %.3f TB/s  %.3f of copy\n", cfg, tb, tb / copy);
  };
  one("32x256_in4_out2_ctas2x", ours<axpb_kernel<tp::bf16, 32, 256, 4, 2>>(dev, x.view(), y.view(), R, C, 2 * sms));
  one("32x256_in3_out2_ctas2x", ours<axpb_kernel<tp::bf16, 32, 256, 3, 2>>(dev, x.view(), y.view(), R, C, 2 * sms));
  one("64x256_in3_out2_ctas1x", ours<axpb_kernel<tp::bf16, 64, 256, 3, 2>>(dev, x.view(), y.view(), R, C, sms));
  one("64x256_in2_out1_ctas2x", ours<axpb_kernel<tp::bf16, 64, 256, 2, 1>>(dev, x.view(), y.view(), R, C, 2 * sms));
  one("32x256_in4_out2_ctas8x", ours<axpb_kernel<tp::bf16, 32, 256, 4, 2>>(dev, x.view(), y.view(), R, C, 8 * sms));
  one("32x256_in3_out1_ctas3x", ours<axpb_kernel<tp::bf16, 32, 256, 3, 1>>(dev, x.view(), y.view(), R, C, 3 * sms));
  one("32x256_in6_out2_ctas1x", ours<axpb_kernel<tp::bf16, 32, 256, 6, 2>>(dev, x.view(), y.view(), R, C, sms));
  one("32x256_in8_out3_ctas1x", ours<axpb_kernel<tp::bf16, 32, 256, 8, 3>>(dev, x.view(), y.view(), R, C, sms));
  one("64x256_in4_out2_ctas1x", ours<axpb_kernel<tp::bf16, 64, 256, 4, 2>>(dev, x.view(), y.view(), R, C, sms));
  one("64x128_in4_out2_ctas2x", ours<axpb_kernel<tp::bf16, 64, 128, 4, 2>>(dev, x.view(), y.view(), R, C, 2 * sms));
  one("16x256_in8_out4_ctas2x", ours<axpb_kernel<tp::bf16, 16, 256, 8, 4>>(dev, x.view(), y.view(), R, C, 2 * sms));
  one("32x256_in5_out2_ctas16x", ours<axpb_kernel<tp::bf16, 32, 256, 5, 2>>(dev, x.view(), y.view(), R, C, 16 * sms));
  one("flat_64x256_in4_out2_ctas1x", ours<axpb_kernel<tp::bf16, 64, 256, 4, 2>>(dev, xf, yf, R * C / 256, 256, sms));
  one("flat_32x256_in4_out2_ctas2x", ours<axpb_kernel<tp::bf16, 32, 256, 4, 2>>(dev, xf, yf, R * C / 256, 256, 2 * sms));
  one("flat_128x256_in2_out1_ctas1x", ours<axpb_kernel<tp::bf16, 128, 256, 2, 1>>(dev, xf, yf, R * C / 256, 256, sms));
  one("flat_64x256_in2_out1_ctas2x", ours<axpb_kernel<tp::bf16, 64, 256, 2, 1>>(dev, xf, yf, R * C / 256, 256, 2 * sms));
  one("flat_32x256_in4_out2_ctas8x", ours<axpb_kernel<tp::bf16, 32, 256, 4, 2>>(dev, xf, yf, R * C / 256, 256, 8 * sms));
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "w");
    js.print(f);
    std::fclose(f);
  }
}
