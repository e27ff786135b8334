// The decode kernel alone (kernels/attention_decode.cuh), bf16 queries at head dims 64 and 128, on the
// decode rows (sq <= 16) of a shapes file, unpaged and paged (--pages): for A/B runs of
// decode changes. It builds in a minute where bench_attention (every attention kernel) takes
// ten. Per row: milliseconds and K + V bytes per second, eager (batches of 10 calls between
// CUDA events) and replayed from a CUDA graph (no host work between launches), and the host's
// microseconds per call; first the device-to-device copy rate (bytes read and written).
//   bench_attention_decode [shapes file] [--splits N] [--layout bshd|bhsd|both] [--pages 0,16,...]
//                          [--kv-dtype bf16|e4m3|both]   (default bench/attention_decode_shapes.txt)
// --splits: attention_options::num_splits (0, the default: the kernel's choice).
// --layout: unpaged K and V as [B, Sk, Hkv, D] (bshd, the default) or stored [B, Hkv, Sk, D]
// and passed as [B, Sk, Hkv, D] views (bhsd: each head's keys contiguous), or both.
// --pages 0,16,...: unpaged (0) and paged runs, pages of that many keys (default 0,16).
// --kv-dtype bf16|e4m3|both: K and V in bf16 (the default) or fp8 e4m3 with a scale per KV
// head (rows marked fp8; their K+V bytes are e4m3's), or both.
// Built with TILEPIPE_PROFILE (bench_attention_decode_on) it prints each row's profile summary
// (bench/profile_summary.hpp: where each warpgroup's time went) instead.
#include <tilepipe/kernels/attention.cuh>

