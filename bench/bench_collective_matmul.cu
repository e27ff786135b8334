// The collective matmuls against their peers on every GPU of the machine (one process per
// GPU, tp::run_ranks), in the same run:
//   all-gather + matmul:  tilepipe's ring kernel; ncclAllGather then cuBLAS; and the two
//                         overlapped on two streams (this device's rows multiplied while
//                         the others' are gathered, then the rest);
//   matmul + reduce-scatter: tilepipe's ring kernel; cuBLAS then ncclReduceScatter; and
//                         overlapped (each shard's rows multiplied in turn, and reduced to
//                         its device with ncclReduce on a second stream while the next are).
// Shapes are per GPU: M rows of a's shard (all-gather) or of c's (reduce-scatter), K and N
// as the layer sees them (all-gather: b is [K, N] on each GPU; reduce-scatter: each GPU
// holds a K / GPUs slice). Tensor-core use = FLOPs / (time x GPUs x the single-GPU cuBLAS
// rate measured in this run on the same product per GPU).
//     bench_collective_matmul [out.json] [--shapes M,K,N ...] [--stream-k 0]   (default: the shapes of issue 18)
// --stream-k 0: the all-gather runs its last wave as whole tiles (no stream-K split).
// Built with TILEPIPE_PROFILE (bench_collective_matmul_on: every pipeline step recorded;
// bench_collective_matmul_coarse: tiles, epilogues and scopes only), it profiles instead
// (issue 33: where the time beyond cuBLAS's goes):
//     bench_collective_matmul_on --trace-dir DIR [--shapes M,K,N] [--trace-ctas C] [--trace-events E]
// For the first shape (default 4096,8192,8192) and each op, every rank times its kernel with
// a profiler bound (slower than unprofiled: compare proportions, not times) and cuBLAS alone
// on the same product, then writes its last launch's timeline: DIR/<op>.rank<r>.json (Perfetto;
// the first C CTAs, default 4 with every step recorded and all of them otherwise; E records
// per warpgroup, default 32768) and DIR/<op>.rank<r>.summary.{txt,json}, the time of every
// warpgroup track by what it did (bench/profile_summary.hpp). Rank 0 prints its summaries.
#include <tilepipe/host/nccl.cuh>
#include <tilepipe/kernels/collective_matmul.cuh>
#include <tilepipe/kernels/matmul.cuh>

#include "bench_util.hpp"
#include "profile_summary.hpp"

#include <cublas_v2.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using tp::bf16;

/// The all-gather's stream-K threshold (--stream-k 0: never split).
int all_gather_stream_k_min_steps = tp::ring_matmul_kernel<bf16, tp::collective::all_gather>::stream_k_min_steps;

struct shape {
  long long M, K, N;
};

void check_cublas(cublasStatus_t s) {
  if (s != CUBLAS_STATUS_SUCCESS) tp::detail::throw_formatted("cuBLAS failed: status %d", static_cast<int>(s));
}

