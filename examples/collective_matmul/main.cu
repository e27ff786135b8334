// The two collective matmuls of a tensor-parallel MLP, with the communication inside the
// kernel (kernels/collective_matmul.cuh):
//   all_gather_matmul:      c[M, N] = all_gather(a)[M, K] . b[K, N]    (each device holds a row shard of a)
//   matmul_reduce_scatter:  c[Md, N] = reduce_scatter(a[M, Kd] . b[Kd, N])  (each device holds a slice of K)
// With two or more GPUs it runs one process per GPU over NCCL (tp::run_ranks); otherwise
// --devices D simulated devices in the CPU interpreter. Shards are uneven (device r has
// --m + 136 r rows). Each device checks its result against a float64 reference on sampled
// entries (inputs are drawn from per-device seeds, so every device can rebuild the others')
// and prints what ran.
//   collective_matmul [--devices D] [--m M] [--k K] [--n N]
#include <tilepipe/kernels/collective_matmul.cuh>
#if TP_HAS_CUDA_COMPILER
#include <tilepipe/host/nccl.cuh>
#endif

#include "../common/example_util.hpp"

using tp::bf16;

namespace {

struct problem {
  std::vector<long long> shards;
  long long K, N, M = 0;
  std::uint64_t seed;  // this run's inputs: device r's tensors use seed + r and seed + 100 + r
};

/// Checks c against a float64 reference on 2048 sampled entries; ref(i, j) computes one.
template <class Ref>
double sampled_error(const std::vector<bf16>& c, long long rows, long long N, Ref&& ref) {
  example::rel_error err;
  std::mt19937_64 rng(5);
  for (int s = 0; s < 2048; ++s) {
    const long long i = static_cast<long long>(rng() % rows), j = static_cast<long long>(rng() % N);
    err.add(tp::to_float(c[i * N + j]), ref(i, j));
  }
  return err.value();
}

double dot(const std::vector<bf16>& a, long long i, const std::vector<bf16>& b, long long j, long long K, long long N) {
  double s = 0;
  for (long long k = 0; k < K; ++k) s += double(tp::to_float(a[i * K + k])) * tp::to_float(b[k * N + j]);
  return s;
}

/// Both products on every device of the group this process drives; 0 when all pass.
int run(const tp::device_group& group, const problem& p) {
  const int D = group.size();
  int failures = 0;
  auto a_of = [&](int r, long long rows, long long K) { return example::random_values<bf16>(rows * K, p.seed + r); };
  auto b_of = [&](int r, long long K) { return example::random_values<bf16>(K * p.N, p.seed + 100 + r); };

  {  // all-gather + matmul: device r holds shards[r] rows of a and its own b (a column slice of the layer)
    tp::all_gather_matmul<bf16> ag(group, p.shards, p.K, p.N);
    std::vector<tp::tensor<bf16, 2>> a, b, c;
    for (const tp::device& dev : group.local()) {
      const int r = dev.index();
      a.push_back(tp::tensor<bf16, 2>::from_host(dev, {p.shards[r], p.K}, a_of(r, p.shards[r], p.K)));
      b.push_back(tp::tensor<bf16, 2>::from_host(dev, {p.K, p.N}, b_of(r, p.K)));
      c.emplace_back(dev, std::array<long long, 2>{p.M, p.N});
      c.back().poison();
    }
    for (std::size_t i = 0; i < group.local().size(); ++i) ag(group.local()[i], a[i], b[i], c[i]);
    std::vector<bf16> a_all;
    for (int r = 0; r < D; ++r) {
      const auto ar = a_of(r, p.shards[r], p.K);
      a_all.insert(a_all.end(), ar.begin(), ar.end());
    }
    for (std::size_t i = 0; i < group.local().size(); ++i) {
      const int r = group.local()[i].index();
      const auto br = b_of(r, p.K);
      const double err = sampled_error(c[i].to_host(), p.M, p.N, [&](long long i0, long long j) { return dot(a_all, i0, br, j, p.K, p.N); });
      std::printf("all_gather_matmul on %s, device %d of %d: c[%lld, %lld] = all_gather(a)[%lld, %lld] . b, %d CTAs%s\n",
                  group.local()[i].name().c_str(), r, D, p.M, p.N, p.M, p.K, ag.ctas(),
                  ag.splits_last_wave(r) ? ", last wave split by stream-K" : "");
      failures += example::report("all_gather_matmul", err, 1e-2);
    }
  }
  {  // matmul + reduce-scatter: device r holds a[M, K] and b[K, N] of its slice of K; keeps shards[r] rows
    tp::matmul_reduce_scatter<bf16> rs(group, p.shards, p.K, p.N);
    std::vector<tp::tensor<bf16, 2>> a, b, c;
    for (const tp::device& dev : group.local()) {
      const int r = dev.index();
      a.push_back(tp::tensor<bf16, 2>::from_host(dev, {p.M, p.K}, a_of(r, p.M, p.K)));
      b.push_back(tp::tensor<bf16, 2>::from_host(dev, {p.K, p.N}, b_of(r, p.K)));
      c.emplace_back(dev, std::array<long long, 2>{p.shards[r], p.N});
      c.back().poison();
    }
    for (std::size_t i = 0; i < group.local().size(); ++i) rs(group.local()[i], a[i], b[i], c[i]);
    std::vector<std::vector<bf16>> as, bs;
    for (int r = 0; r < D; ++r) as.push_back(a_of(r, p.M, p.K)), bs.push_back(b_of(r, p.K));
    for (std::size_t i = 0; i < group.local().size(); ++i) {
      const int r = group.local()[i].index();
      long long row0 = 0;
      for (int q = 0; q < r; ++q) row0 += p.shards[q];
      const double err = sampled_error(c[i].to_host(), p.shards[r], p.N, [&](long long i0, long long j) {
        double s = 0;
        for (int q = 0; q < D; ++q) s += dot(as[q], row0 + i0, bs[q], j, p.K, p.N);
        return s;
      });
      std::printf("matmul_reduce_scatter on %s, device %d of %d: c[%lld, %lld] = rows %lld.. of the sum over devices of "
                  "a[%lld, %lld] . b, %d CTAs\n",
                  group.local()[i].name().c_str(), r, D, p.shards[r], p.N, row0, p.M, p.K, rs.ctas());
      failures += example::report("matmul_reduce_scatter", err, 1e-2);
    }
  }
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
#if TP_HAS_CUDA_COMPILER
  const int gpus = tp::gpu_count();
#else
  const int gpus = 0;
#endif
  const bool on_gpus = gpus >= 2;
  const int D = on_gpus ? gpus : static_cast<int>(example::flag(argc, argv, "--devices", 3));
  problem p{{}, example::flag(argc, argv, "--k", on_gpus ? 2048 : 200), example::flag(argc, argv, "--n", on_gpus ? 2056 : 320),
            0, std::random_device{}()};
  for (int r = 0; r < D; ++r) p.shards.push_back(example::flag(argc, argv, "--m", on_gpus ? 1000 : 130) + 136 * r);
  for (long long s : p.shards) p.M += s;
  try {
    if (!on_gpus) {
      std::printf("%d GPU(s): running on %d simulated devices in the CPU interpreter\n", gpus, D);
      return run(tp::device_group::simulated(D), p) ? 1 : 0;
    }
#if TP_HAS_CUDA_COMPILER
    tp::run_ranks(D, [&](tp::nccl_group& g) {
      if (run(g.devices(), p)) throw tp::error("tilepipe: a check failed");
    });
#endif
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
