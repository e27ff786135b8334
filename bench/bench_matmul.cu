// matmul (examples/matmul, non-specialised emit_pipeline) against cuBLASLt: same run, same
// inputs and B layout, timed in alternating batches. Prints a table, writes JSON.
//   bench_matmul [out.json]
#include "../examples/matmul/matmul_kernel.cuh"
#include "cublas_peer.hpp"

template <class Kernel, class T>
void compare(const tp::device& dev, bench::problem<T>& p, bench::cublas_peer<T>& peer, int group, bench::json& js,
             const std::string& key, const char* cfg) {
  const auto kern = Kernel::make(p.M, p.N, p.K, group);
  const auto launch = tp::kernel(kern, kern.config());
  bench::compare(p, peer, [&](int s) { launch(dev, p.a[s], p.b[s], p.c); }, js, key, cfg);
}

template <class T, b_layout BL>
void run_layout(const tp::device& dev, cublasLtHandle_t h, bench::json& js, const char* name) {
  for (long long s : {2048LL, 4096LL, 8192LL}) {
    bench::problem<T> p(dev, s, s, s, BL == b_layout::col_major);
    bench::cublas_peer<T> peer(h, p);
    const std::string key = std::string(name) + (BL == b_layout::row_major ? "_rowB_" : "_colB_") + std::to_string(s);
    compare<matmul_kernel<T, 128, 256, 4, 2, BL>>(dev, p, peer, 8, js, key, "128x256_s4_wg2_g8");
    compare<matmul_kernel<T, 128, 256, 4, 2, BL>>(dev, p, peer, 16, js, key, "128x256_s4_wg2_g16");
    compare<matmul_kernel<T, 256, 128, 4, 2, BL>>(dev, p, peer, 8, js, key, "256x128_s4_wg2_g8");
  }
}

int main(int argc, char** argv) {
  return bench::matmul_main(argc, argv, [](const tp::device& dev, cublasLtHandle_t h, bench::json& js, auto t, auto col_b,
                                           const char* name) {
    run_layout<decltype(t), decltype(col_b)::value ? b_layout::col_major : b_layout::row_major>(dev, h, js, name);
  });
}
