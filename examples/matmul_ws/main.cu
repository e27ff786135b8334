// The persistent, warp-specialised matmul (kernels/matmul.cuh) with a fused epilogue: C = epilogue(A * B).
// Runs on the GPU when there is one, else in the CPU interpreter; checks itself against a
// float64 reference and prints what it ran on and how fast.
//   matmul_ws [--m M] [--n N] [--k K] [--dtype bf16|f16] [--b row|col] [--bias-relu 1 | --cluster 2] [--stream-k 0]
// --cluster 2 runs clusters of two CTAs that share each B block by TMA multicast. When the
// tiles do not divide evenly among the SMs, the last wave is split by stream-K (partial
// sums in a workspace); --stream-k 0 runs it as whole tiles.
#include "../common/example_util.hpp"
#include <tilepipe/kernels/matmul.cuh>

template <class T, tp::b_layout BL, class Epi, int Cluster = 1>
int run(const tp::device& dev, long long M, long long N, long long K, Epi epi, const std::vector<T>& hbias, bool stream_k) {
  using kernel = tp::matmul_ws_kernel<T, T, 128, 256, 4, BL, Epi, 64, Cluster>;
  const bool b_row = BL == tp::b_layout::row_major;
  auto ha = example::random_values<T>(M * K), hb = example::random_values<T>(K * N);
  auto a = tp::tensor<T, 2>::from_host(dev, {M, K}, ha);
  auto b = tp::tensor<T, 2>::from_host(dev, b_row ? std::array<long long, 2>{K, N} : std::array<long long, 2>{N, K}, hb);
  const int sms = dev.is_gpu() ? dev.multiprocessors() : 4;
  const auto partials = stream_k ? tp::partials_buffer(dev, kernel::partial_slots(sms), kernel::partial_floats)
                                 : tp::partials_buffer();  // none: the last wave runs whole tiles
  const auto kern = kernel::make(M, N, K, epi, partials.ref());
  auto c = tp::kernel(kern, kern.config(sms), tp::out_type<T>(M, N))(dev, a, b);
  const auto hc = c.to_host();

  const double err = example::matmul_error(ha, hb, hc, M, N, K, b_row, [&](double ref, long long j) {
    return hbias.empty() ? ref : std::max(ref + tp::to_float(hbias[j]), 0.0);
  });

  const auto launch = tp::kernel(kern, kern.config(sms));
  const auto t = tp::time_runs(dev, [&] { launch(dev, a, b, c); }, dev.is_gpu() ? 5 : 0, dev.is_gpu() ? 20 : 1);
  std::printf("matmul_ws %s, B %s%s%s%s, %lld x %lld x %lld on %s: %.3f ms, %.1f TFLOP/s\n", tp::dtype_traits<T>::name,
              b_row ? "row-major" : "column-major", hbias.empty() ? "" : ", bias + ReLU",
              Cluster > 1 ? ", clusters of 2 (B multicast)" : "",
              kern.sched.plan(sms / Cluster).streams() ? ", last wave split by stream-K" : "", M, N, K, dev.name().c_str(),
              t.median_ms, 2.0 * M * N * K / (t.median_ms * 1e-3) / 1e12);
  return example::report("C", err, 1e-2);
}

template <class T>
int run_dtype(const tp::device& dev, long long M, long long N, long long K, bool b_row, bool bias_relu, bool cluster,
              bool sk) {
  if (cluster)
    return b_row ? run<T, tp::b_layout::row_major, tp::no_epilogue, 2>(dev, M, N, K, tp::no_epilogue{}, {}, sk)
                 : run<T, tp::b_layout::col_major, tp::no_epilogue, 2>(dev, M, N, K, tp::no_epilogue{}, {}, sk);
  if (!bias_relu)
    return b_row ? run<T, tp::b_layout::row_major>(dev, M, N, K, tp::no_epilogue{}, {}, sk)
                 : run<T, tp::b_layout::col_major>(dev, M, N, K, tp::no_epilogue{}, {}, sk);
  const auto hbias = example::random_values<T>(N);
  auto bias = tp::tensor<T, 1>::from_host(dev, {N}, hbias);
  const tp::bias_relu_epilogue<T> epi{bias.data(), N};
  return b_row ? run<T, tp::b_layout::row_major>(dev, M, N, K, epi, hbias, sk)
               : run<T, tp::b_layout::col_major>(dev, M, N, K, epi, hbias, sk);
}

int main(int argc, char** argv) {
  const auto dev = tp::device::open();
  const bool gpu = dev.is_gpu();
  const long long M = example::flag(argc, argv, "--m", gpu ? 4096 : 264);
  const long long N = example::flag(argc, argv, "--n", gpu ? 4096 : 520);
  const long long K = example::flag(argc, argv, "--k", gpu ? 4096 : 200);
  const bool f16 = example::flag_str(argc, argv, "--dtype", "bf16") == "f16";
  const bool b_row = example::flag_str(argc, argv, "--b", "row") == "row";
  const bool bias_relu = example::flag(argc, argv, "--bias-relu", 0) != 0;
  const bool cluster = example::flag(argc, argv, "--cluster", 1) == 2;
  const bool stream_k = example::flag(argc, argv, "--stream-k", 1) != 0;
  try {
    return f16 ? run_dtype<tp::f16>(dev, M, N, K, b_row, bias_relu, cluster, stream_k)
               : run_dtype<tp::bf16>(dev, M, N, K, b_row, bias_relu, cluster, stream_k);
  } catch (const tp::error& e) {
    std::printf("%s\n", e.what());
    return 2;
  }
}
