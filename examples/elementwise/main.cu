// y = a * x + b on a bf16 tensor with emit_pipeline: TMA loads into SMEM slots, the
// warpgroup computes into output slots, TMA stores them back, all overlapped.
// Runs on the GPU when there is one, else in the CPU interpreter; checks itself and
// prints what it ran on and the bandwidth (bytes read + written per second).
//   elementwise [--rows R] [--cols C]
#include "../common/example_util.hpp"
#include "elementwise_kernel.cuh"

int main(int argc, char** argv) {
  using T = tp::bf16;
  using kernel = axpb_kernel<T, 32, 256, 4, 2>;
  const auto dev = tp::device::open();
  const bool gpu = dev.is_gpu();
  const long long rows = example::flag(argc, argv, "--rows", gpu ? 65536 : 300);
  const long long cols = example::flag(argc, argv, "--cols", gpu ? 8192 : 600);
  const float a = 1.5f, b = -0.25f;
  const int ctas = gpu ? 2 * dev.multiprocessors() : 3;
  try {
    const auto hx = example::random_values<T>(rows * cols);
    auto x = tp::tensor<T, 2>::from_host(dev, {rows, cols}, hx);
    const auto kern = kernel::make(rows, cols, a, b, ctas);
    const auto cfg = kern.config();
    auto y = tp::kernel(kern, cfg, tp::out_type<T>(rows, cols))(dev, x);  // allocates y
    const auto hy = y.to_host();

    example::rel_error err;
    for (long long i = 0; i < rows * cols; ++i) err.add(tp::to_float(hy[i]), double(a) * tp::to_float(hx[i]) + b);

    const auto launch = tp::kernel(kern, cfg);  // writes into y in place
    const auto t = tp::time_runs(dev, [&] { launch(dev, x, y); }, gpu ? 3 : 0, gpu ? 20 : 1);
    const double bytes = 2.0 * rows * cols * sizeof(T);
    std::printf("elementwise y = a x + b, bf16 %lld x %lld on %s: %.3f ms, %.3f TB/s\n", rows, cols, dev.name().c_str(),
                t.median_ms, bytes / (t.median_ms * 1e-3) / 1e12);
    return example::report("y", err.value(), 1e-2);
  } catch (const tp::error& e) {
    std::printf("%s\n", e.what());
    return 2;
  }
}
