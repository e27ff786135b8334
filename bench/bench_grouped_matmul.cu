// tilepipe's ragged grouped matmul (kernels/grouped_matmul.cuh) on the shapes of
// bench/grouped_matmul_shapes.txt, timed like its PyTorch peers
// (bench/grouped_matmul_peers_torch.py): batches of 10 calls between CUDA events, 3 warm-up
// batches, the median of 15. Every shape's inputs exceed 200 MB (L2 holds 50), so one set
// is used. The inputs repeat a pool of random values (filling gigabytes of weights from a
// host generator would take minutes); 256 sampled outputs are checked against float64.
// FLOPs: 2 M N K, M the routed rows. dtype e4m3 runs the fp8 grouped matmul
// (kernels/scaled_grouped_matmul.cuh; bench/grouped_matmul_fp8_shapes.txt) twice: with block
// scales (impl tilepipe_block) and with row-wise scales (tilepipe_row_wise, the recipe of the
// peer torch._scaled_grouped_mm). TP_BENCH_VARIANTS=1 adds variants of the kernels (stages
// and epilogue chunks: fp8_variants and bf16_variants below).
//   bench_grouped_matmul --shapes bench/grouped_matmul_shapes.txt --json out.json
#include <tilepipe/kernels/grouped_matmul.cuh>
#include <tilepipe/kernels/scaled_grouped_matmul.cuh>

#include "../examples/common/grouped_routing.hpp"
#include "bench_util.hpp"

#include <cstdlib>
#include <cstring>
#include <functional>

