// wgmma against a float64 host product: both 16-bit types, several N, every swizzle,
// K-major and MN-major A and B, A from registers, and overwrite (accumulate = false).
#include "test_util.hpp"

namespace {

enum class a_src { smem_k_major, smem_mn_major, registers };

template <class T, int M, int N, int K, int SA, int SB, a_src A, bool BKMajor, bool Accumulate = true>
struct wgmma_kernel {
  // A is stored (M, K), or (K, M) when MN-major; B is stored (K, N), or (N, K) when K-major.
  using a_tile = tp::tile<std::conditional_t<A == a_src::smem_mn_major, tp::block<K, M>, tp::block<M, K>>, tp::swizzle<SA>>;
  using b_tile = tp::tile<std::conditional_t<BKMajor, tp::block<N, K>, tp::block<K, N>>, tp::swizzle<SB>>;
  using c_tile = tp::tile<tp::block<M, N>>;

  TP_HD void operator()(tp::kernel_context& k, tp::gmem<T, 2, a_tile> a, tp::gmem<T, 2, b_tile> b,
                        tp::gmem<float, 2, c_tile> c, tp::smem<T, a_tile> as, tp::smem<T, b_tile> bs,
                        tp::smem<float, c_tile> cs, tp::barriers<2> bars) const {
    tp::copy_gmem_to_smem(a, tp::idx(0, 0), as, bars[0]);
    tp::copy_gmem_to_smem(b, tp::idx(0, 0), bs, bars[1]);
    tp::barrier_wait(bars[0], 0);
    tp::barrier_wait(bars[1], 0);

    auto b_kn = [&] {
      if constexpr (BKMajor) return tp::transpose(bs);
      else return bs;
    }();
    // Accumulate onto 0.5, or overwrite a garbage accumulator.
    tp::accumulator<M, N> acc = tp::full<float, M, N>(Accumulate ? 0.5f : 1e30f);
    if constexpr (A == a_src::registers) {
      auto a_regs = tp::to_operand<T>(tp::load<T>(as));  // read by the tensor cores until the wait
      tp::wgmma(acc, a_regs, b_kn, Accumulate);
      tp::wgmma_wait<0>(acc);
    } else {
      if constexpr (A == a_src::smem_mn_major) tp::wgmma(acc, tp::transpose(as), b_kn, Accumulate);
      else tp::wgmma(acc, as, b_kn, Accumulate);
      tp::wgmma_wait<0>(acc);
    }

    tp::store(cs, acc);
    tp::commit_smem();
    tp::copy_smem_to_gmem(cs, c, tp::idx(0, 0));
    tp::wait_smem_to_gmem<0>();
    (void)k;
  }
};

template <class T, int M, int N, int K, int SA, int SB, a_src A, bool BKMajor, bool Accumulate = true>
void check() {
  const auto ha = test::random_values<T>(M * K), hb = test::random_values<T>(K * N);
  constexpr bool a_mn = A == a_src::smem_mn_major;
  auto a = tp::tensor<T, 2>::from_host(test::dev(), a_mn ? std::array<long long, 2>{K, M} : std::array<long long, 2>{M, K}, ha);
  auto b = tp::tensor<T, 2>::from_host(test::dev(), BKMajor ? std::array<long long, 2>{N, K} : std::array<long long, 2>{K, N}, hb);
  auto c = tp::kernel(wgmma_kernel<T, M, N, K, SA, SB, A, BKMajor, Accumulate>{}, {.grid = {1}},
                      tp::out_type<float>(M, N))(test::dev(), a, b);
  const auto hc = c.to_host();
  std::vector<double> ref(M * N);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double s = Accumulate ? 0.5 : 0.0;
      for (int kk = 0; kk < K; ++kk)
        s += double(tp::to_float(ha[a_mn ? kk * M + i : i * K + kk])) * tp::to_float(hb[BKMajor ? j * K + kk : kk * N + j]);
      ref[i * N + j] = s;
    }
  EXPECT_LT(test::rel_error(hc, ref), 1e-5) << "M=" << M << " N=" << N << " K=" << K << " swizzle " << SA << "/" << SB;
}

}  // namespace

TEST(Wgmma, Bf16KMajorAMnMajorB) {
  check<tp::bf16, 64, 64, 64, 128, 128, a_src::smem_k_major, false>();
  check<tp::bf16, 128, 256, 64, 128, 128, a_src::smem_k_major, false>();
  check<tp::bf16, 64, 128, 128, 128, 128, a_src::smem_k_major, false>();  // K spans two panels
}

TEST(Wgmma, F16KMajorB) {
  check<tp::f16, 64, 8, 64, 128, 128, a_src::smem_k_major, true>();
  check<tp::f16, 64, 136, 64, 128, 128, a_src::smem_k_major, true>();
  check<tp::f16, 128, 256, 32, 64, 64, a_src::smem_k_major, true>();
}

TEST(Wgmma, NarrowSwizzles) {
  check<tp::bf16, 64, 32, 32, 64, 64, a_src::smem_k_major, false>();
  check<tp::bf16, 64, 16, 16, 32, 32, a_src::smem_k_major, false>();
  check<tp::bf16, 64, 48, 64, 32, 128, a_src::smem_k_major, true>();
}

TEST(Wgmma, MnMajorA) {
  check<tp::bf16, 64, 64, 64, 128, 128, a_src::smem_mn_major, false>();
  check<tp::f16, 128, 64, 32, 64, 64, a_src::smem_mn_major, true>();
}

TEST(Wgmma, AFromRegisters) {
  check<tp::bf16, 64, 64, 64, 128, 128, a_src::registers, false>();
  check<tp::f16, 128, 96, 32, 64, 64, a_src::registers, true>();
}

TEST(Wgmma, OverwriteInsteadOfAccumulate) { check<tp::bf16, 64, 64, 64, 128, 128, a_src::smem_k_major, false, false>(); }