/// c[M, N] = a[M, K] . b[K, N], row-major bf16, f32 accumulation, on the handle's stream.
void gemm(cublasHandle_t h, const bf16* a, const bf16* b, bf16* c, long long M, long long N, long long K) {
  if (M == 0) return;
  const float one = 1.0f, zero = 0.0f;
  check_cublas(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M), static_cast<int>(K), &one,
                            b, CUDA_R_16BF, static_cast<int>(N), a, CUDA_R_16BF, static_cast<int>(K), &zero, c, CUDA_R_16BF,
                            static_cast<int>(N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/// Median milliseconds per call of f() (all on the default stream or joined to it).
template <class F>
double time_ms(F&& f, int batches = 7, int batch = 5) {
  for (int i = 0; i < 3; ++i) f(0);
  TP_CUDA_CHECK(cudaDeviceSynchronize());
  bench::batch_timer timer;
  std::vector<float> ms;
  for (int r = 0; r < batches; ++r) ms.push_back(timer.per_call(f, 0, batch, 1));
  return bench::median(ms);
}

/// Two streams and the events that fork from and join into the default stream.
struct streams {
  cudaStream_t compute, comm;
  cudaEvent_t forked, joined_compute, joined_comm, ready;
  streams() {
    TP_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    TP_CUDA_CHECK(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&forked, &joined_compute, &joined_comm, &ready})
      TP_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  }
  void fork() {
    TP_CUDA_CHECK(cudaEventRecord(forked, nullptr));
    TP_CUDA_CHECK(cudaStreamWaitEvent(compute, forked));
    TP_CUDA_CHECK(cudaStreamWaitEvent(comm, forked));
  }
  void join() {
    TP_CUDA_CHECK(cudaEventRecord(joined_compute, compute));
    TP_CUDA_CHECK(cudaEventRecord(joined_comm, comm));
    TP_CUDA_CHECK(cudaStreamWaitEvent(nullptr, joined_compute));
    TP_CUDA_CHECK(cudaStreamWaitEvent(nullptr, joined_comm));
  }
};

struct result {
  std::string op;
  shape s;
  double ours, serial, overlapped, cublas_alone, flops_per_gpu;
  double matmul_alone = 0;  // tp::matmul on the same product per GPU, without communication
};

/// tp::matmul (the warp-specialised matmul the ring kernels chain, stream-K workspace given)
/// on a . b -> c alone: what the ring's matmul would take without communication.
double time_matmul_alone(const tp::device& dev, const tp::tensor<bf16, 2>& a, const tp::tensor<bf16, 2>& b,
                         const tp::tensor<bf16, 2>& c) {
  const tp::partials_buffer partials(dev, tp::matmul_partial_slots(dev), tp::matmul_partial_floats);
  return time_ms([&](int) { tp::matmul<bf16>(dev, a, b, tp::b_layout::row_major, c, {.partials = partials.ref()}); });
}

/// Each op's timings; with a profiler (profiling builds) ours are the profiled launches, the
/// profiler holds the last one, and the peers are not run (only cuBLAS alone).
result bench_all_gather(tp::nccl_group& g, cublasHandle_t h, streams& st, const shape& s, tp::profiler* profile = nullptr) {
  const tp::device& dev = g.devices().local()[0];
  const int D = g.size(), me = g.rank();
  const long long M = s.M * D;
  auto a = bench::random_tensor<bf16, 2>(dev, {s.M, s.K}, 11 + me);
  auto b = bench::random_tensor<bf16, 2>(dev, {s.K, s.N}, 97 + me);
  // Random values for cuBLAS alone: on an unwritten (zero) matrix the tensor cores draw
  // less power and run faster than on data (docs/benchmarks.md).
  auto gathered = bench::random_tensor<bf16, 2>(dev, {M, s.K}, 13 + me);
  tp::tensor<bf16, 2> c(dev, {M, s.N});
  tp::all_gather_matmul<bf16> ag(g.devices(), std::vector<long long>(static_cast<std::size_t>(D), s.M), s.K, s.N, 0,
                                 all_gather_stream_k_min_steps);
  result r{"all_gather_matmul", s, 0, 0, 0, 0, 2.0 * M * s.N * s.K};
  r.ours = time_ms([&](int) { ag(dev, a, b, c, nullptr, profile); });
  check_cublas(cublasSetStream(h, nullptr));
  r.cublas_alone = time_ms([&](int) { gemm(h, gathered.data(), b.data(), c.data(), M, s.N, s.K); });
  if (profile) return r;
  r.matmul_alone = time_matmul_alone(dev, gathered, b, c);
  r.serial = time_ms([&](int) {
    TP_NCCL_CHECK(ncclAllGather(a.data(), gathered.data(), s.M * s.K, ncclBfloat16, g.comm(), nullptr));
    gemm(h, gathered.data(), b.data(), c.data(), M, s.N, s.K);
  });
  r.overlapped = time_ms([&](int) {
    st.fork();
    check_cublas(cublasSetStream(h, st.compute));
    gemm(h, a.data(), b.data(), c.data() + me * s.M * s.N, s.M, s.N, s.K);  // this device's rows meanwhile
    TP_NCCL_CHECK(ncclAllGather(a.data(), gathered.data(), s.M * s.K, ncclBfloat16, g.comm(), st.comm));
    TP_CUDA_CHECK(cudaEventRecord(st.ready, st.comm));
    TP_CUDA_CHECK(cudaStreamWaitEvent(st.compute, st.ready));
    gemm(h, gathered.data(), b.data(), c.data(), me * s.M, s.N, s.K);  // the shards before and after it
    gemm(h, gathered.data() + (me + 1) * s.M * s.K, b.data(), c.data() + (me + 1) * s.M * s.N, (D - 1 - me) * s.M, s.N, s.K);
    st.join();
  });
  check_cublas(cublasSetStream(h, nullptr));
  return r;
}

result bench_reduce_scatter(tp::nccl_group& g, cublasHandle_t h, streams& st, const shape& s,
                            tp::profiler* profile = nullptr) {
  const tp::device& dev = g.devices().local()[0];
  const int D = g.size(), me = g.rank();
  const long long M = s.M * D, K = s.K / D;  // this device's slice of K
  auto a = bench::random_tensor<bf16, 2>(dev, {M, K}, 11 + me);
  auto b = bench::random_tensor<bf16, 2>(dev, {K, s.N}, 97 + me);
  tp::tensor<bf16, 2> partial(dev, {M, s.N}), c(dev, {s.M, s.N});
  tp::matmul_reduce_scatter<bf16> rs(g.devices(), std::vector<long long>(static_cast<std::size_t>(D), s.M), K, s.N);
  result r{"matmul_reduce_scatter", s, 0, 0, 0, 0, 2.0 * M * s.N * K};
  r.ours = time_ms([&](int) { rs(dev, a, b, c, nullptr, profile); });
  check_cublas(cublasSetStream(h, nullptr));
  r.cublas_alone = time_ms([&](int) { gemm(h, a.data(), b.data(), partial.data(), M, s.N, K); });
  if (profile) return r;
  r.matmul_alone = time_matmul_alone(dev, a, b, partial);
  r.serial = time_ms([&](int) {
    gemm(h, a.data(), b.data(), partial.data(), M, s.N, K);
    TP_NCCL_CHECK(ncclReduceScatter(partial.data(), c.data(), s.M * s.N, ncclBfloat16, ncclSum, g.comm(), nullptr));
  });
  r.overlapped = time_ms([&](int) {
    st.fork();
    check_cublas(cublasSetStream(h, st.compute));
    for (int q = 0; q < D; ++q) {  // shard q's rows, then their reduction to device q while the next are multiplied
      gemm(h, a.data() + q * s.M * K, b.data(), partial.data() + q * s.M * s.N, s.M, s.N, K);
      TP_CUDA_CHECK(cudaEventRecord(st.ready, st.compute));
      TP_CUDA_CHECK(cudaStreamWaitEvent(st.comm, st.ready));
      TP_NCCL_CHECK(ncclReduce(partial.data() + q * s.M * s.N, c.data(), s.M * s.N, ncclBfloat16, ncclSum, q, g.comm(),
                               st.comm));
    }
    st.join();
  });
  check_cublas(cublasSetStream(h, nullptr));
  return r;
}

const char* flag_text(int argc, char** argv, const char* name) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return nullptr;
}

