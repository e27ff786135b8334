// The interpreter itself: deadlocks are reported (never a hang), forgotten waits and
// unwritten outputs show up, and the copy modes and CTA orders agree.
#include "test_util.hpp"

#include "examples/matmul/matmul_kernel.cuh"

#include <string>

namespace {

using t8x32 = tp::tile<tp::block<8, 32>>;

/// Warpgroup 1 waits for a phase that warpgroup 0 never completes.
struct deadlock_kernel {
  static constexpr int num_threads = 2;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2> x, tp::barriers<1, 1> bar) const {
    (void)x;
    if (k.thread_index() == 1) tp::barrier_wait(bar[0], 0);
  }
};

/// Loads a block and returns without waiting for it.
struct forgotten_wait_kernel {
  TP_HD void operator()(tp::kernel_context&, tp::gmem<float, 2, t8x32> x, tp::smem<float, t8x32> xs,
                        tp::barriers<1> bar) const {
    tp::copy_gmem_to_smem(x, tp::idx(0, 0), xs, bar[0]);
  }
};

/// Stores a block and returns without waiting for the store.
struct unwaited_store_kernel {
  TP_HD void operator()(tp::kernel_context&, tp::gmem<float, 2, t8x32> y, tp::smem<float, t8x32> ys) const {
    tp::map([] { return 1.0f; }, ys);
    tp::commit_smem();
    tp::copy_smem_to_gmem(ys, y, tp::idx(0, 0));
  }
};

/// Writes only the even output blocks: the odd ones keep the poison of out_type.
struct half_writer_kernel {
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, t8x32> y) const {
    auto body = [](auto at, auto ys) {
      if (at[0] % 2 == 0) tp::map([] { return 2.0f; }, ys);
    };
    tp::emit_pipeline(body, tp::grid(4), tp::in_specs(), tp::out_specs(tp::spec<t8x32>([](auto i) { return tp::idx(i, 0); })))(k, y);
  }
};

}  // namespace

TEST(Interpreter, DeadlockIsReportedNotHung) {
  if (test::on_gpu()) GTEST_SKIP() << "interpreter only";
  tp::tensor<float, 2> x(test::dev(), {8, 32});
  const std::string msg = test::error_of([&] { tp::kernel(deadlock_kernel{}, {})(test::dev(), x); });
  EXPECT_NE(msg.find("deadlock"), std::string::npos) << msg;
  EXPECT_NE(msg.find("warpgroup 1 waits on mbarrier"), std::string::npos) << msg;
  EXPECT_NE(msg.find("phase parity 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("arrivals 0/1"), std::string::npos) << msg;
}

TEST(Interpreter, ForgottenWaitAndUnwaitedStoreAreReported) {
  if (test::on_gpu()) GTEST_SKIP() << "interpreter only";
  tp::tensor<float, 2> x(test::dev(), {8, 32});
  const std::string a = test::error_of([&] { tp::kernel(forgotten_wait_kernel{}, {})(test::dev(), x); });
  EXPECT_NE(a.find("never waited for"), std::string::npos) << a;
  const std::string b = test::error_of([&] { tp::kernel(unwaited_store_kernel{}, {})(test::dev(), x); });
  EXPECT_NE(b.find("TMA stores still reading shared memory"), std::string::npos) << b;
}

TEST(Interpreter, UnwrittenOutputsStayPoisoned) {
  // The interpreter poisons every new output slot; on the GPU an unwritten slot is stored
  // with whatever it held before (as on TPUs), so this check is the interpreter's job.
  if (test::on_gpu()) GTEST_SKIP() << "interpreter only";
  auto y = tp::kernel(half_writer_kernel{}, {}, tp::out_type<float>(32, 32))(test::dev());
  const auto h = y.to_host();
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 32; ++c) {
      if ((r / 8) % 2 == 0) ASSERT_EQ(h[r * 32 + c], 2.0f);
      else ASSERT_TRUE(std::isnan(h[r * 32 + c])) << "block " << r / 8 << " was written";
    }
}

TEST(Interpreter, CopyModesAndCtaOrdersAgree) {
  if (test::on_gpu()) GTEST_SKIP() << "interpreter only";
  using kernel = matmul_kernel<tp::bf16, 128, 128, 3, 2>;
  const long long M = 200, N = 136, K = 328;
  const auto ha = test::random_values<tp::bf16>(M * K), hb = test::random_values<tp::bf16>(K * N);
  tp::device dev = test::dev();
  auto a = tp::tensor<tp::bf16, 2>::from_host(dev, {M, K}, ha);
  auto b = tp::tensor<tp::bf16, 2>::from_host(dev, {K, N}, hb);
  const auto kern = kernel::make(M, N, K, 1);
  const auto reference = tp::kernel(kern, kern.config(), tp::out_type<tp::bf16>(M, N))(dev, a, b).to_host();
  for (auto mode : {tp::interpret::copy_mode::eager, tp::interpret::copy_mode::shuffled}) {
    dev.interpreter.copies = mode;
    dev.interpreter.shuffle_ctas = true;
    dev.interpreter.seed = test::fresh_seed();
    const auto out = tp::kernel(kern, kern.config(), tp::out_type<tp::bf16>(M, N))(dev, a, b).to_host();
    for (std::size_t i = 0; i < out.size(); ++i) ASSERT_EQ(tp::to_float(out[i]), tp::to_float(reference[i])) << i;
  }
}
