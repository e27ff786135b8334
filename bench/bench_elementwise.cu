// Elementwise y = a x + b (examples/elementwise) against a device-to-device copy of the
// same bytes: same run, timed in alternating batches. Prints a table, writes JSON.
//   bench_elementwise [out.json]
#include "../examples/elementwise/elementwise_kernel.cuh"
#include "bench_util.hpp"

int main(int argc, char** argv) {
  const auto dev = tp::device::open(tp::backend::gpu);
  const long long R = 65536, C = 8192;  // 1 GiB in, 1 GiB out
  auto x = bench::random_tensor<tp::bf16, 2>(dev, {R, C}, 5);
  tp::tensor<tp::bf16, 2> y(dev, {R, C});
  const double bytes = 2.0 * R * C * 2;
  auto tbps = [&](double ms) { return bytes / (ms * 1e-3) / 1e12; };
  auto copy = [&](int) { TP_CUDA_CHECK(cudaMemcpyAsync(y.data(), x.data(), x.bytes(), cudaMemcpyDeviceToDevice)); };
  bench::json js;
  js.add("device", dev.name());
  const int sms = dev.multiprocessors();
  auto one = [&]<class Kernel>(const char* cfg, int ctas) {
    const auto kern = Kernel::make(R, C, 1.5f, -0.25f, ctas);
    const auto launch = tp::kernel(kern, kern.config());
    const auto [copy_ms, our_ms] = bench::paired_ms(copy, [&](int) { launch(dev, x, y); }, 1, 12, 4);
    js.add(std::string(cfg) + "_copy_TBps", tbps(copy_ms));
    js.add(std::string(cfg) + "_TBps", tbps(our_ms));
    std::printf("%-26s %.3f TB/s  copy %.3f TB/s  %.3f of copy\n", cfg, tbps(our_ms), tbps(copy_ms), copy_ms / our_ms);
  };
  one.template operator()<axpb_kernel<tp::bf16, 32, 256, 4, 2>>("32x256_in4_out2_ctas2x", 2 * sms);
  one.template operator()<axpb_kernel<tp::bf16, 32, 256, 4, 2>>("32x256_in4_out2_ctas8x", 8 * sms);
  one.template operator()<axpb_kernel<tp::bf16, 32, 256, 5, 2>>("32x256_in5_out2_ctas16x", 16 * sms);
  one.template operator()<axpb_kernel<tp::bf16, 64, 256, 2, 1>>("64x256_in2_out1_ctas2x", 2 * sms);
  js.write(argc, argv);
}
