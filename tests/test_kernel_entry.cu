// The kernel entry: a 3-D grid with named axes (and the warpgroup axis by name), clusters
// along any grid axis and over two or three axes at once (ranks, positions along each
// axis, the CTAs along each axis), and programmatic dependent launch: a kernel launched with
// launch_config::dependent_launch starts while the previous kernel in the stream still
// runs (its prologue overlaps), and prim::grid_dependency_wait() still gives it all of that
// kernel's writes. On the GPU the test measures the overlap with %globaltimer against a
// launch without the attribute; in the interpreter (launches in order) it checks the data.
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

/// A stream of its own for the pair (on the GPU): a dependent launch pairs two kernels of
/// one stream. A blocking stream, so that the memsets and copies of the legacy default
/// stream around the pair stay ordered with it.
void* pair_stream() {
#if TP_HAS_CUDA_COMPILER
  static cudaStream_t s = [] {
    cudaStream_t created;
    TP_CUDA_CHECK(cudaStreamCreate(&created));
    return created;
  }();
  return s;
#else
  return nullptr;
#endif
}

timings run_pair(bool dependent, tp::tensor<float, 1>& x, tp::tensor<float, 1>& y, tp::tensor<float, 1>& z,
                 tp::tensor<float, 1>& times_store) {
  auto* times = reinterpret_cast<std::uint64_t*>(times_store.data());
  const long long spin = test::on_gpu() ? 200000 : 0;  // the interpreter's clock does not run by itself
  const auto primary = tp::kernel(primary_kernel{spin, times}, {.stream = pair_stream()});
  const auto secondary = tp::kernel(secondary_kernel{times}, {.stream = pair_stream(), .dependent_launch = dependent});
  primary(test::dev(), x, y);
  secondary(test::dev(), y, z);
#if TP_HAS_CUDA_COMPILER
  TP_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(pair_stream())));
#endif
  const auto h = times_store.to_host();
  std::uint64_t t[4];
  std::memcpy(t, h.data(), sizeof t);
  return {static_cast<long long>(t[1] - t[2]), static_cast<long long>(t[3] - t[1])};
}

}  // namespace

TEST(KernelEntry, DependentLaunchPrologueOverlapsThePreviousKernelAndTheWaitSeesItsWrites) {
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

namespace {
/// Every CTA of a 3-D grid writes where it is, by axis name and by number, and every
/// warpgroup its index by the thread name.
struct named_grid_kernel {
  static constexpr int num_threads = 2;
  static constexpr const char* thread_name = "wg";
  TP_HD void operator()(tp::kernel_context& ctx, tp::gmem<float, 1> out) const {
    const int b = ctx.axis_index("batch"), h = ctx.axis_index("head"), q = ctx.axis_index("block");
    const int cta = (b * ctx.axis_size("head") + h) * ctx.axis_size("block") + q;
    if (tp::prim::leader())
      out.data[cta * 2 + ctx.axis_index("wg")] = static_cast<float>(1000 * b + 100 * h + 10 * q + ctx.axis_index("wg")) +
                                                 (ctx.axis_index(0) == b && ctx.axis_index(1) == h && ctx.axis_index(2) == q &&
                                                          ctx.axis_size("wg") == 2
                                                      ? 0.0f
                                                      : 0.5f);
  }
};
}  // namespace

TEST(KernelEntry, ThreeDimensionalNamedGrid) {
  const auto out = tp::kernel(named_grid_kernel{}, {.grid = {2, 3, 4}, .grid_names = {"batch", "head", "block"}},
                              tp::out_type<float>(2 * 3 * 4 * 2))(test::dev())
                       .to_host();
  long long wrong = 0;
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 3; ++h)
      for (int q = 0; q < 4; ++q)
        for (int wg = 0; wg < 2; ++wg) wrong += out[((b * 3 + h) * 4 + q) * 2 + wg] != 1000 * b + 100 * h + 10 * q + wg;
  EXPECT_EQ(wrong, 0);
}

