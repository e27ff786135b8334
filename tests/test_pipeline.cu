// emit_pipeline: step counts, grids, slot rotation, prefetch distance, delay_release,
// invariant operands, accumulation, runtime grids, GMEM specs, carry and buffered<n>.
// Value tests run on both backends; schedule tests read the interpreter's event log.
#include "test_util.hpp"

#include <algorithm>

namespace {

using tile8x32 = tp::tile<tp::block<8, 32>>;
constexpr float sentinel = -7.0f;

std::vector<float> host_values(long long n, std::uint64_t seed = test::fresh_seed()) {
  return test::random_values<float>(static_cast<std::size_t>(n), seed, -4.0f, 4.0f);
}

/// y(block i, j) = 2 x(block i, j) + 1 over a gi x gj grid of 8 x 32 blocks.
template <int MCS, int Delay, int InSlots = 0, int OutSlots = 0>
struct map_kernel {
  int gi, gj;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile8x32> x, tp::gmem<float, 2, tile8x32> y) const {
    auto body = [](auto, auto xs, auto ys) { tp::map([](float v) { return 2 * v + 1; }, ys, xs); };
    auto ij = [](auto i, auto j) { return tp::idx(i, j); };
    auto in = [&] {
      if constexpr (InSlots) return tp::spec<tile8x32>(ij, tp::delay_release<Delay>, tp::buffered<InSlots>);
      else return tp::spec<tile8x32>(ij, tp::delay_release<Delay>);
    }();
    auto out = [&] {
      if constexpr (OutSlots) return tp::spec<tile8x32>(ij, tp::buffered<OutSlots>);
      else return tp::spec<tile8x32>(ij);
    }();
    tp::emit_pipeline(body, tp::grid(gi, gj), tp::in_specs(in), tp::out_specs(out), tp::max_concurrent_steps<MCS>)(k, x, y);
  }
};

/// Runs map_kernel over the first gi x gj blocks of a rows x cols tensor and checks every
/// element: blocks inside the grid transformed, the rest untouched.
template <int MCS, int Delay, int InSlots = 0, int OutSlots = 0>
void check_map(int gi, int gj, long long rows, long long cols, std::vector<tp::interpret::event>* events = nullptr) {
  const auto hx = host_values(rows * cols);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {rows, cols}, hx);
  auto y = tp::tensor<float, 2>::from_host(test::dev(), {rows, cols}, std::vector<float>(rows * cols, sentinel));
  tp::device dev = test::dev();
  dev.interpreter.events = events;
  tp::kernel(map_kernel<MCS, Delay, InSlots, OutSlots>{gi, gj}, {.grid = {1}})(dev, x, y);
  const auto hy = y.to_host();
  for (long long r = 0; r < rows; ++r)
    for (long long c = 0; c < cols; ++c) {
      const bool inside = r < gi * 8LL && c < gj * 32LL;
      const float want = inside ? 2 * hx[r * cols + c] + 1 : sentinel;
      ASSERT_EQ(hy[r * cols + c], want) << "at (" << r << ", " << c << ") with grid " << gi << " x " << gj;
    }
}

}  // namespace

TEST(Pipeline, StepCounts) {
  // 0, 1, mcs - 1, mcs, mcs + 1 and 37 steps, for mcs = 3.
  for (int steps : {0, 1, 2, 3, 4, 37}) check_map<3, 0>(steps, 1, 37 * 8, 32);
}

TEST(Pipeline, TwoDimensionalGridWithEdgeBlocks) {
  // 5 x 4 blocks over a 37 x 100 tensor: the last block row and column overhang the edge
  // (TMA zero-fills on load and clips on store).
  check_map<2, 0>(5, 4, 37, 100);
  check_map<4, 1>(5, 4, 37, 100);
}

