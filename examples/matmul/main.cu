// C = A * B in bf16 or fp16 with f32 accumulation, pipelined over K with emit_pipeline.
// Runs on the GPU when there is one, else in the CPU interpreter; checks itself against
// a float64 reference and prints what it ran on and how fast.
//   matmul [--m M] [--n N] [--k K] [--dtype bf16|f16] [--b row|col]
#include "../common/example_util.hpp"
#include "matmul_kernel.cuh"

template <class T, b_layout BL>
int run(const tp::device& dev, long long M, long long N, long long K) {
  using kernel = matmul_kernel<T, 128, 256, 4, 2, BL>;
  const bool b_row = BL == b_layout::row_major;
  auto ha = example::random_values<T>(M * K), hb = example::random_values<T>(K * N);
  auto a = tp::tensor<T, 2>::from_host(dev, {M, K}, ha);
  auto b = tp::tensor<T, 2>::from_host(dev, b_row ? std::array<long long, 2>{K, N} : std::array<long long, 2>{N, K}, hb);

  const auto kern = kernel::make(M, N, K);
  auto c = tp::kernel(kern, kern.config(), tp::out_type<T>(M, N))(dev, a, b);  // allocates C
  const auto hc = c.to_host();

  const double err = example::matmul_error(ha, hb, hc, M, N, K, b_row, [](double ref, long long) { return ref; });

  const auto launch = tp::kernel(kern, kern.config());  // writes into C in place
  const auto t = tp::time_runs(dev, [&] { launch(dev, a, b, c); }, dev.is_gpu() ? 5 : 0, dev.is_gpu() ? 20 : 1);
  std::printf("matmul %s, B %s, %lld x %lld x %lld on %s: %.3f ms, %.1f TFLOP/s\n", tp::dtype_traits<T>::name,
              b_row ? "row-major" : "column-major", M, N, K, dev.name().c_str(), t.median_ms,
              2.0 * M * N * K / (t.median_ms * 1e-3) / 1e12);
  return example::report("C", err, 1e-2);
}

int main(int argc, char** argv) {
  const auto dev = tp::device::open();
  const bool gpu = dev.is_gpu();
  const long long M = example::flag(argc, argv, "--m", gpu ? 4096 : 200);
  const long long N = example::flag(argc, argv, "--n", gpu ? 4096 : 296);
  const long long K = example::flag(argc, argv, "--k", gpu ? 4096 : 200);
  const std::string dtype = example::flag_str(argc, argv, "--dtype", "bf16");
  const bool b_row = example::flag_str(argc, argv, "--b", "row") == "row";
  try {
    if (dtype == "f16")
      return b_row ? run<tp::f16, b_layout::row_major>(dev, M, N, K) : run<tp::f16, b_layout::col_major>(dev, M, N, K);
    return b_row ? run<tp::bf16, b_layout::row_major>(dev, M, N, K) : run<tp::bf16, b_layout::col_major>(dev, M, N, K);
  } catch (const tp::error& e) {
    std::printf("%s\n", e.what());
    return 2;
  }
}
