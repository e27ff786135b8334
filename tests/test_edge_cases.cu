// The edges a new user reaches: outputs whose rows are narrower than their stride (both
// backends write exactly the view), bad launch arguments, shared memory over budget and
// failed launches reported by name, reads of output blocks nothing wrote. Cases that leave
// the GPU unusable (a trap) run as death tests, each in a fresh process.
#include "test_util.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

namespace {

/// A padded row-major matrix: `rows` x `ld` elements, of which the view shows `cols` per row.
template <class T>
struct padded {
  long long rows, cols, ld;
  std::vector<T> host;
  tp::tensor<T, 2> storage;
  padded(long long r, long long c, long long l, std::vector<T> h)
      : rows(r), cols(c), ld(l), host(std::move(h)), storage(tp::tensor<T, 2>::from_host(test::dev(), {r, l}, host)) {}
  tp::tensor_view<T, 2> view() const {
    auto v = tp::tensor_view<T, 2>::wrap(storage.data(), {rows, cols}, test::on_gpu());
    v.stride[0] = ld;
    return v;
  }
};

/// Bits of the element, for exact comparisons (NaN included).
template <class T>
auto bits(T x) {
  if constexpr (sizeof(T) == 2) {
    std::uint16_t u;
    std::memcpy(&u, &x, 2);
    return u;
  } else {
    std::uint32_t u;
    std::memcpy(&u, &x, 4);
    return u;
  }
}

/// Checks y (a padded matrix after a kernel) against want(r, c) inside the view and against
/// its initial contents in the padding.
template <class T, class F>
void expect_exactly_the_view(const padded<T>& y, F&& want, const std::string& what) {
  const auto after = y.storage.to_host();
  int wrong = 0, clobbered = 0;
  for (long long r = 0; r < y.rows; ++r)
    for (long long c = 0; c < y.ld; ++c) {
      const long long i = r * y.ld + c;
      if (c < y.cols) {
        if (bits(after[i]) != bits(tp::from_float<T>(want(r, c))) && wrong++ < 3)
          ADD_FAILURE() << what << ": element (" << r << ", " << c << ") is " << tp::to_float(after[i]) << ", want "
                        << want(r, c);
      } else if (bits(after[i]) != bits(y.host[i]) && clobbered++ < 3) {
        ADD_FAILURE() << what << ": padding element (" << r << ", " << c << ") was overwritten with "
                      << tp::to_float(after[i]);
      }
    }
  EXPECT_EQ(wrong, 0) << what;
  EXPECT_EQ(clobbered, 0) << what << ": writes outside the view";
}

/// y = 2 x + 1 block by block, with emit_pipeline (WS = false) or the warp-specialised pipeline.
template <class T, class Tile, bool WS>
struct scale_kernel {
  static constexpr int num_threads = WS ? 2 : 1;
  int row_blocks, col_blocks;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<T, 2, Tile> x, tp::gmem<T, 2, Tile> y) const {
    auto body = [](auto, auto xs, auto ys) { tp::map([](float v) { return 2.0f * v + 1.0f; }, ys, xs); };
    auto s = tp::spec<Tile>([](auto i, auto j) { return tp::idx(i, j); });
    if constexpr (WS)
      tp::emit_pipeline_warp_specialized(body, tp::grid(row_blocks, col_blocks), tp::in_specs(s), tp::out_specs(s),
                                         tp::num_compute_wgs<1>, tp::memory_registers<40>)(k, x, y);
    else
      tp::emit_pipeline(body, tp::grid(row_blocks, col_blocks), tp::in_specs(s), tp::out_specs(s))(k, x, y);
  }
};

