// A ragged grouped matmul, the expert layer of a mixture of experts: the rows of lhs are the
// tokens sorted by expert, group g multiplies its rows by rhs[g]. The group offsets stay on
// the device. Runs on the GPU when there is one, else in the CPU interpreter; checks itself
// against a float64 reference and prints what it ran on and how fast.
//   grouped_matmul [--groups G] [--rows R (per group on average)] [--k K] [--n N] [--routing balanced|skewed]
//                  [--rhs kn|nk] [--dtype bf16|f16] [--masked 0|1]
// --masked 1 runs the decode layout: lhs [G, R, K] with per-group valid counts (the
// routing's sizes, clipped to R).
#include <tilepipe/kernels/grouped_matmul.cuh>

#include "../common/example_util.hpp"
#include "../common/grouped_routing.hpp"

#include <algorithm>
#include <numeric>

template <class T>
int run(const tp::device& dev, int G, long long R, long long K, long long N, const std::string& routing,
        tp::rhs_layout layout, bool masked) {
  auto sizes = example::group_sizes(G, R, routing);
  if (masked)
    for (int& s : sizes) s = static_cast<int>(std::min<long long>(s, R));
  const long long M = G * R;  // rows of lhs (stacked groups when masked)
  std::vector<long long> begin(G);
  for (int g = 0, at = 0; g < G; at += sizes[g], ++g) begin[g] = masked ? g * R : at;
  const bool kn = layout == tp::rhs_layout::kn;
  const auto hl = example::random_values<T>(M * K), hr = example::random_values<T>(G * K * N);
  auto table = tp::tensor<int, 1>::from_host(dev, {G}, masked ? sizes : example::group_ends(sizes));
  auto rhs = tp::tensor<T, 3>::from_host(dev, kn ? std::array<long long, 3>{G, K, N} : std::array<long long, 3>{G, N, K}, hr);
  auto lhs = tp::tensor<T, 3>::from_host(dev, {masked ? G : 1, masked ? R : M, K}, hl);
  auto out = tp::tensor<T, 3>(dev, {masked ? G : 1, masked ? R : M, N});
  auto launch = [&] {
    if (masked) return tp::grouped_matmul_masked<T>(dev, lhs, rhs, layout, table.data(), out);
    const tp::tensor_view<T, 3> l = lhs.view(), o = out.view();
    tp::grouped_matmul<T>(dev, {l.data, {M, K}, {K, 1}, l.on_gpu}, rhs, layout, table.data(),
                          {o.data, {M, N}, {N, 1}, o.on_gpu});
  };
  launch();
  const auto ho = out.to_host();

  // Every entry of small problems, 4096 random valid ones of large ones, against float64.
  example::rel_error err;
  std::mt19937_64 rng(7);
  const long long valid = std::accumulate(sizes.begin(), sizes.end(), 0LL);
  const bool all = valid * N <= 1 << 16;
  for (long long s = 0; s < (all ? valid * N : 4096); ++s) {
    long long i = all ? s / N : static_cast<long long>(rng() % valid);
    const long long j = all ? s % N : static_cast<long long>(rng() % N);
    int g = 0;
    while (i >= sizes[g]) i -= sizes[g++];  // the i-th valid row is row i of group g
    const long long row = begin[g] + i;
    double ref = 0;
    for (long long k = 0; k < K; ++k)
      ref += double(tp::to_float(hl[row * K + k])) * tp::to_float(hr[g * K * N + (kn ? k * N + j : j * K + k)]);
    err.add(tp::to_float(ho[row * N + j]), ref);
  }

  const auto t = tp::time_runs(dev, launch, dev.is_gpu() ? 5 : 0, dev.is_gpu() ? 20 : 1);
  std::printf("grouped_matmul %s%s, %d groups of %lld rows (%s), rhs %s, K %lld, N %lld on %s: %.3f ms, %.1f TFLOP/s\n",
              tp::dtype_traits<T>::name, masked ? " (masked)" : "", G, R, routing.c_str(), kn ? "[G, K, N]" : "[G, N, K]",
              K, N, dev.name().c_str(), t.median_ms, 2.0 * valid * N * K / (t.median_ms * 1e-3) / 1e12);
  return example::report("out", err.value(), 1e-2);
}

int main(int argc, char** argv) {
  const auto dev = tp::device::open();
  const bool gpu = dev.is_gpu();
  // GPU defaults: sizes whose random inputs the host makes in seconds (bench/ has the MoE shapes).
  const int G = static_cast<int>(example::flag(argc, argv, "--groups", gpu ? 8 : 4));
  const long long R = example::flag(argc, argv, "--rows", gpu ? 1024 : 70);
  const long long K = example::flag(argc, argv, "--k", gpu ? 4096 : 136);
  const long long N = example::flag(argc, argv, "--n", gpu ? 4096 : 264);
  const std::string routing = example::flag_str(argc, argv, "--routing", "balanced");
  const auto layout = example::flag_str(argc, argv, "--rhs", "kn") == "nk" ? tp::rhs_layout::nk : tp::rhs_layout::kn;
  const bool masked = example::flag(argc, argv, "--masked", 0) != 0;
  try {
    return example::flag_str(argc, argv, "--dtype", "bf16") == "f16" ? run<tp::f16>(dev, G, R, K, N, routing, layout, masked)
                                                                    : run<tp::bf16>(dev, G, R, K, N, routing, layout, masked);
  } catch (const tp::error& e) {
    std::printf("%s\n", e.what());
    return 2;
  }
}
