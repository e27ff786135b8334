// tilepipe's attention forward (kernels/attention.cuh) on the configurations of a shapes
// file, timed like the Python peers (bench/attention_peers_*.py) so that
// bench/attention_table.py can put them side by side: batches of 10 calls between CUDA
// events, 3 warm-up batches, the median of 15, inputs rotated through enough sets to
// exceed 200 MB (L2 holds none of them). FLOPs: 4 b hq sq sk d, halved when causal.
//   bench_attention --shapes bench/attention_shapes.txt --json out.json [--only N]
// Built once per KV block choice: TP_ATTN_N64, TP_ATTN_N128, TP_ATTN_N256 and TP_ATTN_N128_MASKED
// (default: the library's).
#include <tilepipe/kernels/attention.cuh>

#include "bench_util.hpp"

#include <cstring>
#include <fstream>
#include <sstream>

#ifdef TP_ATTN_N64
#ifndef TP_ATTN_N128_MASKED
#define TP_ATTN_N128_MASKED 128
#endif
using blocks = tp::attention_blocks<TP_ATTN_N64, TP_ATTN_N128, TP_ATTN_N256, TP_ATTN_N128_MASKED>;
#else
using blocks = tp::attention_blocks<>;
#endif

namespace {

struct config {
  long long b, sq, sk, hq, hkv, d;
  int causal;
  std::string dtype;
};

std::vector<config> read_shapes(const char* path, int only) {
  std::ifstream in(path);
  if (!in) tp::detail::throw_formatted("bench_attention: cannot read %s", path);
  std::vector<config> out;
  for (std::string line; std::getline(in, line) && (only <= 0 || static_cast<int>(out.size()) < only);) {
    line = line.substr(0, line.find('#'));
    std::istringstream ls(line);
    config c;
    if (ls >> c.b >> c.sq >> c.sk >> c.hq >> c.hkv >> c.d >> c.causal >> c.dtype) out.push_back(c);
  }
  return out;
}

template <class T>
std::string run(const tp::device& dev, const config& c) {
  const long long set_bytes = (2 * c.b * c.sq * c.hq + 2 * c.b * c.sk * c.hkv) * c.d * 2;
  const int sets = static_cast<int>(std::min<long long>(8, std::max<long long>(1, (200LL << 20) / set_bytes + 1)));
  std::vector<tp::tensor<T, 4>> q, k, v, o;
  for (int s = 0; s < sets; ++s) {
    q.push_back(bench::random_tensor<T, 4>(dev, {c.b, c.sq, c.hq, c.d}, 4 * s));
    k.push_back(bench::random_tensor<T, 4>(dev, {c.b, c.sk, c.hkv, c.d}, 4 * s + 1));
    v.push_back(bench::random_tensor<T, 4>(dev, {c.b, c.sk, c.hkv, c.d}, 4 * s + 2));
    o.push_back(tp::tensor<T, 4>(dev, {c.b, c.sq, c.hq, c.d}));
  }
  // A split-KV workspace, so that decode rows split as the kernel chooses.
  const tp::partials_buffer partials(dev, tp::attention_partial_slots(dev), tp::attention_partial_floats(c.d));
  const tp::attention_options opt{.causal = c.causal != 0, .partials = partials.ref()};
  auto call = [&](int s) { tp::attention_forward<T, blocks>(dev, q[s], k[s], v[s], o[s], opt); };
  bench::batch_timer timer;
  for (int i = 0; i < 3; ++i) timer.per_call(call, 10 * i, 10, sets);
  std::vector<float> ms;
  for (int i = 0; i < 15; ++i) ms.push_back(timer.per_call(call, 10 * i, 10, sets));
  const double med = bench::median(ms);
  const double flops = 4.0 * c.b * c.hq * c.sq * c.sk * c.d / (c.causal ? 2 : 1);
  std::printf("tilepipe[%d] b=%lld sq=%lld sk=%lld hq=%lld hkv=%lld d=%lld causal=%d %s: %.3f ms  %.1f TFLOP/s\n", c.d == 64 ? blocks::n<64> : c.d == 128 ? (c.causal ? blocks::n<128, true> : blocks::n<128>) : blocks::n<256>, c.b, c.sq,
              c.sk, c.hq, c.hkv, c.d, c.causal, c.dtype.c_str(), med, flops / (med * 1e-3) / 1e12);
  std::fflush(stdout);
  char buf[160];
  std::snprintf(buf, sizeof buf, "\"median_ms\": %.5f, \"tflops\": %.2f", med, flops / (med * 1e-3) / 1e12);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const char *shapes = "bench/attention_shapes.txt", *json = nullptr;
  int only = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--shapes")) shapes = argv[i + 1];
    else if (!std::strcmp(argv[i], "--json")) json = argv[i + 1];
    else if (!std::strcmp(argv[i], "--only")) only = std::atoi(argv[i + 1]);
  }
  const auto dev = tp::device::open();
  if (!dev.is_gpu()) {
    std::printf("bench_attention: no GPU\n");
    return 1;
  }
  std::vector<std::string> rows;
  for (const config& c : read_shapes(shapes, only)) {
    std::string r;
    try {
      r = c.dtype == "f16" ? run<tp::f16>(dev, c) : run<tp::bf16>(dev, c);
    } catch (const tp::error& e) {
      std::printf("tilepipe %s: %s\n", c.dtype.c_str(), e.what());
      r = "\"error\": \"" + std::string(e.what()).substr(0, 200) + "\"";
    }
    char head[256];
    std::snprintf(head, sizeof head,
                  "{\"impl\": \"tilepipe\", \"b\": %lld, \"sq\": %lld, \"sk\": %lld, \"hq\": %lld, \"hkv\": %lld, "
                  "\"d\": %lld, \"causal\": %d, \"dtype\": \"%s\", ",
                  c.b, c.sq, c.sk, c.hq, c.hkv, c.d, c.causal, c.dtype.c_str());
    rows.push_back(head + r + "}");
  }
  if (json) bench::write_results(json, dev, rows);
  return 0;
}