template <class T, int BR, int BC, int Swizzle, bool WS>
void check_scale(long long rows, long long cols, long long ld) {
  using tile = tp::tile<tp::block<BR, BC>, tp::swizzle<Swizzle>>;
  const long long x_ld = (cols * static_cast<long long>(sizeof(T)) + 15) / 16 * 16 / static_cast<long long>(sizeof(T));
  padded<T> x(rows, cols, x_ld, test::random_values<T>(rows * x_ld));
  padded<T> y(rows, cols, ld, test::random_values<T>(rows * ld, test::fresh_seed(), 5.0f, 9.0f));
  const scale_kernel<T, tile, WS> kern{static_cast<int>((rows + BR - 1) / BR), static_cast<int>((cols + BC - 1) / BC)};
  tp::kernel(kern, {})(test::dev(), x.view(), y.view());
  expect_exactly_the_view(
      y, [&](long long r, long long c) { return 2.0f * tp::to_float(x.host[r * x_ld + c]) + 1.0f; },
      std::to_string(rows) + " x " + std::to_string(cols) + " (stride " + std::to_string(ld) + ")" +
          (WS ? ", warp-specialised" : ", emit_pipeline"));
}

/// Writes value(r, c) = ((r + 3 c) % 17) - 8 into every block of y through a fragment, SMEM
/// and copy_smem_to_gmem (no pipeline).
template <class T, class Tile>
struct fill_kernel {
  int row_blocks, col_blocks;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<T, 2, Tile> y) const {
    constexpr int BR = Tile::block_type::size_at(0), BC = Tile::block_type::size_at(1);
    auto buf = k.alloc<tp::smem<T, Tile>>();
    for (int i = 0; i < row_blocks; ++i)
      for (int j = 0; j < col_blocks; ++j) {
        const int r0 = i * BR, c0 = j * BC;
        auto f = tp::map(tp::zeros<float, BR, BC>(),
                         [=](float, int r, int c) { return static_cast<float>((r0 + r + 3 * (c0 + c)) % 17 - 8); });
        tp::store(buf, f);
        tp::commit_smem();
        tp::copy_smem_to_gmem(buf, y, tp::idx(i, j));
        tp::wait_smem_to_gmem<0>(tp::reads_done);
      }
    tp::wait_smem_to_gmem<0>();
  }
};

template <class T, int BR, int BC, int Swizzle>
void check_fill(long long rows, long long cols, long long ld) {
  using tile = tp::tile<tp::block<BR, BC>, tp::swizzle<Swizzle>>;
  padded<T> y(rows, cols, ld, test::random_values<T>(rows * ld, test::fresh_seed(), 20.0f, 30.0f));
  const fill_kernel<T, tile> kern{static_cast<int>((rows + BR - 1) / BR), static_cast<int>((cols + BC - 1) / BC)};
  tp::kernel(kern, {})(test::dev(), y.view());
  expect_exactly_the_view(
      y, [](long long r, long long c) { return static_cast<float>((r + 3 * c) % 17 - 8); },
      "copy_smem_to_gmem " + std::to_string(rows) + " x " + std::to_string(cols) + " (stride " + std::to_string(ld) +
          ", swizzle " + std::to_string(Swizzle) + ")");
}

}  // namespace

// TMA stores write the innermost dimension in whole 16-byte chunks: the library stores the
// boxes that cross such an edge itself, so both backends write exactly the view.
TEST(ExactStores, EmitPipelineOutputsNarrowerThanTheirStride) {
  check_scale<tp::bf16, 64, 64, 128, false>(64, 57, 72);
  check_scale<float, 64, 32, 128, false>(64, 61, 72);
  check_scale<tp::bf16, 8, 8, 0, false>(3, 1, 8);
  check_scale<tp::bf16, 64, 64, 128, false>(129, 257, 264);
  check_scale<float, 32, 64, 0, false>(40, 99, 100);  // no swizzle, 64 f32 = 256-byte rows
  check_scale<tp::bf16, 64, 64, 128, false>(64, 128, 136);  // a multiple of 16 bytes: TMA alone
}