void write_file(const std::string& path, const std::string& text) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) tp::detail::throw_formatted("bench: cannot write %s", path.c_str());
  std::fputs(text.c_str(), f);
  std::fclose(f);
}

/// Profiles both ops at shape s on this rank: the trace and the summary of the last launch
/// (see the top of this file).
void profile_ops(tp::nccl_group& g, cublasHandle_t h, streams& st, const shape& s, const std::string& dir, int trace_ctas,
                 std::uint32_t events) {
  const tp::device& dev = g.devices().local()[0];
  for (int op = 0; op < 2; ++op) {
    tp::profiler prof(dev, events);
    const result r = op == 0 ? bench_all_gather(g, h, st, s, &prof) : bench_reduce_scatter(g, h, st, s, &prof);
    const auto tracks = prof.tracks();
    long long records = 0, dropped = 0;
    for (const auto& t : tracks) records += t.records, dropped += t.dropped;
    const bench::profile_summary sum = bench::summarize(tracks);
    const std::string base = dir + "/" + r.op + ".rank" + std::to_string(g.rank());
    prof.write_trace(base + ".json", trace_ctas);
    char head[768];
    std::snprintf(head, sizeof head,
                  "%s, rank %d of %d (%s), %lld x %lld x %lld per GPU, profiled (%s): %.3f ms per launch with the "
                  "profiler (median), cuBLAS alone on the same product %.3f ms; %zu tracks, %lld records, %lld dropped%s\n",
                  r.op.c_str(), g.rank(), g.size(), dev.name().c_str(), s.M, s.K, s.N,
                  tp::profiling_steps ? "every step" : "coarse", r.ours, r.cublas_alone, tracks.size(), records, dropped,
                  dropped ? " (raise --trace-events)" : "");
    const std::string text = head + bench::format_summary(sum, 1000.0);
    write_file(base + ".summary.txt", text);
    char extra[512];
    std::snprintf(extra, sizeof extra,
                  "{\"op\": \"%s\", \"rank\": %d, \"gpus\": %d, \"M_per_gpu\": %lld, \"K\": %lld, \"N\": %lld, "
                  "\"steps\": %s, \"profiled_ms\": %.4f, \"cublas_alone_ms\": %.4f, \"records\": %lld, \"dropped\": %lld, "
                  "\"summary\": ",
                  r.op.c_str(), g.rank(), g.size(), s.M, s.K, s.N, tp::profiling_steps ? "true" : "false", r.ours,
                  r.cublas_alone, records, dropped);
    write_file(base + ".summary.json", extra + bench::summary_json(sum, 1000.0) + "}\n");
    if (g.rank() == 0) std::printf("%s\n", text.c_str()), std::fflush(stdout);
  }
}

