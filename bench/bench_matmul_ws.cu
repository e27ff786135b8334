// The persistent warp-specialised matmul (examples/matmul_ws) against cuBLASLt, same run,
// same inputs, for several tile / stage / order configurations. Prints a table, writes JSON.
//   bench_matmul_ws [out.json]
#include "../examples/matmul_ws/matmul_ws_kernel.cuh"
#include "bench_util.hpp"
#include "cublas_peer.hpp"

template <class Kernel, class T>
double ours_ms(const tp::device& dev, bench::problem<T>& p, int group, tile_order order) {
  const auto kern = Kernel::make(p.M, p.N, p.K, group, order);
  const auto launch = tp::kernel(kern, kern.config(dev.multiprocessors()));
  return bench::median_ms([&](int s) { launch(dev, p.a[s], p.b[s], p.c); }, static_cast<int>(p.a.size()));
}

template <class T, b_layout BL>
void run_layout(const tp::device& dev, cublasLtHandle_t h, bench::json& js, const char* name) {
  const char* lay = BL == b_layout::row_major ? "rowB" : "colB";
  const long long shapes[][3] = {{2048, 2048, 2048}, {4096, 4096, 4096}, {4096, 8192, 4096}, {8192, 8192, 8192}};
  for (const auto& sh : shapes) {
    bench::problem<T> p(dev, sh[0], sh[1], sh[2], BL == b_layout::col_major);
    const double cb = p.tflops(bench::cublas_ms(h, p));
    const std::string shape = std::to_string(sh[0]) + "x" + std::to_string(sh[1]) + "x" + std::to_string(sh[2]);
    const std::string key = std::string(name) + "_" + lay + "_" + shape;
    js.add(key + "_cublas_TFLOPs", cb);
    std::printf("%-5s %s %-15s cuBLAS %6.1f TFLOP/s\n", name, lay, shape.c_str(), cb);
    auto one = [&](const char* cfg, double tf) {
      js.add(key + "_" + cfg + "_TFLOPs", tf);
      std::printf("%-5s %s %-15s %-22s %6.1f TFLOP/s  %.3fx cuBLAS\n", name, lay, shape.c_str(), cfg, tf, tf / cb);
    };
    using k128x256s4 = matmul_ws_kernel<T, T, 128, 256, 4, BL>;
    one("ws_128x256_s4_g8", p.tflops(ours_ms<k128x256s4>(dev, p, 8, tile_order::grouped)));
    one("ws_128x256_s4_g16", p.tflops(ours_ms<k128x256s4>(dev, p, 16, tile_order::grouped)));
    one("ws_128x256_s4_snake8", p.tflops(ours_ms<k128x256s4>(dev, p, 8, tile_order::snake)));
    one("ws_256x128_s3_g8", p.tflops(ours_ms<matmul_ws_kernel<T, T, 256, 128, 3, BL>>(dev, p, 8, tile_order::grouped)));
  }
}

template <class T>
void run_dtype(const tp::device& dev, cublasLtHandle_t h, bench::json& js, const char* name) {
  run_layout<T, b_layout::col_major>(dev, h, js, name);
  run_layout<T, b_layout::row_major>(dev, h, js, name);
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
}