TEST(ExactStores, WarpSpecialisedOutputsNarrowerThanTheirStride) {
  check_scale<tp::bf16, 64, 64, 128, true>(64, 57, 72);
  check_scale<float, 64, 32, 128, true>(64, 61, 72);
  check_scale<tp::bf16, 8, 8, 0, true>(3, 1, 8);
  check_scale<tp::f16, 64, 64, 64, true>(100, 75, 80);
}

TEST(ExactStores, CopySmemToGmem) {
  check_fill<tp::bf16, 64, 64, 128>(64, 57, 72);
  check_fill<tp::bf16, 64, 64, 0>(64, 57, 72);
  check_fill<float, 64, 32, 128>(70, 61, 72);
  check_fill<float, 64, 8, 0>(64, 3, 8);
}

// ---- launch arguments ----------------------------------------------------------------------

TEST(LaunchErrors, NullTensorView) {
  using tile = tp::tile<tp::block<8, 8>>;
  tp::tensor<tp::bf16, 2> y(test::dev(), {8, 8});
  const auto null = tp::tensor_view<tp::bf16, 2>::wrap(nullptr, {8, 8}, test::on_gpu());
  const std::string err = test::error_of([&] { tp::kernel(scale_kernel<tp::bf16, tile, false>{1, 1}, {})(test::dev(), null, y); });
  EXPECT_NE(err.find("kernel argument 0 (tp::gmem<bf16, 2>) is a null tensor view"), std::string::npos) << err;
}

// ---- failures the GPU reports only by trapping: each in a fresh process ----------------------

namespace {

/// Runs f in a death test's child: exits with 3 after printing the tilepipe::error it threw,
/// with 0 if it threw none.
template <class F>
[[noreturn]] void exit_with_error_of(F&& f) {
  const std::string err = test::error_of(f);
  std::fprintf(stderr, "%s\n", err.c_str());
  std::exit(err.empty() ? 0 : 3);
}

/// Four slots of 128 KB: more shared memory than a CTA has.
struct over_budget_kernel {
  using tile = tp::tile<tp::block<128, 256>>;  // 128 KB of f32
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> y) const {
    auto body = [](auto, auto xs, auto ys) { tp::map([](float v) { return v; }, ys, xs); };
    auto s = tp::spec<tile>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline(body, tp::grid(4), tp::in_specs(s), tp::out_specs(s), tp::max_concurrent_steps<4>)(k, x, y);
  }
};

/// Asks for a grid axis by a name the launch did not give: a device-side check fails.
struct misnamed_axis_kernel {
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 1> x) const {
    if (k.axis_index("rows") < 0) x.data[0] = 1.0f;
  }
};

}  // namespace

class GpuFailures : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

// The same message on both backends, at the launch.
TEST_F(GpuFailures, SharedMemoryOverBudgetIsReportedAtLaunch) {
  EXPECT_EXIT(exit_with_error_of([] {
                tp::tensor<float, 2> x(test::dev(), {512, 256}), y(test::dev(), {512, 256});
                tp::kernel(over_budget_kernel{}, {})(test::dev(), x, y);
              }),
              ::testing::ExitedWithCode(3),
              "shared memory over budget: pipeline input slots needs 524288 bytes at offset 0, but the kernel has "
              "232448 bytes of dynamic shared memory");
}

// A launch that fails names the kernel, its grid and its shared memory, at the launch.
TEST_F(GpuFailures, FailedLaunchNamesTheKernel) {
  const char* want = test::on_gpu() ? "kernel .*misnamed_axis_kernel \\(grid \\(3, 1, 1\\), 1 warpgroups, 1024 bytes of "
                                      "dynamic shared memory\\) failed: .*: no grid axis is named 'rows'"
                                    : "no grid axis is named 'rows'";
  EXPECT_EXIT(exit_with_error_of([] {
                tp::tensor<float, 1> x(test::dev(), {16});
                tp::kernel(misnamed_axis_kernel{}, {.grid = {3}, .smem_bytes = 1024})(test::dev(), x);
              }),
              ::testing::ExitedWithCode(3), want);
}