namespace {

struct config {
  int groups;
  long long rows, k, n;
  std::string routing, layout, dtype;
};

std::vector<config> read_shapes(const char* path) {
  return bench::read_rows<config>(path, "bench_grouped_matmul", [](std::istream& f, config& c) {
    return static_cast<bool>(f >> c.groups >> c.rows >> c.k >> c.n >> c.routing >> c.layout >> c.dtype);
  });
}

constexpr long long pool_size = 1 << 22;  // random values the inputs repeat

template <class T>
std::vector<T> random_pool(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<T> v(pool_size);
  for (auto& x : v) x = tp::from_float<T>(d(rng));
  return v;
}

/// A device tensor of `elements` values pool[i % pool_size].
template <class T>
tp::tensor<T, 1> pooled_tensor(const tp::device& dev, long long elements, const std::vector<T>& pool) {
  tp::tensor<T, 1> t(dev, {elements});
  for (long long at = 0; at < elements; at += pool_size) {
    const long long n = std::min<long long>(pool_size, elements - at);
    TP_CUDA_CHECK(cudaMemcpy(t.data() + at, pool.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  }
  return t;
}

/// Times call (batches of 10 between CUDA events, the median of 15) and prints the row.
/// The largest error of 256 random elements of the output (host copy ho, [M, N]) against
/// sums over k of product(r, j, g, k) (row r in group g), relative to the sum of |products|.
template <class T, class Ends, class Product>
double spot_check(const std::vector<T>& ho, long long M, long long N, long long K, const Ends& ends, Product&& product) {
  double worst = 0;
  std::mt19937_64 rng(11);
  for (int s = 0; s < 256; ++s) {
    const long long r = static_cast<long long>(rng() % M), j = static_cast<long long>(rng() % N);
    const long long g = std::upper_bound(ends.begin(), ends.end(), r) - ends.begin();
    double ref = 0, mag = 0;
    for (long long k = 0; k < K; ++k) {
      const double p = product(r, j, g, k);
      ref += p, mag += std::abs(p);
    }
    worst = std::max(worst, std::abs(tp::to_float(ho[r * N + j]) - ref) / std::max(mag, 1e-6));
  }
  return worst;
}

template <class Call>
std::string time_and_report(const char* impl, const config& c, long long M, long long N, long long K, Call&& call,
                            double worst) {
  const bool ok = worst <= 1e-2;  // relative to the sum of |products|: bf16 rounding of the output

  bench::batch_timer timer;
  for (int i = 0; i < 3; ++i) timer.per_call(call, 10 * i, 10, 1);
  std::vector<float> ms;
  for (int i = 0; i < 15; ++i) ms.push_back(timer.per_call(call, 10 * i, 10, 1));
  const double med = bench::median(ms), tflops = 2.0 * M * N * K / (med * 1e-3) / 1e12;
  std::printf("%s G=%d rows=%lld K=%lld N=%lld %s rhs %s %s: %.3f ms  %.1f TFLOP/s  check %s (%.2e)\n", impl, c.groups,
              c.rows, K, N, c.routing.c_str(), c.layout.c_str(), c.dtype.c_str(), med, tflops, ok ? "ok" : "MISMATCH",
              worst);
  std::fflush(stdout);
  char buf[200];
  std::snprintf(buf, sizeof buf, "\"median_ms\": %.5f, \"tflops\": %.2f, \"check\": \"%s\", \"check_err\": %.3e", med, tflops,
                ok ? "ok" : "mismatch", worst);
  return buf;
}

/// Variants of the 16-bit kernel (TP_BENCH_VARIANTS): Stages stages, epilogue chunks of 64 x EN
/// in Buffers buffers a warpgroup.
template <int Stages, int EN, int Buffers>
struct bf16_variant {
  template <class T, tp::rhs_layout L>
  using kernel = tp::grouped_matmul_kernel<T, L, 128, 256, Stages, 64, T, tp::no_epilogue, 56, EN, Buffers>;
};
template <class F>
void bf16_variants(F&& f) {
  f("tilepipe_s4_e32x2", bf16_variant<4, 32, 2>{});
  f("tilepipe_s3_e64x4", bf16_variant<3, 64, 4>{});
  f("tilepipe_s4_e64x1", bf16_variant<4, 64, 1>{});
}

/// tp::grouped_matmul, or (Variant: a bf16_variant) a variant of its kernel.
template <class T, class Variant = void>
std::string run(const tp::device& dev, const config& c, const char* name = "tilepipe") {
  const auto sizes = example::group_sizes(c.groups, c.rows, c.routing);
  const auto ends = example::group_ends(sizes);
  const long long M = ends.back(), K = c.k, N = c.n, G = c.groups;
  const bool kn = c.layout == "kn";
  const auto layout = kn ? tp::rhs_layout::kn : tp::rhs_layout::nk;
  const auto pool_a = random_pool<T>(1), pool_b = random_pool<T>(2);
  auto a = pooled_tensor<T>(dev, M * K, pool_a), b = pooled_tensor<T>(dev, G * K * N, pool_b);
  auto out = tp::tensor<T, 1>(dev, {M * N});
  auto offs = tp::tensor<int, 1>::from_host(dev, {G}, ends);
  const tp::tensor_view<T, 2> lhs{a.data(), {M, K}, {K, 1}, true}, o{out.data(), {M, N}, {N, 1}, true};
  const tp::tensor_view<T, 3> rhs{b.data(), {G, kn ? K : N, kn ? N : K}, {K * N, kn ? N : K, 1}, true};
  auto call = [&](int) {
    if constexpr (std::is_void_v<Variant>) {
      tp::grouped_matmul<T>(dev, lhs, rhs, layout, offs.data(), o);
    } else {
      auto variant = [&](auto l) {
        typename Variant::template kernel<T, decltype(l)::value> kern;
        if (tp::grouped_matmul_detail::prepare(kern, name, lhs, rhs, layout, offs.data(), static_cast<int>(G), 0, o))
          tp::grouped_matmul_detail::launch(dev, kern, lhs, rhs, o, nullptr);
      };
      if (kn) variant(std::integral_constant<tp::rhs_layout, tp::rhs_layout::kn>{});
      else variant(std::integral_constant<tp::rhs_layout, tp::rhs_layout::nk>{});
    }
  };

  call(0);
  const double worst = spot_check(out.to_host(), M, N, K, ends, [&](long long r, long long j, long long g, long long k) {
    return tp::to_float(pool_a[(r * K + k) % pool_size]) *
           double(tp::to_float(pool_b[(g * K * N + (kn ? k * N + j : j * K + k)) % pool_size]));
  });
  return time_and_report(name, c, M, N, K, call, worst);
}

/// Variants of the row-wise kernel (TP_BENCH_VARIANTS): name, and the kernel as a type tag.
template <class K>
struct kernel_tag {
  using type = K;
};
template <int BN, int Stages, int EN, int Buffers>
using row_wise_variant = tp::grouped_matmul_kernel<tp::fp8_e4m3, tp::rhs_layout::nk, 128, BN, Stages, 128, tp::bf16,
                                                   tp::group_row_scales, 40, EN, Buffers>;
template <class F>
void fp8_variants(F&& f) {
  f("tilepipe_row_wise_s4_e32x2", kernel_tag<row_wise_variant<256, 4, 32, 2>>{});
  f("tilepipe_row_wise_s3_e64x4", kernel_tag<row_wise_variant<256, 3, 64, 4>>{});
  f("tilepipe_row_wise_s4_e64x1", kernel_tag<row_wise_variant<256, 4, 64, 1>>{});
}

/// The fp8 grouped matmul (dtype e4m3, rhs nk): tp::scaled_grouped_matmul with block scales
/// (A's M-major, the layout it loads with TMA) or row-wise ones, scales in [0.5, 2]; or a
/// variant of the row-wise kernel (Variant: kernel_tag<kernel>).
template <class Variant = void>
std::string run_fp8(const tp::device& dev, const config& c, bool row_wise, const char* name = nullptr) {
  using T = tp::fp8_e4m3;
  if (c.layout != "nk") tp::detail::throw_formatted("bench_grouped_matmul: e4m3 needs rhs nk ([G, N, K], K-major)");
  const auto sizes = example::group_sizes(c.groups, c.rows, c.routing);
  const auto ends = example::group_ends(sizes);
  const long long M = ends.back(), K = c.k, N = c.n, G = c.groups;
  // Row-wise: scale_a [M] and scale_b [G, N], seen here as one k-block and N column blocks.
  const long long kb = row_wise ? 1 : (K + 127) / 128, nb = row_wise ? N : (N + 127) / 128;
  const long long ld = (M + 3) / 4 * 4;
  const auto pool_a = random_pool<T>(1), pool_b = random_pool<T>(2);
  auto a = pooled_tensor<T>(dev, M * K, pool_a), b = pooled_tensor<T>(dev, G * N * K, pool_b);
  std::mt19937_64 srng(3);
  std::uniform_real_distribution<float> unit(0.5f, 2.0f);
  std::vector<float> hsa(static_cast<std::size_t>(kb * ld)), hsb(static_cast<std::size_t>(G * nb * kb));
  for (auto& x : hsa) x = unit(srng);
  for (auto& x : hsb) x = unit(srng);
  auto sa_storage = tp::tensor<float, 2>::from_host(dev, {kb, ld}, hsa);
  auto sb = tp::tensor<float, 3>::from_host(dev, {G, nb, kb}, hsb);
  auto out = tp::tensor<tp::bf16, 1>(dev, {M * N});
  auto offs = tp::tensor<int, 1>::from_host(dev, {G}, ends);
  const tp::tensor_view<T, 2> lhs{a.data(), {M, K}, {K, 1}, true};
  const tp::tensor_view<T, 3> rhs{b.data(), {G, N, K}, {N * K, K, 1}, true};
  const tp::tensor_view<tp::bf16, 2> o{out.data(), {M, N}, {N, 1}, true};
  const auto sa = tp::m_major_scales(sa_storage, M);
  const tp::tensor_view<float, 1> sa_rows{sa_storage.data(), {M}, {1}, true};
  const tp::tensor_view<float, 2> sb_cols{sb.data(), {G, N}, {N, 1}, true};
  auto call = [&](int) {
    if constexpr (!std::is_void_v<Variant>) {
      const tp::scale_matrix sa_matrix{sa_rows.data, M, 1, 1, 0};
      tp::scaled_grouped_matmul_detail::run_row_wise<T, typename Variant::type>(
          name, dev, lhs, rhs, sa_matrix, sb_cols, offs.data(), static_cast<int>(G), 0, o, {});
    } else if (row_wise) {
      tp::scaled_grouped_matmul<T>(dev, lhs, rhs, sa_rows, sb_cols, offs.data(), o);
    } else {
      tp::scaled_grouped_matmul<T>(dev, lhs, rhs, sa, sb, offs.data(), o);
    }
  };

  call(0);
  const double worst = spot_check(out.to_host(), M, N, K, ends, [&](long long r, long long j, long long g, long long k) {
    const long long kbi = row_wise ? 0 : k / 128, nbi = row_wise ? j : j / 128;
    const double x = tp::to_float(pool_a[(r * K + k) % pool_size]) * hsa[kbi * ld + r];
    const double w = tp::to_float(pool_b[(g * N * K + j * K + k) % pool_size]) * hsb[(g * nb + nbi) * kb + kbi];
    return x * w;
  });
  return time_and_report(name ? name : row_wise ? "tilepipe_row_wise" : "tilepipe_block", c, M, N, K, call, worst);
}

}  // namespace

int main(int argc, char** argv) {
  const char *shapes = "bench/grouped_matmul_shapes.txt", *json = nullptr;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--shapes")) shapes = argv[i + 1];
    else if (!std::strcmp(argv[i], "--json")) json = argv[i + 1];
  }
  const auto dev = tp::device::open();
  if (!dev.is_gpu()) {
    std::printf("bench_grouped_matmul: no GPU\n");
    return 1;
  }
  std::vector<std::string> rows;
  int status = 0;
  const bool variants = std::getenv("TP_BENCH_VARIANTS") != nullptr;
  for (const config& c : read_shapes(shapes)) {
    // The runs of the row: (impl, run).
    std::vector<std::pair<const char*, std::function<std::string()>>> runs;
    if (c.dtype == "e4m3") {
      runs.emplace_back("tilepipe_block", [&] { return run_fp8(dev, c, false); });
      runs.emplace_back("tilepipe_row_wise", [&] { return run_fp8(dev, c, true); });
      if (variants)
        fp8_variants([&](const char* name, auto tag) {
          runs.emplace_back(name, [&, name] { return run_fp8<decltype(tag)>(dev, c, true, name); });
        });
    } else {
      runs.emplace_back("tilepipe", [&] { return c.dtype == "f16" ? run<tp::f16>(dev, c) : run<tp::bf16>(dev, c); });
      if (variants)
        bf16_variants([&](const char* name, auto v) {
          using V = decltype(v);
          runs.emplace_back(name, [&, name] {
            return c.dtype == "f16" ? run<tp::f16, V>(dev, c, name) : run<tp::bf16, V>(dev, c, name);
          });
        });
    }
    for (const auto& [impl, run_it] : runs) {
      std::string r;
      try {
        r = run_it();
        if (r.find("mismatch") != std::string::npos) status = 1;
      } catch (const tp::error& e) {
        std::printf("%s %s: %s\n", impl, c.dtype.c_str(), e.what());
        r = "\"error\": \"" + std::string(e.what()).substr(0, 200) + "\"";
        status = 1;
      }
      char head[256];
      std::snprintf(head, sizeof head,
                    "{\"impl\": \"%s\", \"groups\": %d, \"rows\": %lld, \"k\": %lld, \"n\": %lld, \"routing\": \"%s\", "
                    "\"layout\": \"%s\", \"dtype\": \"%s\", ",
                    impl, c.groups, c.rows, c.k, c.n, c.routing.c_str(), c.layout.c_str(), c.dtype.c_str());
      rows.push_back(head + r + "}");
    }
  }
  if (json) bench::write_results(json, dev, rows);
  return status;
}