TEST(Pipeline, DelayReleaseAndBufferedValues) {
  check_map<4, 0>(9, 2, 72, 64);
  check_map<4, 1>(9, 2, 72, 64);
  check_map<4, 2>(9, 2, 72, 64);
  check_map<4, 3>(9, 2, 72, 64);
  check_map<2, 0, 1, 1>(9, 2, 72, 64);  // one slot each: no overlap, still correct
  check_map<2, 1, 5, 3>(9, 2, 72, 64);
}

namespace {

/// Per input-0 load: its slot and how many input-0 waits the kernel had done when it was issued.
struct load_record {
  std::uint32_t smem;
  int waits_before;
};

std::vector<load_record> loads_of_first_input(const std::vector<tp::interpret::event>& ev) {
  // Input 0's barriers are the barriers its loads complete on.
  std::vector<std::uint32_t> bars;
  for (auto& e : ev)
    if (e.kind == tp::interpret::event::tma_load && std::find(bars.begin(), bars.end(), e.barrier) == bars.end())
      bars.push_back(e.barrier);
  std::vector<load_record> r;
  int waits = 0;
  for (auto& e : ev) {
    if (e.kind == tp::interpret::event::barrier_wait && std::find(bars.begin(), bars.end(), e.barrier) != bars.end()) ++waits;
    if (e.kind == tp::interpret::event::tma_load) r.push_back({e.smem, waits});
  }
  return r;
}

template <int MCS, int Delay, int InSlots = 0>
void check_schedule(int steps) {
  std::vector<tp::interpret::event> ev;
  check_map<MCS, Delay, InSlots>(steps, 1, steps * 8LL, 32, &ev);
  const auto loads = loads_of_first_input(ev);
  const int slots = InSlots ? InSlots : MCS;
  ASSERT_EQ(static_cast<int>(loads.size()), steps);
  const std::uint32_t slot_bytes = 1024;  // an 8 x 32 f32 block is 1 KiB
  for (int t = 0; t < steps; ++t) {
    // Slot rotation: step t's block lands in slot t % slots.
    EXPECT_EQ(loads[t].smem - loads[0].smem, static_cast<std::uint32_t>(t % slots) * slot_bytes) << "load " << t;
    // Prefetch distance: the prologue fetches the first `slots` steps; afterwards step t
    // is fetched right after the body of step t - slots + delay, i.e. after that many + 1 waits.
    const int expected_waits = t < slots ? 0 : t - slots + Delay + 1;
    EXPECT_EQ(loads[t].waits_before, expected_waits) << "load " << t << " (slots " << slots << ", delay " << Delay << ")";
  }
}

}  // namespace

TEST(PipelineSchedule, SlotRotationPrefetchAndDelayRelease) {
  if (test::on_gpu()) GTEST_SKIP() << "reads the interpreter's event log";
  check_schedule<3, 0>(10);
  check_schedule<3, 1>(10);
  check_schedule<3, 2>(10);
  check_schedule<4, 1>(37);
  check_schedule<2, 1, 5>(12);  // buffered<5> overrides max_concurrent_steps
  check_schedule<3, 0>(2);      // fewer steps than slots
}

namespace {

using tile_sq = tp::tile<tp::block<tp::squeezed, 8, 32>>;

/// out(b, i) = sum over k of x(b, i, k): a 3-D grid whose output block stays the same for
/// consecutive k, so the body accumulates in the output slot (TPU semantics).
struct accumulate_kernel {
  int nb, ni, nk;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 3, tile_sq> x, tp::gmem<float, 3, tile_sq> out) const {
    auto body = [](auto at, auto xs, auto os) {
      if (at[2] == 0) tp::map([](float v) { return v; }, os, xs);
      else tp::map([](float o, float v) { return o + v; }, os, os, xs);
    };
    tp::emit_pipeline(body, tp::grid(nb, ni, nk),
                      tp::in_specs(tp::spec<tile_sq>([](auto b, auto i, auto kk) { return tp::idx(b, i, kk); })),
                      tp::out_specs(tp::spec<tile_sq>([](auto b, auto i, auto) { return tp::idx(b, i, 0); })),
                      tp::max_concurrent_steps<3>)(k, x, out);
  }
};

}  // namespace