// A later launch of a kernel that failed: the next CUDA call names it.
TEST_F(GpuFailures, LaterFailureNamesTheLastKernel) {
  if (!test::on_gpu()) GTEST_SKIP() << "the interpreter reports every failure at its launch";
  EXPECT_EXIT(exit_with_error_of([] {
                tp::tensor<float, 1> x(test::dev(), {16});
                tp::kernel(misnamed_axis_kernel{}, {.grid = {2}, .grid_names = {"rows"}})(test::dev(), x);  // fine
                tp::kernel(misnamed_axis_kernel{}, {.grid = {2}, .grid_names = {"cols"}})(test::dev(), x);
                (void)x.to_host();
              }),
              ::testing::ExitedWithCode(3), "the last kernel launched: kernel .*misnamed_axis_kernel \\(grid \\(2, 1, 1\\)");
}

// ---- an output block read before anything wrote it (interpreter) -----------------------------

namespace {

using acc_tile = tp::tile<tp::block<16, 64>>;

/// y(i) = sum over j of x(i, j), accumulated in the output block; with Init, the first step
/// of each block's run initialises it, as it must.
template <bool Init, bool WS>
struct row_block_sums {
  static constexpr int num_threads = WS ? 2 : 1;
  int rows, cols;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, acc_tile> x, tp::gmem<float, 2, acc_tile> y) const {
    auto body = [](auto at, auto xs, auto ys) {
      if (Init && at[1] == 0) tp::map([](float v) { return v; }, ys, xs);
      else tp::map([](float acc, float v) { return acc + v; }, ys, ys, xs);
    };
    auto xs = tp::spec<acc_tile>([](auto i, auto j) { return tp::idx(i, j); });
    auto ys = tp::spec<acc_tile>([](auto i, auto) { return tp::idx(i, 0); });
    if constexpr (WS)
      tp::emit_pipeline_warp_specialized(body, tp::grid(rows / 16, cols / 64), tp::in_specs(xs), tp::out_specs(ys),
                                         tp::num_compute_wgs<1>, tp::memory_registers<40>)(k, x, y);
    else
      tp::emit_pipeline(body, tp::grid(rows / 16, cols / 64), tp::in_specs(xs), tp::out_specs(ys))(k, x, y);
  }
};

template <bool Init, bool WS>
std::string run_row_block_sums() {
  const long long rows = 48, cols = 256;
  const auto hx = test::random_values<float>(rows * cols);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {rows, cols}, hx);
  return test::error_of([&] {
    const auto y = tp::kernel(row_block_sums<Init, WS>{rows, cols}, {}, tp::out_type<float>(rows, 64))(test::dev(), x).to_host();
    std::vector<double> ref(rows * 64, 0.0);
    for (long long r = 0; r < rows; ++r)
      for (long long c = 0; c < cols; ++c) ref[r * 64 + c % 64] += hx[r * cols + c];
    if (!(test::rel_error(y, ref) < 1e-5)) throw tp::error("wrong sums");
  });
}

}  // namespace

TEST(UninitialisedReads, OutputBlockReadBeforeWritten) {
  if (test::on_gpu()) GTEST_SKIP() << "the interpreter knows which bytes nothing wrote; the GPU reads stale memory";
  for (const std::string& err : {run_row_block_sums<false, false>(), run_row_block_sums<false, true>()}) {
    EXPECT_NE(err.find("uninitialised read [output block read before written]"), std::string::npos) << err;
    EXPECT_NE(err.find("warpgroup 0 reads (tp::map input)"), std::string::npos) << err;
    EXPECT_NE(err.find("output 0, slot 0' (block (0, 0))"), std::string::npos) << err;
    EXPECT_NE(err.find("at pipeline step 0"), std::string::npos) << err;
  }
}

