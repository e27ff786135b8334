// Shared by the benchmarks: device buffers with random contents, CUDA-event timing of
// launches that rotate through several input sets (so L2 does not hold them), JSON out.
#pragma once

#include <tilepipe/tilepipe.cuh>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace bench {

namespace tp = tilepipe;

template <class T, int R>
tp::tensor<T, R> random_tensor(const tp::device& dev, std::array<long long, R> shape, std::uint64_t seed) {
  long long n = 1;
  for (auto s : shape) n *= s;
  std::vector<T> h(static_cast<std::size_t>(n));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (auto& x : h) x = tp::from_float<T>(d(rng));
  return tp::tensor<T, R>::from_host(dev, shape, h);
}

/// Median milliseconds per call of fn(i), i cycling through the input sets. Calls are
/// timed in batches of `batch` between two events, so the host's launch work overlaps the
/// GPU's and is not counted; the median is over `runs` batches.
template <class F>
double median_ms(F&& fn, int sets, int warmup = 5, int runs = 15, int batch = 10) {
  cudaEvent_t a, b;
  TP_CUDA_CHECK(cudaEventCreate(&a));
  TP_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < warmup; ++i) fn(i % sets);
  TP_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < runs; ++i) {
    TP_CUDA_CHECK(cudaEventRecord(a));
    for (int j = 0; j < batch; ++j) fn((i * batch + j) % sets);
    TP_CUDA_CHECK(cudaEventRecord(b));
    TP_CUDA_CHECK(cudaEventSynchronize(b));
    float t;
    TP_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t / batch);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/// Times a peer and ours in alternating batches (peer, ours, ours, peer, ...) so that both
/// see the same clocks and temperature, which drift by 10% and more over a benchmark;
/// returns the median milliseconds per call of each.
template <class P, class O>
std::pair<double, double> paired_ms(P&& peer, O&& ours, int sets, int rounds = 20, int batch = 8) {
  cudaEvent_t a, b;
  TP_CUDA_CHECK(cudaEventCreate(&a));
  TP_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) peer(i % sets), ours(i % sets);
  TP_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> tp_, to_;
  auto time = [&](auto& fn, int r) {
    TP_CUDA_CHECK(cudaEventRecord(a));
    for (int j = 0; j < batch; ++j) fn((r * batch + j) % sets);
    TP_CUDA_CHECK(cudaEventRecord(b));
    TP_CUDA_CHECK(cudaEventSynchronize(b));
    float t;
    TP_CUDA_CHECK(cudaEventElapsedTime(&t, a, b));
    return t / batch;
  };
  for (int r = 0; r < rounds; ++r) {
    if (r % 2 == 0) tp_.push_back(time(peer, r)), to_.push_back(time(ours, r));
    else to_.push_back(time(ours, r)), tp_.push_back(time(peer, r));
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(tp_.begin(), tp_.end());
  std::sort(to_.begin(), to_.end());
  return {tp_[tp_.size() / 2], to_[to_.size() / 2]};
}

/// Collects "key": value pairs and prints them as one JSON object.
struct json {
  std::vector<std::string> items;
  void add(const std::string& k, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4f", v);
    items.push_back("\"" + k + "\": " + buf);
  }
  void add(const std::string& k, const std::string& v) { items.push_back("\"" + k + "\": \"" + v + "\""); }
  /// Writes the JSON to argv[1], when the benchmark was given a path.
  void write(int argc, char** argv) const {
    if (argc < 2) return;
    FILE* f = std::fopen(argv[1], "w");
    print(f);
    std::fclose(f);
  }
  void print(FILE* f) const {
    std::fprintf(f, "{\n");
    for (std::size_t i = 0; i < items.size(); ++i) std::fprintf(f, "  %s%s\n", items[i].c_str(), i + 1 < items.size() ? "," : "");
    std::fprintf(f, "}\n");
  }
};

}  // namespace bench
