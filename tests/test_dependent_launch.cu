// Programmatic dependent launch: a kernel launched with launch_config::dependent_launch
// starts while the previous kernel in the stream still runs (its prologue overlaps), and
// prim::grid_dependency_wait() still gives it all of that kernel's writes. On the GPU the
// test measures the overlap with %globaltimer against a launch without the attribute; in
// the interpreter (launches in order) it checks the data only.
#include "test_util.hpp"

#include <cstdint>
#include <cstring>

namespace {

constexpr long long n = 1 << 16;

/// y = 2 x, after spinning for spin_ns; lets the next grid start first. times[0, 1]: its
/// start and the end of its writes.
struct primary_kernel {
  long long spin_ns;
  std::uint64_t* times;
  TP_HD void operator()(tp::kernel_context& ctx, tp::gmem<float, 1> x, tp::gmem<float, 1> y) const {
    const std::uint64_t start = tp::prim::global_timer();
    tp::prim::launch_dependents();
    if (spin_ns > 0)
      while (tp::prim::global_timer() - start < static_cast<std::uint64_t>(spin_ns)) {
      }
    for (long long i = tp::prim::thread_in_warpgroup(); i < x.shape[0]; i += tp::prim::warpgroup_threads()) y.data[i] = 2 * x.data[i];
    ctx.sync_threads();
    if (ctx.cta_leader()) times[0] = start, times[1] = tp::prim::global_timer();
  }
};

/// z = y + 1, reading y only after grid_dependency_wait. times[2, 3]: its start and the
/// end of the wait.
struct secondary_kernel {
  std::uint64_t* times;
  TP_HD void operator()(tp::kernel_context& ctx, tp::gmem<float, 1> y, tp::gmem<float, 1> z) const {
    const std::uint64_t start = tp::prim::global_timer();  // the prologue
    tp::prim::grid_dependency_wait();
    const std::uint64_t waited = tp::prim::global_timer();
    for (long long i = tp::prim::thread_in_warpgroup(); i < y.shape[0]; i += tp::prim::warpgroup_threads()) z.data[i] = y.data[i] + 1;
    if (ctx.cta_leader()) times[2] = start, times[3] = waited;
  }
};

struct timings {
  long long secondary_start_before_primary_end_ns;  // > 0: the secondary started early
  long long wait_end_after_primary_end_ns;          // >= 0: the wait covered the primary
};

timings run_pair(bool dependent, tp::tensor<float, 1>& x, tp::tensor<float, 1>& y, tp::tensor<float, 1>& z,
                 tp::tensor<float, 1>& times_store) {
  auto* times = reinterpret_cast<std::uint64_t*>(times_store.data());
  const long long spin = test::on_gpu() ? 200000 : 0;  // the interpreter's clock does not run by itself
  const auto primary = tp::kernel(primary_kernel{spin, times}, {});
  const auto secondary = tp::kernel(secondary_kernel{times}, {.dependent_launch = dependent});
  primary(test::dev(), x, y);
  secondary(test::dev(), y, z);
  const auto h = times_store.to_host();  // waits for both
  std::uint64_t t[4];
  std::memcpy(t, h.data(), sizeof t);
  return {static_cast<long long>(t[1] - t[2]), static_cast<long long>(t[3] - t[1])};
}

}  // namespace

TEST(DependentLaunch, PrologueOverlapsThePreviousKernelAndTheWaitSeesItsWrites) {
  const auto hx = test::random_values<float>(n);
  auto x = tp::tensor<float, 1>::from_host(test::dev(), {n}, hx);
  tp::tensor<float, 1> y(test::dev(), {n}), z(test::dev(), {n}), times(test::dev(), {8});
  run_pair(true, x, y, z, times);  // the first launch of each kernel is waited for: warm up
  for (bool dependent : {false, true}) {
    z.poison();
    const timings t = run_pair(dependent, x, y, z, times);
    const auto hz = z.to_host();
    long long wrong = 0;
    for (long long i = 0; i < n; ++i) wrong += hz[i] != 2 * hx[i] + 1;
    EXPECT_EQ(wrong, 0) << (dependent ? "dependent" : "ordinary") << " launch";
    if (!test::on_gpu()) continue;
    std::printf("%s launch: secondary started %lld ns before the primary ended; its wait ended %lld ns after\n",
                dependent ? "dependent" : "ordinary", t.secondary_start_before_primary_end_ns, t.wait_end_after_primary_end_ns);
    if (dependent) {
      EXPECT_GT(t.secondary_start_before_primary_end_ns, 50000) << "the dependent launch did not overlap";
      EXPECT_GE(t.wait_end_after_primary_end_ns, 0) << "grid_dependency_wait returned before the primary ended";
    } else {
      EXPECT_LE(t.secondary_start_before_primary_end_ns, 0) << "an ordinary launch overlapped";
    }
  }
}
