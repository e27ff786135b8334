// The decode kernel alone (kernels/attention_decode.cuh), bf16 at head dims 64 and 128, on the
// decode rows (sq <= 16) of a shapes file, unpaged and with pages of 16 keys: for A/B runs of
// decode changes. It builds in a minute where bench_attention (every attention kernel) takes
// ten. Per row: milliseconds and K + V bytes per second, eager (batches of 10 calls between
// CUDA events) and replayed from a CUDA graph (no host work between launches), and the host's
// microseconds per call; first the device-to-device copy rate (bytes read and written).
//   bench_attention_decode [shapes file] [--splits N]     (default bench/attention_decode_shapes.txt)
// --splits: attention_options::num_splits (0, the default: the kernel's choice).
// Built with TILEPIPE_PROFILE (bench_attention_decode_on) it prints each row's profile summary
// (bench/profile_summary.hpp: where each warpgroup's time went) instead.
#include <tilepipe/kernels/attention.cuh>

#include "bench_util.hpp"
#include "profile_summary.hpp"

#include <cstdlib>
#include <cstring>

namespace {

using T = tp::bf16;

struct config {
  long long b, sq, sk, hq, hkv, d;
};

std::vector<config> read_decode_rows(const char* path) {
  return bench::read_rows<config>(path, "bench_attention_decode", [](std::istream& f, config& c) {
    int causal;
    std::string dtype;
    return f >> c.b >> c.sq >> c.sk >> c.hq >> c.hkv >> c.d >> causal >> dtype && c.sq <= 16 && (c.d == 64 || c.d == 128);
  });
}

/// The decode kernel's launch for head dim D: unpaged, or pages of `page` keys.
template <int D>
void launch_decode(const tp::device& dev, const tp::tensor<T, 4>& q, const tp::tensor<T, 4>& k, const tp::tensor<T, 4>& v,
            const tp::tensor<T, 4>& o, const config& c, int page, const tp::attention_decode_options& opt) {
  using namespace tp::attention_decode_detail;
  const int b = static_cast<int>(c.b), sq = static_cast<int>(c.sq);
  if (page == 0) launch<T, D, 0, T>(dev, q, k, v, o, b, sq, sq, static_cast<int>(c.sk), nullptr, nullptr, opt);
  else launch_paged<T, D, T>(dev, q, k, v, o, b, sq, sq, nullptr, opt);
}

void copy_rate() {
  const std::size_t bytes = 1ull << 30;
  void *a, *b;
  TP_CUDA_CHECK(cudaMalloc(&a, bytes));
  TP_CUDA_CHECK(cudaMalloc(&b, bytes));
  bench::batch_timer timer;
  auto copy = [&](int) { TP_CUDA_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); };
  timer.per_call(copy, 0, 3, 1);
  std::vector<float> ms;
  for (int i = 0; i < 7; ++i) ms.push_back(timer.per_call(copy, 0, 3, 1));
  std::printf("copy 1 GiB: %.3f ms, %.0f GB/s read+write\n", bench::median(ms), 2.0 * bytes / (bench::median(ms) * 1e-3) / 1e9);
  TP_CUDA_CHECK(cudaFree(a));
  TP_CUDA_CHECK(cudaFree(b));
}

