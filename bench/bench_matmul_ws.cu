// The persistent warp-specialised matmul (examples/matmul_ws) against cuBLASLt: same run,
// same inputs and B layout, timed in alternating batches. Prints a table, writes JSON.
//   bench_matmul_ws [out.json]      (TP_BENCH_ONLY=text: only the cases whose name contains it)
#include "../examples/matmul_ws/matmul_ws_kernel.cuh"
#include "cublas_peer.hpp"

#include <cstdlib>

template <class Kernel, class T>
void compare(const tp::device& dev, bench::problem<T>& p, bench::cublas_peer<T>& peer, int group, tile_order order,
             bench::json& js, const std::string& key, const char* cfg) {
  if (const char* only = std::getenv("TP_BENCH_ONLY"); only && (key + " " + cfg).find(only) == std::string::npos) return;
  const auto kern = Kernel::make(p.M, p.N, p.K, group, order);
  const auto launch = tp::kernel(kern, kern.config(dev.multiprocessors()));
  TP_REQUIRE(launch.resident_ctas(dev) >= kern.config(dev.multiprocessors()).grid[0],
             "%s: the persistent grid does not fit on the GPU at once", cfg);
  bench::compare(p, peer, [&](int s) { launch(dev, p.a[s], p.b[s], p.c); }, js, key, cfg);
}

template <class T, b_layout BL>
void run_layout(const tp::device& dev, cublasLtHandle_t h, bench::json& js, const char* name) {
  const long long shapes[][3] = {{2048, 2048, 2048}, {4096, 4096, 4096}, {4096, 8192, 4096}, {8192, 8192, 8192}};
  for (const auto& sh : shapes) {
    bench::problem<T> p(dev, sh[0], sh[1], sh[2], BL == b_layout::col_major);
    bench::cublas_peer<T> peer(h, p);
    const std::string key = std::string(name) + (BL == b_layout::row_major ? "_rowB_" : "_colB_") + std::to_string(sh[0]) +
                            "x" + std::to_string(sh[1]) + "x" + std::to_string(sh[2]);
    using k128x256s4 = matmul_ws_kernel<T, T, 128, 256, 4, BL>;
    using k128x256s4c2 = matmul_ws_kernel<T, T, 128, 256, 4, BL, no_epilogue, 64, 2>;
    compare<k128x256s4>(dev, p, peer, 8, tile_order::grouped, js, key, "ws_128x256_s4_g8");
    compare<k128x256s4>(dev, p, peer, 8, tile_order::snake, js, key, "ws_128x256_s4_snake8");
    compare<k128x256s4c2>(dev, p, peer, 8, tile_order::grouped, js, key, "ws_128x256_s4_c2_g8");
  }
}

int main(int argc, char** argv) {
  const auto dev = tp::device::open(tp::backend::gpu);
  cublasLtHandle_t h;
  cublasLtCreate(&h);
  bench::json js;
  js.add("device", dev.name());
  run_layout<tp::bf16, b_layout::col_major>(dev, h, js, "bf16");
  run_layout<tp::bf16, b_layout::row_major>(dev, h, js, "bf16");
  run_layout<tp::f16, b_layout::col_major>(dev, h, js, "f16");
  run_layout<tp::f16, b_layout::row_major>(dev, h, js, "f16");
  cublasLtDestroy(h);
  js.write(argc, argv);
}