TEST(Pipeline, ThreeDimensionalGridAccumulatesInOutputBlock) {
  const int nb = 3, ni = 2, nk = 5;
  const long long R = ni * 8, C = 32;
  const auto hx = host_values(nb * R * nk * C);
  auto x = tp::tensor<float, 3>::from_host(test::dev(), {nb, R, nk * C}, hx);
  std::vector<tp::interpret::event> ev;
  tp::device dev = test::dev();
  dev.interpreter.events = &ev;
  auto out = tp::kernel(accumulate_kernel{nb, ni, nk}, {.grid = {1}}, tp::out_type<float>(nb, R, C))(dev, x);
  const auto ho = out.to_host();
  for (int b = 0; b < nb; ++b)
    for (long long r = 0; r < R; ++r)
      for (long long c = 0; c < C; ++c) {
        double want = 0;
        for (int kk = 0; kk < nk; ++kk) want += hx[(b * R + r) * nk * C + kk * C + c];
        ASSERT_NEAR(ho[(b * R + r) * C + c], want, 1e-4) << b << "," << r << "," << c;
      }
  if (!test::on_gpu()) {  // one store per output block, not one per step
    const auto stores = std::count_if(ev.begin(), ev.end(), [](auto& e) { return e.kind == tp::interpret::event::tma_store; });
    EXPECT_EQ(stores, nb * ni);
  }
}

namespace {

/// out = sum over all steps of (x block + z): z is index-invariant (one slot, fetched once)
/// and so is out (one slot, stored once after the last step).
struct invariant_kernel {
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile8x32> x, tp::gmem<float, 2, tile8x32> z,
                        tp::gmem<float, 2, tile8x32> out) const {
    auto body = [](auto at, auto xs, auto zs, auto os) {
      if (at[0] == 0) tp::map([](float v, float w) { return v + w; }, os, xs, zs);
      else tp::map([](float o, float v, float w) { return o + v + w; }, os, os, xs, zs);
    };
    auto zero = [](auto) { return tp::idx(0, 0); };
    static_assert(tp::axes_used_v<decltype(zero), 1> == 0);
    tp::emit_pipeline(body, tp::grid(steps),
                      tp::in_specs(tp::spec<tile8x32>([](auto i) { return tp::idx(i, 0); }), tp::spec<tile8x32>(zero)),
                      tp::out_specs(tp::spec<tile8x32>(zero)), tp::max_concurrent_steps<3>)(k, x, z, out);
  }
};

}  // namespace

TEST(Pipeline, InvariantInputAndOutput) {
  const int steps = 7;
  const auto hx = host_values(steps * 8 * 32), hz = host_values(8 * 32);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {steps * 8, 32}, hx);
  auto z = tp::tensor<float, 2>::from_host(test::dev(), {8, 32}, hz);
  std::vector<tp::interpret::event> ev;
  tp::device dev = test::dev();
  dev.interpreter.events = &ev;
  auto out = tp::kernel(invariant_kernel{steps}, {.grid = {1}}, tp::out_type<float>(8, 32))(dev, x, z);
  const auto ho = out.to_host();
  for (int e = 0; e < 8 * 32; ++e) {
    double want = 0;
    for (int s = 0; s < steps; ++s) want += hx[s * 256 + e] + hz[e];
    ASSERT_NEAR(ho[e], want, 1e-4);
  }
  if (!test::on_gpu()) {
    int loads = 0, stores = 0;
    for (auto& e : ev) loads += e.kind == tp::interpret::event::tma_load, stores += e.kind == tp::interpret::event::tma_store;
    EXPECT_EQ(loads, steps + 1);  // x every step, z once
    EXPECT_EQ(stores, 1);         // out once, after the last step
  }
}

