// The elementwise and matmul examples written with tp::pallas_call (pallas_kernels.cuh).
// Runs on the GPU when there is one, else in the CPU interpreter; checks both against
// float64 references and prints what it ran on and how fast.
//   pallas_call [--rows R] [--cols C] [--m M] [--n N] [--k K]
#include "../common/example_util.hpp"
#include "pallas_kernels.cuh"

int main(int argc, char** argv) {
  using T = tp::bf16;
  const auto dev = tp::device::open();
  const bool gpu = dev.is_gpu();
  const long long rows = example::flag(argc, argv, "--rows", gpu ? 65536 : 300);
  const long long cols = example::flag(argc, argv, "--cols", gpu ? 8192 : 600);
  const long long M = example::flag(argc, argv, "--m", gpu ? 4096 : 200);
  const long long N = example::flag(argc, argv, "--n", gpu ? 4096 : 296);
  const long long K = example::flag(argc, argv, "--k", gpu ? 4096 : 200);
  try {
    const auto hx = example::random_values<T>(rows * cols);
    auto x = tp::tensor<T, 2>::from_host(dev, {rows, cols}, hx);
    const auto axpb = pallas_examples::axpb<T>(rows, cols, 1.5f, -0.25f);
    auto y = axpb(dev, x);  // allocates y
    const auto hy = y.to_host();
    example::rel_error y_err;
    for (long long i = 0; i < rows * cols; ++i) y_err.add(tp::to_float(hy[i]), 1.5 * tp::to_float(hx[i]) - 0.25);
    const auto ty = tp::time_runs(dev, [&] { axpb.into(dev, x, y); }, gpu ? 3 : 0, gpu ? 20 : 1);
    std::printf("pallas_call elementwise y = a x + b, bf16 %lld x %lld on %s: %.3f ms, %.3f TB/s\n", rows, cols,
                dev.name().c_str(), ty.median_ms, 2.0 * rows * cols * sizeof(T) / (ty.median_ms * 1e-3) / 1e12);

    const auto ha = example::random_values<T>(M * K), hb = example::random_values<T>(K * N);
    auto a = tp::tensor<T, 2>::from_host(dev, {M, K}, ha);
    auto b = tp::tensor<T, 2>::from_host(dev, {K, N}, hb);
    const auto mm = pallas_examples::matmul<T, 128, 256, 3, 2>(M, N, K);
    auto c = mm(dev, a, b);  // allocates C
    const double c_err = example::matmul_error(ha, hb, c.to_host(), M, N, K, true, [](double ref, long long) { return ref; });
    const auto tc = tp::time_runs(dev, [&] { mm.into(dev, a, b, c); }, gpu ? 5 : 0, gpu ? 20 : 1);
    std::printf("pallas_call matmul bf16 %lld x %lld x %lld on %s: %.3f ms, %.1f TFLOP/s\n", M, N, K, dev.name().c_str(),
                tc.median_ms, 2.0 * M * N * K / (tc.median_ms * 1e-3) / 1e12);
    return example::report("y", y_err.value(), 1e-2) | example::report("C", c_err, 1e-2);
  } catch (const tp::error& e) {
    std::printf("%s\n", e.what());
    return 2;
  }
}
