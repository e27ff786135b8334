// The profiler's cost and its pictures. Built three times: bench_profile (no
// TILEPIPE_PROFILE: the kernels record nothing), bench_profile_on (TILEPIPE_PROFILE, every
// step's events, a profiler bound to every launch) and bench_profile_coarse (tiles,
// epilogues and scopes only). Each times the warp-specialised matmul (bf16, 128 x 256 tiles, 4 stages,
// grouped order, whole tiles) on its problem; scripts/gpu-run runs the two alternately and
// reports the ratio of their medians.
//   bench_profile[_on|_coarse] [--m M --n N --k K] [--json out.json] [--trace-dir DIR]
// --trace-dir (bench_profile_on only) also writes matmul_ws.json, matmul.json (the
// non-specialised matmul of examples/matmul) and attention.json there, for scripts/trace-png.
#include "../examples/common/example_util.hpp"
#include "../examples/matmul/matmul_kernel.cuh"
#include "../examples/matmul_ws/matmul_ws_kernel.cuh"
#include "bench_util.hpp"

#include <tilepipe/kernels/attention.cuh>

#include <cstring>
#include <string>

namespace {

const char* flag_text(int argc, char** argv, const char* name) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  using T = tp::bf16;
  using ws_kernel = matmul_ws_kernel<T, T, 128, 256, 4, b_layout::row_major>;
  const auto dev = tp::device::open(tp::backend::gpu);
  const long long M = example::flag(argc, argv, "--m", 4096), N = example::flag(argc, argv, "--n", 4096),
                  K = example::flag(argc, argv, "--k", 4096);
  const int sets = 4;  // input pairs cycled through, more than L2 holds
  std::vector<tp::tensor<T, 2>> as, bs;
  for (int s = 0; s < sets; ++s) {
    as.push_back(bench::random_tensor<T, 2>(dev, {M, K}, 11 + s));
    bs.push_back(bench::random_tensor<T, 2>(dev, {K, N}, 23 + s));
  }
  tp::tensor<T, 2> c(dev, {M, N});
  tp::profiler prof(dev);
  const auto kern = ws_kernel::make(M, N, K);
  auto cfg = kern.config(dev.multiprocessors());
  if (tp::profiling) cfg.profile = &prof;
  const auto launch = tp::kernel(kern, cfg);
  auto run = [&](int s) { launch(dev, as[s], bs[s], c); };

  for (int i = 0; i < 20; ++i) run(i % sets);
  bench::batch_timer timer;
  std::vector<float> ms;
  for (int r = 0; r < 30; ++r) ms.push_back(timer.per_call(run, r * 10, 10, sets));
  const double median = bench::median(ms);
  long long records = 0, dropped = 0;
  if (tp::profiling)
    for (const auto& t : prof.tracks()) records += t.records, dropped += t.dropped;
  std::printf("matmul_ws bf16 %lld x %lld x %lld on %s, %s: %.4f ms median of 30 batches of 10 (%.1f TFLOP/s)%s\n", M,
              N, K, dev.name().c_str(),
              !tp::profiling ? "not profiled" : tp::profiling_steps ? "profiled (every step)" : "profiled (coarse)", median,
              2.0 * M * N * K / (median * 1e-3) / 1e12,
              tp::profiling ? (", " + std::to_string(records) + " records per launch, " + std::to_string(dropped) + " dropped").c_str()
                            : "");
  if (const char* path = flag_text(argc, argv, "--json")) {
    std::FILE* f = std::fopen(path, "w");
    TP_REQUIRE(f, "cannot write %s", path);
    std::fprintf(f, "{\"profiled\": %s, \"steps\": %s, \"median_ms\": %.5f, \"records\": %lld, \"dropped\": %lld, \"m\": %lld, \"n\": %lld, \"k\": %lld}\n",
                 tp::profiling ? "true" : "false", tp::profiling_steps ? "true" : "false", median, records, dropped, M, N, K);
    std::fclose(f);
  }

  const char* dir = flag_text(argc, argv, "--trace-dir");
  if (dir && tp::profiling_steps) {
    prof.write_trace(std::string(dir) + "/matmul_ws.json", 4);  // the first 4 CTAs
    using plain_kernel = matmul_kernel<T, 128, 256, 4, 2, b_layout::row_major>;
    const auto plain = plain_kernel::make(M, N, K);
    auto plain_cfg = plain.config();
    plain_cfg.profile = &prof;
    tp::kernel(plain, plain_cfg)(dev, as[0], bs[0], c);
    prof.write_trace(std::string(dir) + "/matmul.json", 4);
    // Attention's ping-pong (its softmax is a profile_scope): 8192 tokens, 16 heads of 128.
    const long long S = 8192, H = 16, D = 128;
    const auto q = bench::random_tensor<T, 4>(dev, {1, S, H, D}, 31), k = bench::random_tensor<T, 4>(dev, {1, S, H, D}, 32),
               v = bench::random_tensor<T, 4>(dev, {1, S, H, D}, 33);
    tp::tensor<T, 4> o(dev, {1, S, H, D});
    tp::attention_forward<T>(dev, q, k, v, o, {.profile = &prof});
    prof.write_trace(std::string(dir) + "/attention.json", 2);
    std::printf("traces written to %s (matmul_ws.json, matmul.json, attention.json)\n", dir);
  }
  return 0;
}