namespace {

/// The same map over a static grid (extents in the type): slots are clamped to the steps.
template <int GI>
struct static_grid_kernel {
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile8x32> x, tp::gmem<float, 2, tile8x32> y) const {
    auto body = [](auto, auto xs, auto ys) { tp::map([](float v) { return 2 * v + 1; }, ys, xs); };
    auto s = tp::spec<tile8x32>([](auto i, auto j) { return tp::idx(i, j); }, tp::delay_release<1>);
    tp::emit_pipeline(body, tp::grid<GI, 2>(), tp::in_specs(s), tp::out_specs(s), tp::max_concurrent_steps<8>)(k, x, y);
  }
};

template <int GI>
void check_static_grid() {
  const long long rows = GI * 8, cols = 64;
  const auto hx = host_values(rows * cols);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {rows, cols}, hx);
  auto y = tp::kernel(static_grid_kernel<GI>{}, {.grid = {1}}, tp::out_type<float>(rows, cols))(test::dev(), x);
  const auto hy = y.to_host();
  for (long long e = 0; e < rows * cols; ++e) ASSERT_EQ(hy[e], 2 * hx[e] + 1);
}

}  // namespace

TEST(Pipeline, StaticGrids) {
  check_static_grid<1>();  // 2 steps < 8 slots: clamped, delay dropped
  check_static_grid<3>();
  check_static_grid<9>();
}

namespace {

/// Nested pipelines: the outer pipeline passes x and y through in GMEM (tp::gmem_spec);
/// its body runs an inner pipeline over one band of rows, a slice of the GMEM refs.
struct nested_kernel {
  int bands, blocks_per_band;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile8x32> x, tp::gmem<float, 2, tile8x32> y) const {
    const int per = blocks_per_band;
    auto outer = [&k, per](auto at, auto xg, auto yg) {
      const long long r0 = static_cast<long long>(at[0]) * per * 8;
      auto xb = xg.at(tp::ds{r0, per * 8LL}, tp::ds{0, xg.shape[1]});
      auto yb = yg.at(tp::ds{r0, per * 8LL}, tp::ds{0, yg.shape[1]});
      auto inner = [](auto, auto xs, auto ys) { tp::map([](float v) { return v * v; }, ys, xs); };
      auto s = tp::spec<tile8x32>([](auto i) { return tp::idx(i, 0); });
      tp::emit_pipeline(inner, tp::grid(per), tp::in_specs(s), tp::out_specs(s), tp::max_concurrent_steps<2>)(k, xb, yb);
    };
    tp::emit_pipeline(outer, tp::grid(bands), tp::in_specs(tp::gmem_spec), tp::out_specs(tp::gmem_spec))(k, x, y);
  }
};

}  // namespace

TEST(Pipeline, GmemSpecsRunNestedPipelines) {
  const int bands = 3, per = 4;
  const long long rows = bands * per * 8, cols = 32;
  const auto hx = host_values(rows * cols);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {rows, cols}, hx);
  auto y = tp::kernel(nested_kernel{bands, per}, {.grid = {1}}, tp::out_type<float>(rows, cols))(test::dev(), x);
  const auto hy = y.to_host();
  for (long long e = 0; e < rows * cols; ++e) ASSERT_EQ(hy[e], hx[e] * hx[e]);
}

namespace {

/// Manual ready barriers in emit_pipeline: the body scales x before it waits for bias's
/// block, which changes every third step; it skips the odd blocks (never waits for them:
/// the pipeline does before it refills their slot, and at its end).
/// y(block i) = 3 x(block i) + (i / 3 even ? bias(block i / 3) : 0).
struct manual_ready_kernel {
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile8x32> x, tp::gmem<float, 2, tile8x32> bias,
                        tp::gmem<float, 2, tile8x32> y) const {
    auto body = [](tp::index<1> at, auto xs, tp::pending_block<tp::smem<float, tile8x32>> bs, auto ys) {
      tp::map([](float v) { return 3 * v; }, ys, xs);
      if (at[0] / 3 % 2 == 0) tp::map([](float o, float b) { return o + b; }, ys, ys, bs.wait());
    };
    auto row = [](auto i) { return tp::idx(i, 0); };
    tp::emit_pipeline(body, tp::grid(steps),
                      tp::in_specs(tp::spec<tile8x32>(row), tp::spec<tile8x32>([](auto i) { return tp::idx(i / 3, 0); }, tp::manual_ready)),
                      tp::out_specs(tp::spec<tile8x32>(row)), tp::max_concurrent_steps<2>)(k, x, bias, y);
  }
};

}  // namespace

