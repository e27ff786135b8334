// Shared by the benchmarks: device buffers with random contents, CUDA-event timing of
// launches that rotate through several input sets (so L2 does not hold them), JSON out.
#pragma once

#include <tilepipe/tilepipe.cuh>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace bench {

namespace tp = tilepipe;

/// Element i of a random tensor: a normal-like value (the sum of four uniforms, centred and
/// scaled to unit variance) from a counter-based hash, so the host fills gigabytes of KV cache
/// on every core in about a second (std::normal_distribution took minutes per decode row).
inline float random_value(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + i;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const float sum = static_cast<float>(z & 0xFFFF) + static_cast<float>((z >> 16) & 0xFFFF) +
                    static_cast<float>((z >> 32) & 0xFFFF) + static_cast<float>(z >> 48);
  return (sum / 65536.0f - 2.0f) * 1.7320508f;  // four uniforms on [0, 1): mean 2, variance 1/3
}

template <class T, int R>
tp::tensor<T, R> random_tensor(const tp::device& dev, std::array<long long, R> shape, std::uint64_t seed) {
  long long n = 1;
  for (auto s : shape) n *= s;
  std::vector<T> h(static_cast<std::size_t>(n));
  const long long workers = std::max(1u, std::thread::hardware_concurrency()), chunk = (n + workers - 1) / workers;
  std::vector<std::thread> pool;
  for (long long w = 0; w < workers; ++w)
    pool.emplace_back([&h, n, chunk, w, seed] {
      for (long long i = w * chunk; i < std::min(n, (w + 1) * chunk); ++i) h[i] = tp::from_float<T>(random_value(seed, i));
    });
  for (auto& t : pool) t.join();
  return tp::tensor<T, R>::from_host(dev, shape, h);
}

/// The rows of a shapes file: parse(fields, row) reads each line's fields (`# ...` comments
/// removed) into a Row and says whether the line is one; at most `only` rows (0: all).
template <class Row, class Parse>
std::vector<Row> read_rows(const char* path, const char* who, Parse&& parse, int only = 0) {
  std::ifstream in(path);
  if (!in) tp::detail::throw_formatted("%s: cannot read %s", who, path);
  std::vector<Row> out;
  for (std::string line; std::getline(in, line) && (only <= 0 || static_cast<int>(out.size()) < only);) {
    std::istringstream fields(line.substr(0, line.find('#')));
    Row r;
    if (parse(fields, r)) out.push_back(r);
  }
  return out;
}

/// A --pages argument, "0,16,128": 0 for an unpaged KV cache, else pages of that many keys (a
/// power of two, at least 16, as the attention kernels take them).
inline std::vector<int> parse_page_sizes(const char* list, const char* who) {
  std::vector<int> pages;
  std::istringstream in(list);
  for (std::string p; std::getline(in, p, ',');) {
    char* end = nullptr;
    const long v = std::strtol(p.c_str(), &end, 10);
    if (end == p.c_str() || *end || v < 0 || (v && (v < 16 || (v & (v - 1)))))
      tp::detail::throw_formatted("%s: --pages takes 0 and powers of two >= 16, comma-separated; got %s", who, list);
    pages.push_back(static_cast<int>(v));
  }
  return pages;
}

/// A page table for a paged KV cache of num_pages pages (0: a one-entry table nobody reads):
/// page numbers 0 .. num_pages - 1 in a shuffled order, each sequence's pages scattered
/// over the pool.
inline tp::tensor<int, 1> shuffled_page_table(const tp::device& dev, long long num_pages) {
  std::vector<int> pool(static_cast<std::size_t>(num_pages));
  for (std::size_t i = 0; i < pool.size(); ++i) pool[i] = static_cast<int>(i);
  std::shuffle(pool.begin(), pool.end(), std::mt19937(7));
  return tp::tensor<int, 1>::from_host(dev, {std::max(num_pages, 1LL)}, num_pages ? pool : std::vector<int>{0});
}

/// Times batches of calls between two CUDA events, so the host's launch work overlaps the
/// GPU's and is not counted.
class batch_timer {
 public:
  batch_timer() {
    TP_CUDA_CHECK(cudaEventCreate(&start_));
    TP_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~batch_timer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  batch_timer(const batch_timer&) = delete;
  batch_timer& operator=(const batch_timer&) = delete;

  /// Milliseconds per call of fn(s) over calls first .. first + batch - 1, s = call % sets.
  template <class F>
  float per_call(F&& fn, int first, int batch, int sets) {
    TP_CUDA_CHECK(cudaEventRecord(start_));
    for (int j = 0; j < batch; ++j) fn((first + j) % sets);
    TP_CUDA_CHECK(cudaEventRecord(stop_));
    TP_CUDA_CHECK(cudaEventSynchronize(stop_));
    float t;
    TP_CUDA_CHECK(cudaEventElapsedTime(&t, start_, stop_));
    return t / batch;
  }

 private:
  cudaEvent_t start_, stop_;
};

/// Host microseconds per call of fn(s): the CPU's cost of enqueueing one launch.
template <class F>
double host_us_per_call(F&& fn, int sets, int calls = 20) {
  TP_CUDA_CHECK(cudaDeviceSynchronize());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) fn(i % sets);
  const auto t1 = std::chrono::steady_clock::now();
  TP_CUDA_CHECK(cudaDeviceSynchronize());
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / calls;
}

inline double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Times a peer and ours in alternating batches (peer, ours, ours, peer, ...) so that both
/// see the same clocks and temperature, which drift by 10% and more over a benchmark;
/// returns the median milliseconds per call of each.
template <class P, class O>
std::pair<double, double> paired_ms(P&& peer, O&& ours, int sets, int rounds = 20, int batch = 8) {
  for (int i = 0; i < 3; ++i) peer(i % sets), ours(i % sets);
  TP_CUDA_CHECK(cudaDeviceSynchronize());
  batch_timer timer;
  std::vector<float> peer_ms, our_ms;
  for (int r = 0; r < rounds; ++r) {
    auto time_peer = [&] { peer_ms.push_back(timer.per_call(peer, r * batch, batch, sets)); };
    auto time_ours = [&] { our_ms.push_back(timer.per_call(ours, r * batch, batch, sets)); };
    if (r % 2 == 0) time_peer(), time_ours();
    else time_ours(), time_peer();
  }
  return {median(peer_ms), median(our_ms)};
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

/// Writes {"gpu", "date", "results": [rows...]} (each row a JSON object already) to path.
inline void write_results(const char* path, const tp::device& dev, const std::vector<std::string>& rows) {
  FILE* f = std::fopen(path, "w");
  if (!f) tp::detail::throw_formatted("bench: cannot write %s", path);
  const std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::fprintf(f, "{\"gpu\": \"%s\", \"date\": \"%s\", \"results\": [\n", dev.name().c_str(), date);
  for (std::size_t i = 0; i < rows.size(); ++i) std::fprintf(f, "  %s%s\n", rows[i].c_str(), i + 1 < rows.size() ? "," : "");
  std::fprintf(f, "]}\n");
  std::fclose(f);
}

}  // namespace bench
