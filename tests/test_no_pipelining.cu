// no_pipelining: with it on, every copy of a pipeline (both pipelines) is synchronous (each fetch waited for
// right after it is issued, each store group right after it is committed) and the results
// are bit for bit those of the pipelined run. In the interpreter it is a launch option
// (options::no_pipelining); on the GPU the macro TILEPIPE_NO_PIPELINING, with which the
// gpu_ build of this test is compiled (tests/CMakeLists.txt), as is interp_test_no_pipelining_macro.
#include "test_util.hpp"

#include "examples/debug_hangs/producer_consumer_kernel.cuh"
#include "examples/elementwise/elementwise_kernel.cuh"
#include "examples/matmul/matmul_kernel.cuh"
#include "examples/matmul_ws/matmul_ws_kernel.cuh"

namespace {

#if defined(TILEPIPE_NO_PIPELINING)
constexpr bool forced = true;  // the macro makes every launch synchronous
#else
constexpr bool forced = false;
#endif

template <class T>
std::vector<T> run_matmul(const tp::device& dev, long long M, long long N, long long K, std::uint64_t seed) {
  using kernel = matmul_kernel<T, 128, 256, 4, 2>;
  auto a = tp::tensor<T, 2>::from_host(dev, {M, K}, test::random_values<T>(M * K, seed));
  auto b = tp::tensor<T, 2>::from_host(dev, {K, N}, test::random_values<T>(K * N, seed + 1));
  const auto kern = kernel::make(M, N, K);
  return tp::kernel(kern, kern.config(), tp::out_type<T>(M, N))(dev, a, b).to_host();
}

/// The warp-specialised matmul (a persistent loop of chained pipelines) on 2 CTAs.
template <class T>
std::vector<T> run_matmul_ws(const tp::device& dev, long long M, long long N, long long K, std::uint64_t seed) {
  using kernel = matmul_ws_kernel<T, T, 128, 256, 3, b_layout::row_major>;
  auto a = tp::tensor<T, 2>::from_host(dev, {M, K}, test::random_values<T>(M * K, seed));
  auto b = tp::tensor<T, 2>::from_host(dev, {K, N}, test::random_values<T>(K * N, seed + 1));
  const auto kern = kernel::make(M, N, K);
  return tp::kernel(kern, kern.config(dev.is_gpu() ? dev.multiprocessors() : 2), tp::out_type<T>(M, N))(dev, a, b).to_host();
}

std::vector<tp::bf16> run_elementwise(const tp::device& dev, long long rows, long long cols, std::uint64_t seed) {
  using kernel = axpb_kernel<tp::bf16, 32, 256, 4, 2>;
  auto x = tp::tensor<tp::bf16, 2>::from_host(dev, {rows, cols}, test::random_values<tp::bf16>(rows * cols, seed));
  const auto kern = kernel::make(rows, cols, 1.5f, -0.25f, 3);
  return tp::kernel(kern, kern.config(), tp::out_type<tp::bf16>(rows, cols))(dev, x).to_host();
}

template <class T>
bool bitwise_equal(const std::vector<T>& x, const std::vector<T>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

tp::device interpreter(bool no_pipelining, std::vector<tp::interpret::event>* log = nullptr) {
  auto d = tp::device::open(tp::backend::interpret);
  d.interpreter.no_pipelining = no_pipelining;
  d.interpreter.events = log;
  return d;
}

/// Whether every TMA load in the log is waited for by its issuer before it issues anything
/// but further boxes of the same block, and every store group is waited for right after
/// its commit.
bool every_copy_synchronous(const std::vector<tp::interpret::event>& log) {
  using ev = tp::interpret::event;
  for (std::size_t i = 0; i < log.size(); ++i) {
    const ev& e = log[i];
    if (e.kind == ev::tma_load) {
      std::size_t j = i + 1;
      while (j < log.size() && log[j].kind == ev::tma_load && log[j].barrier == e.barrier && log[j].cta == e.cta) ++j;
      if (j == log.size() || log[j].kind != ev::barrier_wait || log[j].barrier != e.barrier || log[j].wg != e.wg)
        return false;
    }
    if (e.kind == ev::bulk_commit) {
      if (i + 1 == log.size() || log[i + 1].kind != ev::bulk_wait || log[i + 1].wg != e.wg || log[i + 1].parity != 0)
        return false;
    }
  }
  return true;
}

TEST(NoPipelining, InterpreterResultsAreBitwiseIdentical) {
  if (test::on_gpu()) GTEST_SKIP() << "interpreter launch option";
  const std::uint64_t seed = test::fresh_seed();
  for (const bool sync : {false, true}) {
    std::vector<tp::interpret::event> log;
    const auto dev = interpreter(sync, &log);
    EXPECT_TRUE(bitwise_equal(run_matmul<tp::bf16>(interpreter(false), 256, 256, 320, seed),
                              run_matmul<tp::bf16>(dev, 256, 256, 320, seed)));
    EXPECT_TRUE(bitwise_equal(run_elementwise(interpreter(false), 300, 600, seed), run_elementwise(dev, 300, 600, seed)));
    EXPECT_TRUE(bitwise_equal(run_matmul_ws<tp::bf16>(interpreter(false), 256, 512, 320, seed),
                              run_matmul_ws<tp::bf16>(dev, 256, 512, 320, seed)));
    // The option really changes the schedule: synchronous copies with it, overlapped ones without.
    EXPECT_EQ(every_copy_synchronous(log), sync || forced) << (sync ? "no_pipelining" : "pipelined");
  }
}

TEST(NoPipelining, HandWrittenStoresAreWaitedForAtOnce) {
  if (test::on_gpu()) GTEST_SKIP() << "interpreter launch option";
  std::vector<tp::interpret::event> log;
  const auto dev = interpreter(true, &log);
  const int blocks = 4;
  auto x = tp::tensor<float, 2>::from_host(dev, {32 * blocks, 64}, test::random_values<float>(32 * blocks * 64));
  const producer_consumer_kernel<> k{blocks};
  tp::kernel(k, k.config(), tp::out_type<float>(32 * blocks, 64))(dev, x);
  int commits = 0;
  for (std::size_t i = 0; i + 1 < log.size(); ++i)
    if (log[i].kind == tp::interpret::event::bulk_commit) {
      ++commits;
      EXPECT_EQ(log[i + 1].kind, tp::interpret::event::bulk_wait);
    }
  EXPECT_EQ(commits, blocks);
}

// On the GPU (built with TILEPIPE_NO_PIPELINING) and in the macro build of the
// interpreter: the synchronous pipeline computes the right results.
TEST(NoPipelining, ResultsMatchTheReference) {
  const std::uint64_t seed = test::fresh_seed();
  const long long M = 256, N = 256, K = 320;
  const auto ha = test::random_values<tp::bf16>(M * K, seed), hb = test::random_values<tp::bf16>(K * N, seed + 1);
  const auto c = run_matmul<tp::bf16>(test::dev(), M, N, K, seed);
  std::vector<double> ref(M * N, 0.0);
  for (long long i = 0; i < M; ++i)
    for (long long kk = 0; kk < K; ++kk)
      for (long long j = 0; j < N; ++j) ref[i * N + j] += double(tp::to_float(ha[i * K + kk])) * tp::to_float(hb[kk * N + j]);
  EXPECT_LT(test::rel_error(c, ref), 1e-2);
  EXPECT_LT(test::rel_error(run_matmul_ws<tp::bf16>(test::dev(), M, N, K, seed), ref), 1e-2);

  const auto hx = test::random_values<tp::bf16>(300 * 600, seed);
  const auto y = run_elementwise(test::dev(), 300, 600, seed);
  std::vector<double> yref(hx.size());
  for (std::size_t i = 0; i < hx.size(); ++i) yref[i] = 1.5 * tp::to_float(hx[i]) - 0.25;
  EXPECT_LT(test::rel_error(y, yref), 1e-2);
}

}  // namespace