namespace {
/// Every CTA writes, after a cluster barrier, its rank in its cluster, the cluster's size,
/// its position in the cluster along each grid axis and the ranks of the cluster's CTAs
/// along each axis (masks).
constexpr int cluster_facts = 8;
struct cluster_rank_kernel {
  TP_HD void operator()(tp::kernel_context& ctx, tp::gmem<float, 1> out) const {
    ctx.cluster_sync();
    const int cta = (ctx.axis_index(0) * ctx.axis_size(1) + ctx.axis_index(1)) * ctx.axis_size(2) + ctx.axis_index(2);
    if (ctx.cta_leader()) {
      float* facts = out.data + cta * cluster_facts;
      facts[0] = static_cast<float>(ctx.cluster_rank());
      facts[1] = static_cast<float>(ctx.cluster_size());
      for (int a = 0; a < 3; ++a) {
        facts[2 + a] = static_cast<float>(ctx.cluster_index(a));
        facts[5 + a] = static_cast<float>(ctx.cluster_mask_along(a));
      }
    }
    ctx.cluster_sync();
  }
};

/// Runs cluster_rank_kernel over a grid of the given extents (rank: how many are given)
/// and checks every CTA against CUDA's numbering: ranks count the cluster's CTAs with
/// axis 0 fastest.
void check_clusters(std::vector<int> grid, tp::launch_config cfg, const int (&shape)[3]) {
  cfg.grid = grid;
  grid.resize(3, 1);
  const int ctas = grid[0] * grid[1] * grid[2], size = shape[0] * shape[1] * shape[2];
  const auto out = tp::kernel(cluster_rank_kernel{}, cfg, tp::out_type<float>(ctas * cluster_facts))(test::dev()).to_host();
  auto rank_of = [&](const int (&pos)[3]) { return pos[0] + shape[0] * (pos[1] + shape[1] * pos[2]); };
  long long wrong = 0;
  for (int x = 0; x < grid[0]; ++x)
    for (int y = 0; y < grid[1]; ++y)
      for (int z = 0; z < grid[2]; ++z) {
        const int pos[3] = {x % shape[0], y % shape[1], z % shape[2]};
        std::vector<float> want = {float(rank_of(pos)), float(size), float(pos[0]), float(pos[1]), float(pos[2])};
        for (int a = 0; a < 3; ++a) {
          int mask = 0, p[3] = {pos[0], pos[1], pos[2]};
          for (p[a] = 0; p[a] < shape[a]; ++p[a]) mask |= 1 << rank_of(p);
          want.push_back(float(mask));
        }
        const float* got = out.data() + ((x * grid[1] + y) * grid[2] + z) * cluster_facts;
        for (int f = 0; f < cluster_facts; ++f) wrong += got[f] != want[f];
      }
  EXPECT_EQ(wrong, 0) << "clusters of " << shape[0] << " x " << shape[1] << " x " << shape[2];
}
}  // namespace

TEST(KernelEntry, ClustersAlongAnyGridAxis) {
  for (int axis = 0; axis < 3; ++axis) {
    const int size = axis == 0 ? 2 : 4;
    int shape[3] = {1, 1, 1};
    shape[axis] = size;
    check_clusters({2, 4, 4}, {.cluster = size, .cluster_axis = axis}, shape);
  }
  const std::string e = test::error_of([] {
    tp::kernel(cluster_rank_kernel{}, {.grid = {2, 3, 1}, .cluster = 2, .cluster_axis = 1}, tp::out_type<float>(6))(test::dev());
  });
  EXPECT_NE(e.find("the grid's axis 1 has 3 CTAs, not a multiple of the cluster size 2"), std::string::npos) << e;
}

TEST(KernelEntry, ClustersOverSeveralGridAxes) {
  check_clusters({4, 6}, {.cluster_shape = {2, 2}}, {2, 2, 1});
  check_clusters({2, 4, 2}, {.cluster_shape = {2, 2, 2}}, {2, 2, 2});
  check_clusters({2, 4, 8}, {.cluster_shape = {1, 2, 4}}, {1, 2, 4});
  auto error = [](std::vector<int> grid, std::vector<int> shape, int cluster = 1) {
    return test::error_of([&] {
      tp::kernel(cluster_rank_kernel{}, {.grid = grid, .cluster = cluster, .cluster_shape = shape}, tp::out_type<float>(64))(test::dev());
    });
  };
  std::string e = error({4, 6}, {2, 3});
  EXPECT_NE(e.find("cluster_shape makes clusters of 6 CTAs: a cluster has 1, 2, 4 or 8 CTAs"), std::string::npos) << e;
  e = error({4, 6}, {2});
  EXPECT_NE(e.find("cluster_shape has 1 extents for a grid of 2 axes"), std::string::npos) << e;
  e = error({4, 6}, {2, 4});
  EXPECT_NE(e.find("the grid's axis 1 has 6 CTAs, not a multiple of the cluster size 4 along it"), std::string::npos) << e;
  e = error({4, 6}, {2, 2}, 4);
  EXPECT_NE(e.find("cluster_shape and cluster / cluster_axis are both set"), std::string::npos) << e;
}