#include "bench_util.hpp"
#include "profile_summary.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

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
template <int D, class KV>
void launch_decode(const tp::device& dev, const tp::tensor<T, 4>& q, const tp::tensor_view<KV, 4>& k,
                   const tp::tensor_view<KV, 4>& v, const tp::tensor<T, 4>& o, const config& c, int page, const tp::attention_decode_options& opt) {
  using namespace tp::attention_decode_detail;
  const int b = static_cast<int>(c.b), sq = static_cast<int>(c.sq);
  if (page == 0) launch<T, D, 0, KV>(dev, q, k, v, o, b, sq, sq, static_cast<int>(c.sk), nullptr, nullptr, opt);
  else launch_paged<T, D, KV>(dev, q, k, v, o, b, sq, sq, nullptr, opt);
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

template <class KV>
void run(const tp::device& dev, const config& c, int page, int splits, bool heads_outer) {
  const long long pages_per_seq = page ? (c.sk + page - 1) / page : 0, num_pages = c.b * pages_per_seq;
  const long long kv_rows = page ? num_pages * page : c.b * c.sk;
  const long long set_bytes = (2 * c.b * c.sq * c.hq * 2 + 2 * kv_rows * c.hkv * static_cast<long long>(sizeof(KV))) * c.d;
  const int sets = static_cast<int>(std::min<long long>(8, std::max<long long>(1, (200LL << 20) / set_bytes + 1)));
  const std::array<long long, 4> kv_shape = page         ? std::array<long long, 4>{num_pages, page, c.hkv, c.d}
                                            : heads_outer ? std::array<long long, 4>{c.b, c.hkv, c.sk, c.d}
                                                          : std::array<long long, 4>{c.b, c.sk, c.hkv, c.d};
  std::vector<tp::tensor<T, 4>> q, o;
  std::vector<tp::tensor<KV, 4>> k, v;
  std::vector<tp::tensor_view<KV, 4>> k_view, v_view;
  // [B, Hkv, Sk, D] storage seen as [B, Sk, Hkv, D] (dimensions 1 and 2 swapped).
  auto as_bshd = [&](const tp::tensor<KV, 4>& t) {
    tp::tensor_view<KV, 4> w = t.view();
    if (heads_outer) std::swap(w.shape[1], w.shape[2]), std::swap(w.stride[1], w.stride[2]);
    return w;
  };
  for (int s = 0; s < sets; ++s) {
    q.push_back(bench::random_tensor<T, 4>(dev, {c.b, c.sq, c.hq, c.d}, 4 * s));
    k.push_back(bench::random_tensor<KV, 4>(dev, kv_shape, 4 * s + 1));
    v.push_back(bench::random_tensor<KV, 4>(dev, kv_shape, 4 * s + 2));
    o.push_back(tp::tensor<T, 4>(dev, {c.b, c.sq, c.hq, c.d}));
    k_view.push_back(as_bshd(k.back()));
    v_view.push_back(as_bshd(v.back()));
  }
  // Every sequence uses all sk keys.
  const auto table = bench::shuffled_page_table(dev, num_pages);
  const auto used = tp::tensor<int, 1>::from_host(dev, {c.b}, std::vector<int>(c.b, static_cast<int>(c.sk)));
  // An explicit split count takes batches x KV heads x row tiles x splits slots (attention_decode.cuh).
  const long long row_tiles = (c.sq * c.hq / c.hkv + 63) / 64;
  const int slots = std::max(tp::attention_partial_slots(dev), static_cast<int>(c.b * c.hkv * row_tiles * splits));
  const tp::partials_buffer partials(dev, slots, tp::attention_partial_floats(c.d));
  tp::attention_decode_options opt{};
  opt.scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  opt.window_left = opt.window_right = -1;
  opt.num_splits = splits;
  opt.partials = partials.ref();
  if (page) opt.seqused_k = used.data(), opt.page_table = table.data(), opt.max_pages_per_seq = static_cast<int>(pages_per_seq);
  const auto kv_scales = tp::tensor<float, 1>::from_host(dev, {c.hkv}, std::vector<float>(c.hkv, 1.0f / 64));
  if constexpr (sizeof(KV) == 1) opt.k_scale = kv_scales.data(), opt.v_scale = kv_scales.data(), opt.scale_per_head = true;
  auto call = [&](int s) {
    if (c.d == 64) launch_decode<64, KV>(dev, q[s], k_view[s], v_view[s], o[s], c, page, opt);
    else launch_decode<128, KV>(dev, q[s], k_view[s], v_view[s], o[s], c, page, opt);
  };
  char name[160];
  std::snprintf(name, sizeof name, "b=%lld sq=%lld sk=%lld hq=%lld hkv=%lld d=%lld page=%d%s%s", c.b, c.sq, c.sk, c.hq,
                c.hkv, c.d, page, heads_outer ? " bhsd" : "", sizeof(KV) == 1 ? " fp8" : "");
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
  const double bytes = 2.0 * c.b * c.sk * c.hkv * c.d * static_cast<double>(sizeof(KV));
  std::printf("%s: %.4f ms  K+V %.0f GB/s  graph %.4f ms %.0f GB/s  host %.1f us/call\n", name, eager,
              bytes / (eager * 1e-3) / 1e9, graphed, bytes / (graphed * 1e-3) / 1e9, host_us);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const char* shapes = "bench/attention_decode_shapes.txt";
  int splits = 0;
  std::string layout = "bshd", kv_dtype = "bf16";
  std::vector<int> pages = {0, 16};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--splits") && i + 1 < argc) splits = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--layout") && i + 1 < argc) layout = argv[++i];
    else if (!std::strcmp(argv[i], "--kv-dtype") && i + 1 < argc) kv_dtype = argv[++i];
    else if (!std::strcmp(argv[i], "--pages") && i + 1 < argc) pages = bench::parse_page_sizes(argv[++i], "bench_attention_decode");
    else shapes = argv[i];
  }
  if (layout != "bshd" && layout != "bhsd" && layout != "both") {
    std::fprintf(stderr, "bench_attention_decode: --layout is bshd, bhsd or both, not %s\n", layout.c_str());
    return 2;
  }
  if (kv_dtype != "bf16" && kv_dtype != "e4m3" && kv_dtype != "both") {
    std::fprintf(stderr, "bench_attention_decode: --kv-dtype is bf16, e4m3 or both, not %s\n", kv_dtype.c_str());
    return 2;
  }
  const auto dev = tp::device::open();
  if (!dev.is_gpu()) {
    std::printf("bench_attention_decode: no GPU\n");
    return 1;
  }
  copy_rate();
  // The layouts of unpaged K and V to run (a paged cache has its own).
  const bool seq_major = layout != "bhsd", heads_major = layout != "bshd";
  auto run_layouts = [&](auto kv, const config& c, int page) {
    using KV = decltype(kv);
    if (page || seq_major) run<KV>(dev, c, page, splits, false);
    if (!page && heads_major) run<KV>(dev, c, page, splits, true);
  };
  for (const config& c : read_decode_rows(shapes))
    for (int page : pages) {
      if (kv_dtype != "e4m3") run_layouts(T{}, c, page);
      if (kv_dtype != "bf16") run_layouts(tp::fp8_e4m3{}, c, page);
    }
  return 0;
}