TEST(Pipeline, ManualReadyBarriersWaitedForInTheBody) {
  for (int steps : {1, 7, 12}) {
    const int bias_blocks = (steps + 2) / 3;
    const auto hx = host_values(steps * 256), hb = host_values(bias_blocks * 256);
    auto x = tp::tensor<float, 2>::from_host(test::dev(), {steps * 8, 32}, hx);
    auto bias = tp::tensor<float, 2>::from_host(test::dev(), {bias_blocks * 8, 32}, hb);
    const auto hy = tp::kernel(manual_ready_kernel{steps}, {.grid = {1}}, tp::out_type<float>(steps * 8, 32))(test::dev(), x, bias).to_host();
    std::vector<double> ref(hx.size());
    for (int e = 0; e < steps * 256; ++e) ref[e] = 3.0 * hx[e] + (e / 256 / 3 % 2 == 0 ? hb[(e / 256 / 3) * 256 + e % 256] : 0.0);
    EXPECT_LT(test::rel_error(hy, ref), 1e-6) << steps << " steps";
  }
}

namespace {

/// The carry counts the steps: y(step s) = x(step s) * (s + 1), with s taken from the carry.
struct carry_kernel {
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile8x32> x, tp::gmem<float, 2, tile8x32> y) const {
    auto body = [](auto, auto xs, auto ys, int count) {
      const float f = static_cast<float>(count + 1);
      tp::map([f](float v) { return v * f; }, ys, xs);
      return count + 1;
    };
    auto s = tp::spec<tile8x32>([](auto i) { return tp::idx(i, 0); });
    const int final_count = tp::emit_pipeline(body, tp::grid(steps), tp::in_specs(s), tp::out_specs(s))(k, tp::carry(0), x, y);
    TP_REQUIRE(final_count == steps, "carry returned %d after %d steps", final_count, steps);
  }
};

}  // namespace

TEST(Pipeline, CarryThreadsThroughSteps) {
  const int steps = 6;
  const auto hx = host_values(steps * 8 * 32);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {steps * 8, 32}, hx);
  auto y = tp::kernel(carry_kernel{steps}, {.grid = {1}}, tp::out_type<float>(steps * 8, 32))(test::dev(), x);
  const auto hy = y.to_host();
  for (int e = 0; e < steps * 256; ++e) ASSERT_EQ(hy[e], hx[e] * static_cast<float>(e / 256 + 1));
}

namespace {

// Grid (4, 3): the input index (i, 0) ignores j, so each block serves 3 consecutive steps.
struct repeat_kernel {
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile8x32> x, tp::gmem<float, 2, tile8x32> y) const {
    auto body = [](auto, auto xs, auto ys) { tp::map([](float v) { return v + 1; }, ys, xs); };
    tp::emit_pipeline(body, tp::grid(4, 3), tp::in_specs(tp::spec<tile8x32>([](auto i, auto) { return tp::idx(i, 0); })),
                      tp::out_specs(tp::spec<tile8x32>([](auto i, auto j) { return tp::idx(i, j); })))(k, x, y);
  }
};

}  // namespace

