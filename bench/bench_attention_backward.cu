// tilepipe's attention backward (kernels/attention_backward.cuh: delta, dQ and dK dV kernels)
// on the configurations of a shapes file, timed as bench_attention times the forward: batches of
// 10 calls between CUDA events, 3 warm-up batches, the median of 15, inputs rotated through
// enough sets to exceed 200 MB. O and LSE come from one forward call per set, outside the
// timing; the delta workspace is allocated once. FLOPs: 2.5 x the forward's (FlashAttention's
// convention), 10 b hq sq sk d, halved when causal.
//   bench_attention_backward --shapes bench/attention_shapes.txt --only 2    # d128 16k, non-causal and causal
//   bench_attention_backward --shapes bench/attention_shapes.txt --json out.json
//   bench_attention_backward --shapes ... --modes 1,0     # deterministic (1) and the single pass (0), alternating
// Built with TILEPIPE_PROFILE (bench_attention_backward_on), --trace-dir DIR also runs each row
// once with a profiler bound to the dK dV kernel and writes where its warpgroups' time went
// (bench/profile_summary.hpp): DIR/<row>.summary.txt (printed too) and DIR/<row>.json.
#include <tilepipe/kernels/attention.cuh>
#include <tilepipe/kernels/attention_backward.cuh>

#include "bench_util.hpp"
#include "profile_summary.hpp"

#include <cmath>
#include <cstring>
#include <sstream>
#include <utility>

