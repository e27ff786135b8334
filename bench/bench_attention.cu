// tilepipe's attention forward (kernels/attention.cuh) on the configurations of a shapes
// file, timed like the Python peers (bench/attention_peers_*.py) so that
// bench/attention_table.py can put them side by side: batches of 10 calls between CUDA
// events, 3 warm-up batches, the median of 15, inputs rotated through enough sets to
// exceed 200 MB (L2 holds none of them). FLOPs: 4 b hq sq sk d, halved when causal.
//   bench_attention --shapes bench/attention_shapes.txt --json out.json [--only N] [--pages 0,16,128]
// --pages: page sizes to run each decode row (sq <= 16) and each chunked-prefill row (sq < sk:
// a chunk of queries against a longer cache) with, 0 for the unpaged cache (the default, and
// the only choice for rows with sq = sk): a paged row reads K and V as pages of a pool in a
// shuffled order through attention_options::page_table (every sequence uses all sk keys:
// seqused_k = sk; any Sq then runs the decode kernel) and is named tilepipe-paged<N> in the
// JSON, beside tilepipe. Every decode row also prints the bytes of K and V per second (the
// HBM-bound rate to compare with a device-to-device copy).
// --kv-dtype same|e4m3|both: K and V of the row's type (the default), fp8 (e4m3) with a scale
// per KV head (any Sq then runs the decode kernel), or both; fp8 rows are named
// tilepipe-fp8kv (tilepipe-paged<N>-fp8kv) in the JSON, and their K+V bytes are e4m3's.
// Built once per KV block choice: TP_ATTN_N64, TP_ATTN_N128, TP_ATTN_N256 and TP_ATTN_N128_MASKED
// (default: the library's).
// Built with TILEPIPE_PROFILE (bench_attention_on), --trace-dir DIR also runs each row once
// with a profiler bound and writes where its warpgroups' time went: DIR/<row>.summary.txt
// (bench/profile_summary.hpp; printed too) and DIR/<row>.json, the first 4 CTAs' timeline.
#include <tilepipe/kernels/attention.cuh>

#include "bench_util.hpp"
#include "profile_summary.hpp"

#include <algorithm>
#include <cstring>
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
  return bench::read_rows<config>(path, "bench_attention", [](std::istream& f, config& c) {
    return static_cast<bool>(f >> c.b >> c.sq >> c.sk >> c.hq >> c.hkv >> c.d >> c.causal >> c.dtype);
  }, only);
}