TEST(Pipeline, UnchangedInputBlockIsNotFetchedAgain) {
  if (test::on_gpu()) GTEST_SKIP() << "reads the interpreter's event log";
  const auto hx = host_values(32 * 32);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {32, 32}, hx);
  std::vector<tp::interpret::event> ev;
  tp::device dev = test::dev();
  dev.interpreter.events = &ev;
  auto y = tp::kernel(repeat_kernel{}, {.grid = {1}}, tp::out_type<float>(32, 96))(dev, x);
  const auto hy = y.to_host();
  for (int r = 0; r < 32; ++r)
    for (int c = 0; c < 96; ++c) ASSERT_EQ(hy[r * 96 + c], hx[r * 32 + c % 32] + 1);
  EXPECT_EQ(std::count_if(ev.begin(), ev.end(), [](auto& e) { return e.kind == tp::interpret::event::tma_load; }), 4);
}

namespace {

/// Two warpgroups run one pipeline together, each transforming half of every block.
struct two_thread_kernel {
  static constexpr int num_threads = 2;
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile8x32> x, tp::gmem<float, 2, tile8x32> y) const {
    const int wg = k.thread_index();
    auto body = [wg](auto, auto xs, auto ys) {
      // Each warpgroup writes the rows of its parity.
      for (int r = wg; r < 8; r += 2)
        for (int c = 0; c < 32; ++c) ys(r, c) = xs(r, c) * 3;
    };
    auto s = tp::spec<tile8x32>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline(body, tp::grid(steps), tp::in_specs(s), tp::out_specs(s), tp::max_concurrent_steps<2>)(k, x, y);
  }
};

}  // namespace

TEST(Pipeline, SharedByTwoWarpgroups) {
  if (test::on_gpu()) GTEST_SKIP() << "element loops are per thread on the GPU; covered by the matmul tests there";
  const int steps = 5;
  const auto hx = host_values(steps * 256);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {steps * 8, 32}, hx);
  auto y = tp::kernel(two_thread_kernel{steps}, {.grid = {1}}, tp::out_type<float>(steps * 8, 32))(test::dev(), x);
  const auto hy = y.to_host();
  for (int e = 0; e < steps * 256; ++e) ASSERT_EQ(hy[e], hx[e] * 3);
}

// ---- named axes: the grid's and the warpgroups' (Pallas' thread_name) -------------------

namespace {

/// Each warpgroup of each CTA writes one 8 x 32 block with a value made of its named indices.
struct thread_name_kernel {
  static constexpr int num_threads = 2;
  static constexpr const char* thread_name = "wg";
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile8x32> out) const {
    using view = tp::smem<float, tile8x32>;
    const view v = k.alloc_per_warpgroup<view>();
    const float value = 1000.0f * k.axis_index("row") + 100.0f * k.axis_index("col") + 10.0f * k.axis_index("wg") +
                        k.axis_size("wg") + 0.5f * k.axis_size("row");
    tp::map([value] { return value; }, v);
    tp::commit_smem();
    tp::copy_smem_to_gmem(v, out, tp::idx(k.axis_index("row") * k.axis_size("wg") + k.axis_index("wg"), k.axis_index("col")));
    tp::wait_smem_to_gmem<0>();
  }
};

}  // namespace

TEST(KernelEntry, NamedGridAndWarpgroupAxes) {
  const int rows = 3, cols = 2;
  const auto out = tp::kernel(thread_name_kernel{}, {.grid = {rows, cols}, .grid_names = {"row", "col"}},
                              tp::out_type<float>(rows * 2 * 8, cols * 32))(test::dev());
  const auto h = out.to_host();
  for (int r = 0; r < rows * 2 * 8; ++r)
    for (int c = 0; c < cols * 32; ++c) {
      const int row = r / 16, wg = (r / 8) % 2, col = c / 32;
      ASSERT_EQ(h[r * cols * 32 + c], 1000.0f * row + 100.0f * col + 10.0f * wg + 2 + 0.5f * rows) << r << ", " << c;
    }
  const std::string clash = test::error_of([&] {
    tp::kernel(thread_name_kernel{}, {.grid = {rows, cols}, .grid_names = {"wg", "col"}}, tp::out_type<float>(96, 64))(test::dev());
  });
  EXPECT_NE(clash.find("thread_name 'wg' is also the name of grid axis 0"), std::string::npos) << clash;
}

