// Flash attention forward: O = softmax(Q K^T / sqrt(D) [+ causal mask]) V on [B, S, H, D]
// tensors, with grouped-query heads. Runs on the GPU when there is one, else in the CPU
// interpreter; checks the first query head against a float64 reference and prints what it
// ran on and how fast. With SQ <= 16 the decode kernel runs, its KV split in --splits
// (0: as the kernel chooses) with a workspace.
//   attention [--b B] [--sq SQ] [--sk SK] [--hq HQ] [--hkv HKV] [--d 64|128|256] [--causal 0|1] [--dtype bf16|f16]
//             [--splits N]
#include <tilepipe/kernels/attention.cuh>

#include "../common/attention_reference.hpp"
#include "../common/example_util.hpp"

template <class T>
int run(const tp::device& dev, long long B, long long SQ, long long SK, long long HQ, long long HKV, long long D, bool causal,
        int splits) {
  const auto hq = example::random_values<T>(B * SQ * HQ * D), hk = example::random_values<T>(B * SK * HKV * D),
             hv = example::random_values<T>(B * SK * HKV * D);
  auto q = tp::tensor<T, 4>::from_host(dev, {B, SQ, HQ, D}, hq);
  auto k = tp::tensor<T, 4>::from_host(dev, {B, SK, HKV, D}, hk);
  auto v = tp::tensor<T, 4>::from_host(dev, {B, SK, HKV, D}, hv);
  auto o = tp::tensor<T, 4>(dev, {B, SQ, HQ, D});
  auto lse = tp::tensor<float, 3>(dev, {B, HQ, SQ});
  const long long row_tiles = B * HKV * ((SQ * (HQ / HKV) + 63) / 64);  // the decode kernel's tiles
  const long long slots = std::max<long long>(tp::attention_partial_slots(dev), row_tiles * splits);
  const tp::partials_buffer partials(dev, static_cast<int>(slots), tp::attention_partial_floats(D));
  const tp::attention_options opt{
      .causal = causal, .lse = lse.data(), .num_splits = splits, .partials = partials.ref()};
  tp::attention_forward<T>(dev, q, k, v, o, opt);

  // The first query head of every sequence against float64.
  std::vector<int> cu_q{0}, cu_k{0};
  for (long long b = 0; b < B; ++b) cu_q.push_back(cu_q.back() + SQ), cu_k.push_back(cu_k.back() + SK);
  std::vector<double> ref_o, ref_lse;
  reference::attention(hq, hk, hv, HQ, HKV, D, cu_q, cu_k, 1.0 / std::sqrt(double(D)), {.causal = causal}, ref_o, ref_lse, 1);
  const auto ho = o.to_host();
  example::rel_error err;
  for (long long r = 0; r < B * SQ; ++r)
    for (long long c = 0; c < D; ++c) err.add(tp::to_float(ho[r * HQ * D + c]), ref_o[r * HQ * D + c]);

  const auto t = tp::time_runs(dev, [&] { tp::attention_forward<T>(dev, q, k, v, o, opt); }, dev.is_gpu() ? 3 : 0,
                               dev.is_gpu() ? 10 : 1);
  const double flops = 4.0 * B * HQ * SQ * SK * D / (causal ? 2 : 1);
  std::printf("attention %s, B %lld, Sq %lld, Sk %lld, heads %lld / %lld kv, head dim %lld%s on %s: %.3f ms, %.1f TFLOP/s\n",
              tp::dtype_traits<T>::name, B, SQ, SK, HQ, HKV, D, causal ? ", causal" : "", dev.name().c_str(), t.median_ms,
              flops / (t.median_ms * 1e-3) / 1e12);
  return example::report("O (first head)", err.value(), 1e-2);
}

int main(int argc, char** argv) {
  const auto dev = tp::device::open();
  const bool gpu = dev.is_gpu();
  const long long B = example::flag(argc, argv, "--b", gpu ? 8 : 2), SQ = example::flag(argc, argv, "--sq", gpu ? 2048 : 200);
  const long long SK = example::flag(argc, argv, "--sk", SQ), HQ = example::flag(argc, argv, "--hq", gpu ? 16 : 2);
  const long long HKV = example::flag(argc, argv, "--hkv", HQ), D = example::flag(argc, argv, "--d", gpu ? 128 : 64);
  const bool causal = example::flag(argc, argv, "--causal", 1) != 0;
  const int splits = static_cast<int>(example::flag(argc, argv, "--splits", 0));
  try {
    return example::flag_str(argc, argv, "--dtype", "bf16") == "f16"
               ? run<tp::f16>(dev, B, SQ, SK, HQ, HKV, D, causal, splits)
               : run<tp::bf16>(dev, B, SQ, SK, HQ, HKV, D, causal, splits);
  } catch (const tp::error& e) {
    std::printf("%s\n", e.what());
    return 2;
  }
}