/// page: 0 for K and V as [b, sk, hkv, d]; else pages of that many keys, [b * ceil(sk /
/// page), page, hkv, d], each sequence's scattered over the pool by a shuffled page table.
/// KV: K and V's type, T or fp8_e4m3 (with a scale per KV head).
template <class T, class KV = T>
std::string run(const tp::device& dev, const config& c, int page, const char* trace_dir) {
  const long long pages_per_seq = page ? (c.sk + page - 1) / page : 0, num_pages = c.b * pages_per_seq;
  const long long kv_rows = page ? num_pages * page : c.b * c.sk;  // per head, K or V
  const long long set_bytes = (2 * c.b * c.sq * c.hq * 2 + 2 * kv_rows * c.hkv * static_cast<long long>(sizeof(KV))) * c.d;
  const int sets = static_cast<int>(std::min<long long>(8, std::max<long long>(1, (200LL << 20) / set_bytes + 1)));
  std::vector<tp::tensor<T, 4>> q, o;
  std::vector<tp::tensor<KV, 4>> k, v;
  for (int s = 0; s < sets; ++s) {
    q.push_back(bench::random_tensor<T, 4>(dev, {c.b, c.sq, c.hq, c.d}, 4 * s));
    if (page) {
      k.push_back(bench::random_tensor<KV, 4>(dev, {num_pages, page, c.hkv, c.d}, 4 * s + 1));
      v.push_back(bench::random_tensor<KV, 4>(dev, {num_pages, page, c.hkv, c.d}, 4 * s + 2));
    } else {
      k.push_back(bench::random_tensor<KV, 4>(dev, {c.b, c.sk, c.hkv, c.d}, 4 * s + 1));
      v.push_back(bench::random_tensor<KV, 4>(dev, {c.b, c.sk, c.hkv, c.d}, 4 * s + 2));
    }
    o.push_back(tp::tensor<T, 4>(dev, {c.b, c.sq, c.hq, c.d}));
  }
  const auto table = bench::shuffled_page_table(dev, num_pages);
  const auto used = tp::tensor<int, 1>::from_host(dev, {c.b}, std::vector<int>(c.b, static_cast<int>(c.sk)));
  // A split-KV workspace, so that decode rows split as the kernel chooses.
  const tp::partials_buffer partials(dev, tp::attention_partial_slots(dev), tp::attention_partial_floats(c.d));
  tp::attention_options opt{.causal = c.causal != 0, .partials = partials.ref()};
  const auto kv_scales = tp::tensor<float, 1>::from_host(dev, {c.hkv}, std::vector<float>(c.hkv, 1.0f / 64));
  if constexpr (std::is_same_v<KV, tp::fp8_e4m3>)
    opt.k_scale = kv_scales.data(), opt.v_scale = kv_scales.data(), opt.kv_scale_per_head = true;
  if (page) {
    opt.seqused_k = used.data(), opt.page_table = table.data();
    opt.max_pages_per_seq = static_cast<int>(pages_per_seq);
  }
  auto call = [&](int s) { tp::attention_forward<T, blocks>(dev, q[s], k[s], v[s], o[s], opt); };
  bench::batch_timer timer;
  for (int i = 0; i < 3; ++i) timer.per_call(call, 10 * i, 10, sets);
  std::vector<float> ms;
  for (int i = 0; i < 15; ++i) ms.push_back(timer.per_call(call, 10 * i, 10, sets));
  const double med = bench::median(ms);
  if (tp::profiling && trace_dir) {
    tp::profiler prof(dev, 1 << 15);
    opt.profile = &prof;
    bench::batch_timer profiled;
    const float profiled_ms = profiled.per_call(call, 0, 1, 1);
    char name[160];
    std::snprintf(name, sizeof name, "b%lld_sq%lld_sk%lld_hq%lld_hkv%lld_d%lld_c%d_%s%s%s", c.b, c.sq, c.sk, c.hq, c.hkv,
                  c.d, c.causal, c.dtype.c_str(), page ? ("_page" + std::to_string(page)).c_str() : "",
                  sizeof(KV) == 1 ? "_fp8kv" : "");
    bench::write_profile(prof, trace_dir, name, profiled_ms);
    opt.profile = nullptr;
  }
  const double flops = 4.0 * c.b * c.hq * c.sq * c.sk * c.d / (c.causal ? 2 : 1);
  const double kv_gbps = 2.0 * c.b * c.sk * c.hkv * c.d * sizeof(KV) / (med * 1e-3) / 1e9;  // K and V, each read once
  std::printf("tilepipe[%d]%s%s b=%lld sq=%lld sk=%lld hq=%lld hkv=%lld d=%lld causal=%d %s: %.3f ms  %.1f TFLOP/s",
              c.d == 64 ? blocks::n<64> : c.d == 128 ? (c.causal ? blocks::n<128, true> : blocks::n<128>) : blocks::n<256>,
              page ? (" page " + std::to_string(page)).c_str() : "", sizeof(KV) == 1 ? " fp8 KV" : "", c.b, c.sq, c.sk, c.hq, c.hkv, c.d, c.causal,
              c.dtype.c_str(), med, flops / (med * 1e-3) / 1e12);
  if (c.sq <= tp::attention_decode_max_seqlen_q) std::printf("  K+V %.0f GB/s", kv_gbps);
  std::printf("\n");
  std::fflush(stdout);
  char buf[200];
  std::snprintf(buf, sizeof buf, "\"median_ms\": %.5f, \"tflops\": %.2f, \"kv_gbps\": %.1f", med,
                flops / (med * 1e-3) / 1e12, kv_gbps);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const char *shapes = "bench/attention_shapes.txt", *json = nullptr, *trace_dir = nullptr;
  int only = 0;
  std::vector<int> pages{0};
  std::string kv_dtype = "same";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--shapes")) shapes = argv[i + 1];
    else if (!std::strcmp(argv[i], "--json")) json = argv[i + 1];
    else if (!std::strcmp(argv[i], "--only")) only = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--kv-dtype")) kv_dtype = argv[i + 1];
    else if (!std::strcmp(argv[i], "--trace-dir")) trace_dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--pages")) pages = bench::parse_page_sizes(argv[i + 1], "bench_attention");
  }
  const auto dev = tp::device::open();
  if (!dev.is_gpu()) {
    std::printf("bench_attention: no GPU\n");
    return 1;
  }
  if (kv_dtype != "same" && kv_dtype != "e4m3" && kv_dtype != "both") {
    std::printf("bench_attention: --kv-dtype is same, e4m3 or both, got %s\n", kv_dtype.c_str());
    return 1;
  }
  std::vector<bool> fp8_runs;
  if (kv_dtype != "e4m3") fp8_runs.push_back(false);
  if (kv_dtype != "same") fp8_runs.push_back(true);
  std::vector<std::string> rows;
  for (const config& c : read_shapes(shapes, only))
    for (int page : pages)
      for (bool fp8 : fp8_runs) {
        if (page && c.sq > tp::attention_decode_max_seqlen_q && c.sq >= c.sk) continue;  // paged: decode, chunks
        std::string r;
        try {
          if (fp8) r = c.dtype == "f16" ? run<tp::f16, tp::fp8_e4m3>(dev, c, page, trace_dir)
                                    : run<tp::bf16, tp::fp8_e4m3>(dev, c, page, trace_dir);
          else r = c.dtype == "f16" ? run<tp::f16>(dev, c, page, trace_dir) : run<tp::bf16>(dev, c, page, trace_dir);
        } catch (const tp::error& e) {
          std::printf("tilepipe %s: %s\n", c.dtype.c_str(), e.what());
          r = "\"error\": \"" + std::string(e.what()).substr(0, 200) + "\"";
        }
        const std::string impl = (page ? "tilepipe-paged" + std::to_string(page) : "tilepipe") + (fp8 ? "-fp8kv" : "");
        char head[300];
        std::snprintf(head, sizeof head,
                      "{\"impl\": \"%s\", \"b\": %lld, \"sq\": %lld, \"sk\": %lld, \"hq\": %lld, \"hkv\": %lld, "
                      "\"d\": %lld, \"causal\": %d, \"dtype\": \"%s\", ",
                      impl.c_str(), c.b, c.sq, c.sk, c.hq, c.hkv, c.d, c.causal, c.dtype.c_str());
        rows.push_back(head + r + "}");
      }
  if (json) bench::write_results(json, dev, rows);
  return 0;
}
