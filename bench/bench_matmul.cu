// matmul (examples/matmul, non-specialised emit_pipeline) against cuBLAS, same run, same
// inputs; several tile / stage / warpgroup configurations. Prints a table, writes JSON.
//   bench_matmul [out.json]
#include "../examples/matmul/matmul_kernel.cuh"
#include "bench_util.hpp"

#include "cublas_peer.hpp"

namespace {

using bench::problem;

template <class Kernel, class T>
double ours_ms(const tp::device& dev, problem<T>& p, int group) {
  const auto kern = Kernel::make(p.M, p.N, p.K, group);
  const auto launch = tp::kernel(kern, kern.config());
  return bench::median_ms([&](int s) { launch(dev, p.a[s], p.b[s], p.c); }, static_cast<int>(p.a.size()));
}

}  // namespace

template <class T, b_layout BL>
void run_layout(const tp::device& dev, cublasLtHandle_t h, bench::json& js, const char* name) {
  const char* lay = BL == b_layout::row_major ? "rowB" : "colB";
  for (long long s : {2048LL, 4096LL, 8192LL}) {
    problem<T> p(dev, s, s, s, BL == b_layout::col_major);
    const double cb = p.tflops(bench::cublas_ms(h, p));
    const std::string key = std::string(name) + "_" + lay + "_" + std::to_string(s);
    js.add(key + "_cublas_TFLOPs", cb);
    std::printf("%-5s %s %5lld^3  cuBLAS %6.1f TFLOP/s\n", name, lay, s, cb);
    auto one = [&](const char* cfg, double tf) {
      js.add(key + "_" + cfg + "_TFLOPs", tf);
      std::printf("%-5s %s %5lld^3  %-22s %6.1f TFLOP/s  %.3fx cuBLAS\n", name, lay, s, cfg, tf, tf / cb);
    };
    one("128x256_s4_wg2_g8", p.tflops(ours_ms<matmul_kernel<T, 128, 256, 4, 2, BL>>(dev, p, 8)));
    one("128x256_s4_wg2_g16", p.tflops(ours_ms<matmul_kernel<T, 128, 256, 4, 2, BL>>(dev, p, 16)));
    one("256x128_s4_wg2_g8", p.tflops(ours_ms<matmul_kernel<T, 256, 128, 4, 2, BL>>(dev, p, 8)));
  }
}

template <class T>
void run_dtype(const tp::device& dev, cublasLtHandle_t h, bench::json& js, const char* name) {
  run_layout<T, b_layout::row_major>(dev, h, js, name);
  run_layout<T, b_layout::col_major>(dev, h, js, name);
}

int main(int argc, char** argv) {
  const auto dev = tp::device::open(tp::backend::gpu);
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  bench::json js;
  js.add("device", dev.name());
  run_dtype<tp::bf16>(dev, h, js, "bf16");
  run_dtype<tp::f16>(dev, h, js, "f16");
  cublasLtDestroy(h);
  if (argc > 1) {
    FILE* f = std::fopen(argv[1], "w");
    js.print(f);
    std::fclose(f);
  }
  js.print(stdout);
}