std::vector<shape> parse_shapes(int argc, char** argv) {
  std::vector<shape> v;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--shapes")
      for (int j = i + 1; j < argc && argv[j][0] != '-'; ++j) {
        shape s{};
        if (std::sscanf(argv[j], "%lld,%lld,%lld", &s.M, &s.K, &s.N) != 3)
          tp::detail::throw_formatted("--shapes: '%s' is not M,K,N", argv[j]);
        v.push_back(s);
      }
  if (!v.empty()) return v;
  v.push_back({4096, 8192, 8192});  // the bar of issue 18 first
  for (long long m : {1024, 8192})
    for (long long kn : {4096, 16384}) v.push_back({m, kn, kn});
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<shape> shapes = parse_shapes(argc, argv);
  const std::string json_path = argc > 1 && argv[1][0] != '-' ? argv[1] : "";
  const int D = tp::gpu_count();
  if (D < 2) {
    std::printf("bench_collective_matmul: needs at least 2 GPUs, found %d\n", D);
    return 1;
  }
  const char* trace_dir = flag_text(argc, argv, "--trace-dir");
  if (const char* sk = flag_text(argc, argv, "--stream-k"); sk && std::atoi(sk) == 0) all_gather_stream_k_min_steps = tp::stream_k_off;
  if (trace_dir && !tp::profiling) {
    std::printf("bench_collective_matmul: --trace-dir needs a TILEPIPE_PROFILE build (bench_collective_matmul_on)\n");
    return 1;
  }
  const char* ctas_text = flag_text(argc, argv, "--trace-ctas");
  const char* events_text = flag_text(argc, argv, "--trace-events");
  const int trace_ctas = ctas_text ? std::atoi(ctas_text) : tp::profiling_steps ? 4 : -1;
  const auto events = static_cast<std::uint32_t>(events_text ? std::atol(events_text) : 32768);
  try {
    tp::run_ranks(D, [&](tp::nccl_group& g) {
      cublasHandle_t h;
      check_cublas(cublasCreate(&h));
      streams st;
      if (trace_dir) {
        profile_ops(g, h, st, shapes[0], trace_dir, trace_ctas, events);
        cublasDestroy(h);
        return;
      }
      std::vector<std::string> rows;
      if (g.rank() == 0)
        std::printf("%d GPUs (%s); per GPU M x K x N; times in ms (medians); TC use = FLOPs / (time x GPUs x cuBLAS rate "
                    "alone); alone: the product per GPU without communication, by cuBLAS and tp::matmul\n"
                    "%-22s %-20s %9s %9s %9s %8s %8s %8s %8s %9s %9s\n",
                    D, g.devices().local()[0].name().c_str(), "op", "shape", "tilepipe", "serial", "overlap", "vs ser",
                    "vs ovl", "TC ours", "TC ser", "cuBLAS", "tp mm");
      for (const shape& s : shapes)
        for (int op = 0; op < 2; ++op) {
          const result r = op == 0 ? bench_all_gather(g, h, st, s) : bench_reduce_scatter(g, h, st, s);
          if (g.rank() != 0) continue;
          const double rate = r.flops_per_gpu / r.cublas_alone;  // FLOP per ms, one GPU, cuBLAS alone
          const double tc_ours = r.flops_per_gpu / (r.ours * rate), tc_serial = r.flops_per_gpu / (r.serial * rate);
          char shape_name[64];
          std::snprintf(shape_name, sizeof shape_name, "%lldx%lldx%lld", s.M, s.K, s.N);
          std::printf("%-22s %-20s %9.3f %9.3f %9.3f %7.2fx %7.2fx %7.1f%% %7.1f%% %9.3f %9.3f\n", r.op.c_str(), shape_name,
                      r.ours, r.serial, r.overlapped, r.serial / r.ours, r.overlapped / r.ours, 100 * tc_ours, 100 * tc_serial,
                      r.cublas_alone, r.matmul_alone);
          std::fflush(stdout);
          bench::json j;
          j.add("op", r.op), j.add("gpus", D), j.add("M_per_gpu", static_cast<double>(s.M));
          j.add("K", static_cast<double>(s.K)), j.add("N", static_cast<double>(s.N));
          j.add("tilepipe_ms", r.ours), j.add("nccl_then_cublas_ms", r.serial), j.add("overlapped_ms", r.overlapped);
          j.add("cublas_alone_ms", r.cublas_alone), j.add("matmul_alone_ms", r.matmul_alone), j.add("speedup_vs_serial", r.serial / r.ours);
          j.add("speedup_vs_overlapped", r.overlapped / r.ours), j.add("tc_use", tc_ours), j.add("tc_use_serial", tc_serial);
          std::string row = "{";
          for (std::size_t i = 0; i < j.items.size(); ++i) row += (i ? ", " : "") + j.items[i];
          rows.push_back(row + "}");
        }
      cublasDestroy(h);
      if (g.rank() == 0 && !json_path.empty()) bench::write_results(json_path.c_str(), g.devices().local()[0], rows);
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
