// The persistent warp-specialised matmul (examples/matmul_ws) against cuBLASLt: same run,
// same inputs and B layout, timed in alternating batches. Prints a table, writes JSON.
//   bench_matmul_ws [out.json]      (TP_BENCH_ONLY=text: only the cases whose name contains it;
//                                     TP_BENCH_IDLE=s: let the GPU idle s seconds before each case;
//                                     TP_BENCH_HOST=1: also print each side's host time per call;
//                                     TP_BENCH_SHAPES=MxNxK,...: other problems;
//                                     TP_BENCH_SK_MIN=steps: the smallest saving for a stream-K split)
#include "../examples/matmul_ws/matmul_ws_kernel.cuh"
#include "cublas_peer.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

/// Whether TP_BENCH_ONLY (if set) selects the case "key cfg".
bool selected(const std::string& key, const char* cfg) {
  const char* only = std::getenv("TP_BENCH_ONLY");
  return !only || (key + " " + cfg).find(only) != std::string::npos;
}

/// One configuration of the benchmark: the tile order (bands of 8 tile rows), clusters, and
/// whether the last wave may be split by stream-K (with the kernel's minimum saving, or
/// TP_BENCH_SK_MIN's).
struct ws_config {
  const char* name;
  tp::tile_order order;
  int cluster;  // 1, or 2: pairs of CTAs sharing B by multicast
  bool stream_k;
};

template <class Kernel, class T>
void compare(const tp::device& dev, bench::problem<T>& p, bench::cublas_peer<T>& peer, const ws_config& cfg,
             bench::json& js, const std::string& key) {
  if (!selected(key, cfg.name)) return;
  if (const char* idle = std::getenv("TP_BENCH_IDLE"))  // a cool GPU runs at its highest clocks
    std::this_thread::sleep_for(std::chrono::duration<double>(std::atof(idle)));
  const auto partials = cfg.stream_k ? tp::partials_buffer(dev, Kernel::partial_slots(dev.multiprocessors()), Kernel::partial_floats)
                                     : tp::partials_buffer();
  auto kern = Kernel::make(p.M, p.N, p.K, {}, partials.ref());
  kern.sched.order = kern.sched.order.reordered(8, cfg.order);
  const char* sk_min = std::getenv("TP_BENCH_SK_MIN");
  if (cfg.stream_k && sk_min) kern.sched.stream_k_min_saving = std::atoi(sk_min);
  const tp::launch_config config = kern.config(dev.multiprocessors());
  const auto launch = tp::kernel(kern, config);
  TP_REQUIRE(launch.resident_ctas(dev) >= config.grid[0], "%s: the persistent grid does not fit on the GPU at once", cfg.name);
  bench::compare(p, peer, [&](int s) { launch(dev, p.a[s], p.b[s], p.c); }, js, key, cfg.name);
}

/// The problems (M, N, K): TP_BENCH_SHAPES="MxNxK,MxNxK,..." or the four of the issue.
std::vector<std::array<long long, 3>> shapes() {
  const char* list = std::getenv("TP_BENCH_SHAPES");
  if (!list) return {{2048, 2048, 2048}, {4096, 4096, 4096}, {4096, 8192, 4096}, {8192, 8192, 8192}};
  std::vector<std::array<long long, 3>> r;
  for (const char* c = list; *c;) {
    std::array<long long, 3> sh{};
    char* end = nullptr;
    for (int i = 0; i < 3; ++i, c = end + (*end == 'x')) sh[i] = std::strtoll(c, &end, 10);
    TP_REQUIRE(sh[0] > 0 && sh[1] > 0 && sh[2] > 0, "TP_BENCH_SHAPES: '%s' is not a list of MxNxK", list);
    r.push_back(sh);
    c = end + (*end == ',');
  }
  return r;
}

template <class T, b_layout BL>
void run_layout(const tp::device& dev, cublasLtHandle_t h, bench::json& js, const char* name) {
  const ws_config configs[] = {{"ws_128x256_s4_g8", tp::tile_order::grouped, 1, false},
                               {"ws_128x256_s4_g8_sk", tp::tile_order::grouped, 1, true},
                               {"ws_128x256_s4_snake8_sk", tp::tile_order::snake, 1, true},
                               {"ws_128x256_s4_c2_g8_sk", tp::tile_order::grouped, 2, true}};
  for (const auto& sh : shapes()) {
    const std::string key = std::string(name) + (BL == b_layout::row_major ? "_rowB_" : "_colB_") + std::to_string(sh[0]) +
                            "x" + std::to_string(sh[1]) + "x" + std::to_string(sh[2]);
    if (std::none_of(std::begin(configs), std::end(configs), [&](const ws_config& c) { return selected(key, c.name); }))
      continue;
    bench::problem<T> p(dev, sh[0], sh[1], sh[2], BL == b_layout::col_major);
    bench::cublas_peer<T> peer(h, p);
    using k128x256s4 = matmul_ws_kernel<T, T, 128, 256, 4, BL>;
    using k128x256s4c2 = matmul_ws_kernel<T, T, 128, 256, 4, BL, no_epilogue, 64, 2>;
    for (const ws_config& c : configs) {
      if (c.cluster == 2) compare<k128x256s4c2>(dev, p, peer, c, js, key);
      else compare<k128x256s4>(dev, p, peer, c, js, key);
    }
  }
}

int main(int argc, char** argv) {
  return bench::matmul_main(argc, argv, [](const tp::device& dev, cublasLtHandle_t h, bench::json& js, auto t, auto col_b,
                                           const char* name) {
    run_layout<decltype(t), decltype(col_b)::value ? b_layout::col_major : b_layout::row_major>(dev, h, js, name);
  });
}