namespace {

struct config {
  long long b, sq, sk, hq, hkv, d;
  int causal;
  std::string dtype;
};

std::vector<config> read_shapes(const char* path, int only) {
  return bench::read_rows<config>(path, "bench_attention_backward", [](std::istream& f, config& c) {
    return static_cast<bool>(f >> c.b >> c.sq >> c.sk >> c.hq >> c.hkv >> c.d >> c.causal >> c.dtype);
  }, only);
}

template <class T>
std::string run(const tp::device& dev, const config& c, bool deterministic, const char* trace_dir) {
  // Per set: q, o, d_o, dq (sq rows of hq heads) and k, v, dk, dv (sk rows of hkv heads).
  const long long set_bytes = (4 * c.b * c.sq * c.hq + 4 * c.b * c.sk * c.hkv) * c.d * 2;
  const int sets = static_cast<int>(std::min<long long>(8, std::max<long long>(1, (200LL << 20) / set_bytes + 1)));
  std::vector<tp::tensor<T, 4>> q, k, v, o, d_o, dq, dk, dv;
  std::vector<tp::tensor<float, 3>> lse;
  tp::tensor<float, 1> workspace(dev, {c.b * c.hq * c.sq});
  tp::tensor<float, 1> dq_workspace(dev, {deterministic ? 1 : tp::attention_backward_dq_workspace_size(c.b, c.sq, c.hq, c.d)});
  tp::attention_backward_options opt{.causal = c.causal != 0, .workspace = workspace.data(),
                                     .deterministic = deterministic, .dq_workspace = dq_workspace.data()};
  for (int s = 0; s < sets; ++s) {
    q.push_back(bench::random_tensor<T, 4>(dev, {c.b, c.sq, c.hq, c.d}, 5 * s));
    k.push_back(bench::random_tensor<T, 4>(dev, {c.b, c.sk, c.hkv, c.d}, 5 * s + 1));
    v.push_back(bench::random_tensor<T, 4>(dev, {c.b, c.sk, c.hkv, c.d}, 5 * s + 2));
    d_o.push_back(bench::random_tensor<T, 4>(dev, {c.b, c.sq, c.hq, c.d}, 5 * s + 3));
    o.push_back(tp::tensor<T, 4>(dev, {c.b, c.sq, c.hq, c.d}));
    dq.push_back(tp::tensor<T, 4>(dev, {c.b, c.sq, c.hq, c.d}));
    dk.push_back(tp::tensor<T, 4>(dev, {c.b, c.sk, c.hkv, c.d}));
    dv.push_back(tp::tensor<T, 4>(dev, {c.b, c.sk, c.hkv, c.d}));
    lse.push_back(tp::tensor<float, 3>(dev, {c.b, c.hq, c.sq}));
    tp::attention_forward<T>(dev, q[s], k[s], v[s], o[s], {.causal = c.causal != 0, .lse = lse[s].data()});
  }
  auto call = [&](int s) {
    tp::attention_backward<T>(dev, q[s], k[s], v[s], o[s], d_o[s], lse[s], dq[s], dk[s], dv[s], opt);
  };
  bench::batch_timer timer;
  for (int i = 0; i < 3; ++i) timer.per_call(call, 10 * i, 10, sets);
  std::vector<float> ms;
  for (int i = 0; i < 15; ++i) ms.push_back(timer.per_call(call, 10 * i, 10, sets));
  const double med = bench::median(ms);
  if (tp::profiling && trace_dir) {
    tp::profiler prof(dev, 1 << 18);  // events per warpgroup track: every step of a 16k-token row
    opt.profile = &prof;
    bench::batch_timer profiled;
    const float profiled_ms = profiled.per_call(call, 0, 1, 1);
    char name[160];
    std::snprintf(name, sizeof name, "backward_b%lld_sq%lld_sk%lld_hq%lld_hkv%lld_d%lld_c%d_%s%s", c.b, c.sq, c.sk, c.hq,
                  c.hkv, c.d, c.causal, c.dtype.c_str(), deterministic ? "" : "_single_pass");
    bench::write_profile(prof, trace_dir, name, profiled_ms);
    opt.profile = nullptr;
  }
  const double flops = 2.5 * 4.0 * c.b * c.hq * c.sq * c.sk * c.d / (c.causal ? 2 : 1);
  // The single pass checks itself against the deterministic mode (which the tests check
  // against float64) on the first set: the largest difference relative to the largest value.
  std::string check;
  if (!deterministic) {
    tp::tensor<T, 4> dq2(dev, {c.b, c.sq, c.hq, c.d}), dk2(dev, {c.b, c.sk, c.hkv, c.d}), dv2(dev, {c.b, c.sk, c.hkv, c.d});
    tp::attention_backward<T>(dev, q[0], k[0], v[0], o[0], d_o[0], lse[0], dq2, dk2, dv2,
                              {.causal = c.causal != 0, .workspace = workspace.data()});
    double worst = 0;
    for (auto [x, y] : {std::pair{&dq[0], &dq2}, std::pair{&dk[0], &dk2}, std::pair{&dv[0], &dv2}}) {
      const auto a = x->to_host(), b = y->to_host();
      double diff = 0, top = 0;
      for (std::size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, std::abs(double(tp::to_float(a[i])) - tp::to_float(b[i])));
        top = std::max(top, std::abs(double(tp::to_float(b[i]))));
      }
      worst = std::max(worst, diff / std::max(top, 1e-30));
    }
    char buf[96];
    std::snprintf(buf, sizeof buf, "  against the deterministic mode %s %.2e", worst <= 2e-2 ? "ok" : "MISMATCH", worst);
    check = buf;
  }
  std::printf("tilepipe backward%s b=%lld sq=%lld sk=%lld hq=%lld hkv=%lld d=%lld causal=%d %s: %.3f ms  %.1f TFLOP/s%s\n",
              deterministic ? "" : " (single pass)", c.b, c.sq, c.sk, c.hq, c.hkv, c.d, c.causal, c.dtype.c_str(), med,
              flops / (med * 1e-3) / 1e12, check.c_str());
  std::fflush(stdout);
  char buf[160];
  std::snprintf(buf, sizeof buf, "\"median_ms\": %.5f, \"tflops\": %.2f", med, flops / (med * 1e-3) / 1e12);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  const char *shapes = "bench/attention_shapes.txt", *json = nullptr, *trace_dir = nullptr;
  int only = 0;
  std::vector<bool> modes{true};  // deterministic or not, per row
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--shapes")) shapes = argv[i + 1];
    else if (!std::strcmp(argv[i], "--json")) json = argv[i + 1];
    else if (!std::strcmp(argv[i], "--trace-dir")) trace_dir = argv[i + 1];
    else if (!std::strcmp(argv[i], "--only")) only = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--modes")) {
      modes.clear();
      std::istringstream list(argv[i + 1]);
      for (std::string m; std::getline(list, m, ',');) modes.push_back(std::atoi(m.c_str()) != 0);
    }
  }
  const auto dev = tp::device::open();
  if (!dev.is_gpu()) {
    std::printf("bench_attention_backward: no GPU\n");
    return 1;
  }
  std::vector<std::string> rows;
  for (const config& c : read_shapes(shapes, only))
    for (const bool deterministic : modes) {
      std::string r;
      try {
        r = c.dtype == "f16" ? run<tp::f16>(dev, c, deterministic, trace_dir) : run<tp::bf16>(dev, c, deterministic, trace_dir);
      } catch (const tp::error& e) {
        std::printf("tilepipe backward %s: %s\n", c.dtype.c_str(), e.what());
        r = "\"error\": \"" + std::string(e.what()).substr(0, 200) + "\"";
      }
      char head[256];
      std::snprintf(head, sizeof head,
                    "{\"impl\": \"%s\", \"b\": %lld, \"sq\": %lld, \"sk\": %lld, \"hq\": %lld, "
                    "\"hkv\": %lld, \"d\": %lld, \"causal\": %d, \"dtype\": \"%s\", ",
                    deterministic ? "tilepipe_backward" : "tilepipe_backward_single_pass", c.b, c.sq, c.sk, c.hq,
                    c.hkv, c.d, c.causal, c.dtype.c_str());
      rows.push_back(head + r + "}");
    }
  if (json) bench::write_results(json, dev, rows);
  return 0;
}