TEST(UninitialisedReads, InitialisedAccumulatorRunsClean) {
  EXPECT_EQ((run_row_block_sums<true, false>()), "");
  EXPECT_EQ((run_row_block_sums<true, true>()), "");
}

// ---- CUDA-graph capture ------------------------------------------------------------------------

namespace {
using capture_tile = tp::tile<tp::block<8, 32>>;
/// y = x + 1: a kernel type no other test launches, so that its first launch is this test's.
struct first_in_capture_kernel {
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, capture_tile> x, tp::gmem<float, 2, capture_tile> y) const {
    auto body = [](auto, auto xs, auto ys) { tp::map([](float v) { return v + 1.0f; }, ys, xs); };
    auto s = tp::spec<capture_tile>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline(body, tp::grid(static_cast<int>(x.shape[0] / 8)), tp::in_specs(s), tp::out_specs(s),
                      tp::max_concurrent_steps<2>)(k, x, y);
  }
};
}  // namespace

#if TP_HAS_CUDA_COMPILER
namespace {
/// In a fresh process: opens the GPU and launches first_in_capture_kernel for the first time
/// inside a global-mode capture, replays the graph and checks y; "" when all went well.
std::string first_open_and_launch_inside_a_capture() {
  const auto hx = test::random_values<float>(16 * 32, 7);
  float *x = nullptr, *y = nullptr;
  cudaMalloc(&x, hx.size() * sizeof(float));
  cudaMalloc(&y, hx.size() * sizeof(float));
  cudaMemcpy(x, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaStream_t s = nullptr;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaGraph_t graph = nullptr;
  cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
  std::string err = test::error_of([&] {
    const auto dev = tp::device::open(tp::backend::gpu);
    tp::launch_config cfg;
    cfg.stream = s;
    tp::kernel(first_in_capture_kernel{}, cfg)(dev, tp::tensor_view<float, 2>::wrap(x, {16, 32}, true),
                                                tp::tensor_view<float, 2>::wrap(y, {16, 32}, true));
  });
  if (cudaStreamEndCapture(s, &graph) != cudaSuccess) return err + " / the capture was invalidated";
  if (!err.empty()) return err;
  cudaGraphExec_t exec = nullptr;
  if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess || cudaGraphLaunch(exec, s) != cudaSuccess ||
      cudaStreamSynchronize(s) != cudaSuccess)
    return std::string("replaying the graph failed: ") + cudaGetErrorString(cudaGetLastError());
  std::vector<float> hy(hx.size());
  cudaMemcpy(hy.data(), y, hy.size() * sizeof(float), cudaMemcpyDeviceToHost);
  for (std::size_t i = 0; i < hy.size(); ++i)
    if (hy[i] != hx[i] + 1.0f) return "wrong value at " + std::to_string(i);
  return "";
}

/// Ends a death test's child: 0 when `err` is empty, else 3 after printing it.
[[noreturn]] void exit_with_message(const std::string& err) {
  std::fprintf(stderr, "%s\n", err.c_str());
  std::exit(err.empty() ? 0 : 3);
}
}  // namespace
#endif

// A framework's first call of a tilepipe kernel may come inside a CUDA-graph capture (the
// global mode, which forbids allocations and synchronisation): opening the device (its
// failure channel), the kernel's first launch (its module loaded, its shared memory allowed,
// its first-launch wait skipped) must all be legal there. In a fresh process (a death
// test's child, started as a new process: a forked child of a process that initialised CUDA
// cannot use it), so that nothing was opened or launched before.
TEST(GraphCapture, FirstOpenAndLaunchInsideACapture) {
  if (!tp::device::gpu_available()) GTEST_SKIP() << "a CUDA-graph capture needs the GPU";
#if TP_HAS_CUDA_COMPILER
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(exit_with_message(first_open_and_launch_inside_a_capture()), ::testing::ExitedWithCode(0), "");
#endif
}