// ---- scratch scoped to a call (Pallas' run_scoped) ----------------------------------------

namespace {

/// Two rounds, each with its own scoped input and output buffers and barrier: warpgroup 0
/// loads block `round` of x, warpgroup 1 writes 2 x + round to block `round` of y. The
/// second round gets the first round's bytes again, and the allocator is back where it was.
struct scoped_kernel {
  static constexpr int num_threads = 2;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile8x32> x, tp::gmem<float, 2, tile8x32> y) const {
    using view = tp::smem<float, tile8x32>;
    const std::uint32_t before = k.smem_mark();
    const float* first_in = nullptr;
    for (int round = 0; round < 2; ++round) {
      const float* in_at = tp::run_scoped<view, view, tp::barriers<1>>(k, [&](view in, view out, tp::barriers<1> bars) {
        if (k.thread_index() == 0) tp::copy_gmem_to_smem(x, tp::idx(round, 0), in, bars[0]);
        tp::barrier_wait(bars[0], 0);  // a fresh barrier every round: its first phase
        if (k.thread_index() == 1) {
          tp::map([round](float v) { return 2 * v + round; }, out, in);
          tp::commit_smem();
          tp::copy_smem_to_gmem(out, y, tp::idx(round, 0));
          tp::wait_smem_to_gmem<0>();
        }
        return static_cast<const float*>(in.base);
      });
      if (round == 0) first_in = in_at;
      TP_REQUIRE(in_at == first_in, "round %d's scoped buffer is not the first round's", round);
      TP_REQUIRE(k.smem_mark() == before, "run_scoped left %u bytes allocated", k.smem_mark() - before);
    }
  }
};

}  // namespace

TEST(KernelEntry, RunScopedScratch) {
  const auto hx = test::random_values<float>(16 * 32);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {16, 32}, hx);
  const auto y = tp::kernel(scoped_kernel{}, {}, tp::out_type<float>(16, 32))(test::dev(), x).to_host();
  for (int i = 0; i < 16 * 32; ++i) ASSERT_EQ(y[i], 2 * hx[i] + i / (8 * 32)) << "element " << i;
}

// ---- an input updated in place (Pallas' input_output_aliases) ------------------------------

namespace {

/// x += 1 block by block: the output parameter is the input, aliased at the launch.
struct increment_kernel {
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile8x32> x, tp::gmem<float, 2, tile8x32> y) const {
    auto body = [](auto, auto xs, auto ys) { tp::map([](float v) { return v + 1; }, ys, xs); };
    auto s = tp::spec<tile8x32>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline(body, tp::grid(static_cast<int>(x.shape[0] / 8)), tp::in_specs(s), tp::out_specs(s),
                      tp::max_concurrent_steps<3>)(k, x, y);
  }
};

}  // namespace

TEST(KernelEntry, InputOutputAliasing) {
  const auto hx = test::random_values<float>(64 * 32);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {64, 32}, hx);
  const tp::tensor_view<float, 2> y =
      tp::kernel(increment_kernel{}, {}, tp::aliased<0>(tp::out_type<float>(64, 32)))(test::dev(), x);
  EXPECT_EQ(y.data, x.data());  // no copy: the input itself
  const auto hy = x.to_host();
  for (int i = 0; i < 64 * 32; ++i) ASSERT_EQ(hy[i], hx[i] + 1) << "element " << i;
  const std::string e = test::error_of(
      [&] { tp::kernel(increment_kernel{}, {}, tp::aliased<0>(tp::out_type<float>(64, 16)))(test::dev(), x); });
  EXPECT_NE(e.find("input 0 has shape (64, 32) but the output aliasing it is declared (64, 16)"), std::string::npos) << e;
}