void run(const tp::device& dev, const config& c, int page, int splits) {
  const long long pages_per_seq = page ? (c.sk + page - 1) / page : 0, num_pages = c.b * pages_per_seq;
  const long long kv_rows = page ? num_pages * page : c.b * c.sk;
  const long long set_bytes = (2 * c.b * c.sq * c.hq + 2 * kv_rows * c.hkv) * c.d * 2;
  const int sets = static_cast<int>(std::min<long long>(8, std::max<long long>(1, (200LL << 20) / set_bytes + 1)));
  const std::array<long long, 4> kv_shape = page ? std::array<long long, 4>{num_pages, page, c.hkv, c.d}
                                                 : std::array<long long, 4>{c.b, c.sk, c.hkv, c.d};
  std::vector<tp::tensor<T, 4>> q, k, v, o;
  for (int s = 0; s < sets; ++s) {
    q.push_back(bench::random_tensor<T, 4>(dev, {c.b, c.sq, c.hq, c.d}, 4 * s));
    k.push_back(bench::random_tensor<T, 4>(dev, kv_shape, 4 * s + 1));
    v.push_back(bench::random_tensor<T, 4>(dev, kv_shape, 4 * s + 2));
    o.push_back(tp::tensor<T, 4>(dev, {c.b, c.sq, c.hq, c.d}));
  }
  // Every sequence uses all sk keys.
  const auto table = bench::shuffled_page_table(dev, num_pages);
  const auto used = tp::tensor<int, 1>::from_host(dev, {c.b}, std::vector<int>(c.b, static_cast<int>(c.sk)));
  const tp::partials_buffer partials(dev, tp::attention_partial_slots(dev), tp::attention_partial_floats(c.d));
  tp::attention_decode_options opt{};
  opt.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  opt.window_left = opt.window_right = -1;
  opt.num_splits = splits;
  opt.partials = partials.ref();
  if (page) opt.seqused_k = used.data(), opt.page_table = table.data(), opt.max_pages_per_seq = static_cast<int>(pages_per_seq);
  auto call = [&](int s) {
    if (c.d == 64) launch_decode<64>(dev, q[s], k[s], v[s], o[s], c, page, opt);
    else launch_decode<128>(dev, q[s], k[s], v[s], o[s], c, page, opt);
  };
  char name[160];
  std::snprintf(name, sizeof name, "b=%lld sq=%lld sk=%lld hq=%lld hkv=%lld d=%lld page=%d", c.b, c.sq, c.sk, c.hq, c.hkv,
                c.d, page);
  if (tp::profiling) {
    tp::profiler prof(dev, 1 << 15);
    opt.profile = &prof;
    call(0);
    TP_CUDA_CHECK(cudaDeviceSynchronize());
    std::printf("%s (profiled, %s)\n%s", name, tp::profiling_steps ? "every step" : "coarse",
                bench::format_summary(bench::summarize(prof.tracks()), 1000.0).c_str());
    return;
  }
  bench::batch_timer timer;
  for (int i = 0; i < 3; ++i) timer.per_call(call, 10 * i, 10, sets);
  std::vector<float> ms;
  for (int i = 0; i < 15; ++i) ms.push_back(timer.per_call(call, 10 * i, 10, sets));
  const double eager = bench::median(ms), host_us = bench::host_us_per_call(call, sets);
  // The same ten calls captured once and replayed.
  cudaStream_t side;
  TP_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  opt.stream = side;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  TP_CUDA_CHECK(cudaStreamBeginCapture(side, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < 10; ++i) call(i % sets);
  TP_CUDA_CHECK(cudaStreamEndCapture(side, &graph));
  TP_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  auto replay = [&](int) { TP_CUDA_CHECK(cudaGraphLaunch(exec, nullptr)); };
  for (int i = 0; i < 3; ++i) timer.per_call(replay, 0, 1, 1);
  ms.clear();
  for (int i = 0; i < 15; ++i) ms.push_back(timer.per_call(replay, 0, 1, 1) / 10);
  const double graphed = bench::median(ms);
  TP_CUDA_CHECK(cudaGraphExecDestroy(exec));
  TP_CUDA_CHECK(cudaGraphDestroy(graph));
  TP_CUDA_CHECK(cudaStreamDestroy(side));
  const double bytes = 2.0 * c.b * c.sk * c.hkv * c.d * 2;
  std::printf("%s: %.4f ms  K+V %.0f GB/s  graph %.4f ms %.0f GB/s  host %.1f us/call\n", name, eager,
              bytes / (eager * 1e-3) / 1e9, graphed, bytes / (graphed * 1e-3) / 1e9, host_us);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const char* shapes = "bench/attention_decode_shapes.txt";
  int splits = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--splits") && i + 1 < argc) splits = std::atoi(argv[++i]);
    else shapes = argv[i];
  }
  const auto dev = tp::device::open();
  if (!dev.is_gpu()) {
    std::printf("bench_attention_decode: no GPU\n");
    return 1;
  }
  copy_rate();
  for (const config& c : read_decode_rows(shapes))
    for (int page : {0, 16}) run(dev, c, page, splits);
  return 0;
}
