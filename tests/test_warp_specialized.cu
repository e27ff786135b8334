// emit_pipeline_warp_specialized: 1-3 compute warpgroups, any memory warpgroup position,
// step counts, stationary inputs, outputs written by several compute warpgroups and stored
// by the memory warpgroup, accumulation, chains of pipelines (start / steady / stop) with
// step counts that are not multiples of the slots and with delay_release, manual consumed
// barriers, manual ready barriers, compute_context with a carry, and its misuse; nested
// pipelines on the compute warpgroups; blocks multicast to clusters of CTAs, and along each
// axis of a 2 x 2 cluster; streamed inputs (affine maps, tp::streamed) waited for by one
// warpgroup (tp::waited_by) with the others behind it in a turn order, and the race without
// it; a stationary input with two slots in a chain.
#include "planted.hpp"
#include "test_util.hpp"

namespace {

constexpr int rows = 24;  // divisible by 1, 2 and 3 compute warpgroups, in 8-row multiples
using tile = tp::tile<tp::block<rows, 32>>;

std::vector<float> host_values(long long n) { return test::random_values<float>(static_cast<std::size_t>(n), test::fresh_seed(), -4, 4); }

/// y(block i) = 2 x(block i) + 1; compute warpgroup c writes rows [c R, (c + 1) R) of each block.
template <int NC, int MemIdx, int MCS, int Delay>
struct ws_map_kernel {
  static constexpr tp::warp_specialization<NC, 40, MemIdx> ws{};
  static constexpr int num_threads = ws.num_threads;
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> y) const {
    constexpr int R = rows / NC;
    const int c = ws.compute_index(k);
    auto body = [c](auto, auto xs, auto ys) {
      tp::map([](float v) { return 2 * v + 1; }, tp::rows<R>(ys, c * R), tp::rows<R>(xs, c * R));
    };
    auto s = tp::spec<tile>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline_warp_specialized(body, tp::grid(steps), tp::in_specs(s), tp::out_specs(s), ws,
                                       tp::max_concurrent_steps<MCS>, tp::delay_release<Delay>)(k, x, y);
  }
};

template <int NC, int MemIdx, int MCS, int Delay = 0>
void check_map(int steps) {
  const long long n = (steps > 0 ? steps : 1) * rows * 32LL;
  const auto hx = host_values(n);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {n / 32, 32}, hx);
  auto y = tp::tensor<float, 2>::from_host(test::dev(), {n / 32, 32}, std::vector<float>(n, -7.0f));
  tp::kernel(ws_map_kernel<NC, MemIdx, MCS, Delay>{steps}, {})(test::dev(), x, y);
  const auto hy = y.to_host();
  for (long long e = 0; e < n; ++e)
    ASSERT_EQ(hy[e], e < steps * rows * 32LL ? 2 * hx[e] + 1 : -7.0f)
        << "element " << e << ", " << NC << " compute warpgroups, memory warpgroup " << MemIdx << ", " << steps << " steps";
}

}  // namespace

TEST(WarpSpecialized, ComputeWarpgroupsAndMemoryPosition) {
  check_map<1, 1, 2>(7);
  check_map<2, 2, 3>(9);
  check_map<3, 3, 2>(8);
  check_map<2, 0, 3>(9);  // memory warpgroup first
  check_map<3, 1, 4>(6);  // memory warpgroup in the middle
}

TEST(WarpSpecialized, StepCounts) {
  for (int steps : {0, 1, 3, 4, 37}) check_map<2, 2, 3>(steps);
  check_map<2, 2, 4, 1>(37);
  check_map<1, 1, 4, 3>(5);
}

namespace {

/// out = sum over steps of (x block + z): z is stationary (fetched once, released once) and
/// out is one block for all steps (accumulated by both compute warpgroups, stored once by
/// the memory warpgroup).
struct stationary_kernel {
  static constexpr tp::warp_specialization<2, 40> ws{};
  static constexpr int num_threads = ws.num_threads;
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> z,
                        tp::gmem<float, 2, tile> out) const {
    const int c = ws.compute_index(k);
    auto body = [c](auto at, auto xs, auto zs, auto os) {
      auto mine = [c](auto v) { return tp::rows<12>(v, 12 * c); };
      if (at[0] == 0) tp::map([](float a, float b) { return a + b; }, mine(os), mine(xs), mine(zs));
      else tp::map([](float o, float a, float b) { return o + a + b; }, mine(os), mine(os), mine(xs), mine(zs));
    };
    auto zero = [](auto) { return tp::idx(0, 0); };
    tp::emit_pipeline_warp_specialized(body, tp::grid(steps),
                                       tp::in_specs(tp::spec<tile>([](auto i) { return tp::idx(i, 0); }), tp::spec<tile>(zero)),
                                       tp::out_specs(tp::spec<tile>(zero)), ws, tp::max_concurrent_steps<3>)(k, x, z, out);
  }
};

}  // namespace

TEST(WarpSpecialized, StationaryInputAndAccumulatedOutput) {
  const int steps = 11;
  const auto hx = host_values(steps * rows * 32), hz = host_values(rows * 32);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {steps * rows, 32}, hx);
  auto z = tp::tensor<float, 2>::from_host(test::dev(), {rows, 32}, hz);
  std::vector<tp::interpret::event> ev;
  tp::device dev = test::dev();
  dev.interpreter.events = &ev;
  auto out = tp::kernel(stationary_kernel{steps}, {}, tp::out_type<float>(rows, 32))(dev, x, z);
  const auto ho = out.to_host();
  for (int e = 0; e < rows * 32; ++e) {
    double want = 0;
    for (int s = 0; s < steps; ++s) want += hx[s * rows * 32 + e] + hz[e];
    ASSERT_NEAR(ho[e], want, 1e-3) << e;
  }
  if (!test::on_gpu()) {
    int loads = 0, stores = 0;
    for (auto& e : ev) loads += e.kind == tp::interpret::event::tma_load, stores += e.kind == tp::interpret::event::tma_store;
    EXPECT_EQ(loads, steps + 1);
    EXPECT_EQ(stores, 1);
  }
}

namespace {

/// A chain of `n` pipelines on one hoisted allocation: pipeline p maps band p of the rows,
/// with lengths that are not multiples of the slots.
template <int Delay>
struct chain_kernel {
  static constexpr tp::warp_specialization<2, 40> ws{};
  static constexpr int num_threads = ws.num_threads;
  int n;
  TP_HD static int steps_of(int p) { return 1 + (p * 5) % 7; }  // 1, 6, 4, 2, 7
  TP_HD static int first_of(int p) {
    int f = 0;
    for (int q = 0; q < p; ++q) f += steps_of(q);
    return f;
  }
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> y) const {
    const int c = ws.compute_index(k);
    auto make = [&](int p) {
      const int first = first_of(p);
      const float scale = static_cast<float>(p + 2);
      auto body = [c, scale](auto, auto xs, auto ys) {
        tp::map([scale](float v) { return v * scale; }, tp::rows<12>(ys, 12 * c), tp::rows<12>(xs, 12 * c));
      };
      auto s = tp::spec<tile>([first](auto i) { return tp::idx(first + i, 0); });
      return tp::emit_pipeline_warp_specialized(body, tp::grid(steps_of(p)), tp::in_specs(s), tp::out_specs(s),
                                                ws, tp::max_concurrent_steps<3>, tp::delay_release<Delay>);
    };
    auto alloc = make(0).get_allocations(k, x, y);
    for (int p = 0; p < n; ++p) {
      const auto state = n == 1 ? tp::pipeline_state::only
                         : p == 0 ? tp::pipeline_state::start
                         : p == n - 1 ? tp::pipeline_state::stop
                                      : tp::pipeline_state::steady;
      make(p)(k, alloc, state, x, y);
    }
  }
};

template <int Delay>
void check_chain(int n) {
  const int steps = chain_kernel<Delay>::first_of(n);
  const auto hx = host_values(steps * rows * 32);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {steps * rows, 32}, hx);
  auto y = tp::kernel(chain_kernel<Delay>{n}, {}, tp::out_type<float>(steps * rows, 32))(test::dev(), x);
  const auto hy = y.to_host();
  for (int p = 0, e = 0; p < n; ++p)
    for (int s = 0; s < chain_kernel<Delay>::steps_of(p); ++s)
      for (int i = 0; i < rows * 32; ++i, ++e) ASSERT_EQ(hy[e], hx[e] * (p + 2)) << "pipeline " << p << " of " << n;
}

}  // namespace

TEST(WarpSpecialized, ChainsOfPipelines) {
  for (int n = 1; n <= 5; ++n) check_chain<0>(n);
  check_chain<1>(4);
  check_chain<2>(5);
}

namespace {

/// A persistent loop over `items` blocks on more CTAs than items: CTA c maps blocks c,
/// c + CTAs, ...; the CTAs past the last item run the loop zero times. Their memory
/// warpgroup must not take its registers back before the compute warpgroups took theirs
/// (setmaxnreg draws on one pool per CTA; the interpreter models it): a hang on the GPU.
struct idle_ctas_kernel {
  static constexpr tp::warp_specialization<2, 40> ws{};
  static constexpr int num_threads = ws.num_threads;
  int items;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> y) const {
    const int c = ws.compute_index(k);
    auto pipeline_of = [&](int item) {
      auto body = [c](auto, auto xs, auto ys) {
        tp::map([](float v) { return 2.0f * v; }, tp::rows<12>(ys, 12 * c), tp::rows<12>(xs, 12 * c));
      };
      auto s = tp::spec<tile>([item](auto) { return tp::idx(item, 0); });
      return tp::emit_pipeline_warp_specialized(body, tp::grid(1), tp::in_specs(s), tp::out_specs(s), ws,
                                                tp::max_concurrent_steps<2>);
    };
    auto alloc = pipeline_of(0).get_allocations(k, x, y);
    tp::warp_specialized_for(ws, k, k.axis_index(0), items, k.axis_size(0),
                             [&](int item, tp::pipeline_state state, auto role) {
                               pipeline_of(item)(k, alloc, state, role, x, y);
                             });
  }
};

}  // namespace

TEST(WarpSpecialized, PersistentLoopOnCtasWithoutItems) {
  for (const int items : {1, 3}) {
    const auto hx = host_values(items * rows * 32);
    auto x = tp::tensor<float, 2>::from_host(test::dev(), {items * rows, 32}, hx);
    auto y = tp::kernel(idle_ctas_kernel{items}, {.grid = {4}}, tp::out_type<float>(items * rows, 32))(test::dev(), x);
    const auto hy = y.to_host();
    for (int e = 0; e < items * rows * 32; ++e) ASSERT_EQ(hy[e], 2.0f * hx[e]) << items << " items, element " << e;
  }
}

namespace {

/// The body releases its input itself (manual consumed barriers), and a compute_context
/// owns a carry that counts the steps.
struct manual_kernel {
  static constexpr tp::warp_specialization<2, 40> ws{};
  static constexpr int num_threads = ws.num_threads;
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> y) const {
    const int c = ws.compute_index(k);
    const int n = steps;
    auto body = [c](auto, auto xs, auto ys, tp::consumed_token done, int count) {
      const float f = static_cast<float>(count + 1);
      tp::map([f](float v) { return v * f; }, tp::rows<12>(ys, 12 * c), tp::rows<12>(xs, 12 * c));
      done.arrive();
      return count + 1;
    };
    auto context = tp::compute_context([n](auto pipeline) {
      const int final_count = pipeline(0);
      TP_REQUIRE(final_count == n, "the carry counted %d steps of %d", final_count, n);
    });
    auto s = tp::spec<tile>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline_warp_specialized(body, tp::grid(steps), tp::in_specs(s), tp::out_specs(s), ws,
                                       tp::max_concurrent_steps<2>, tp::manual_consumed_barriers, context)(k, x, y);
  }
};

/// manual_consumed_barriers with delay_release<1>: y(block s) = x(block s) + x(block s - 1).
/// The body keeps the previous step's view and token in its carry, reads that block once
/// more and only then releases it; the last step releases its own block too. The memory
/// side refills a slot one step later than without the delay, so no slot is overwritten
/// while the late reader still uses it (the interpreter's race detector would report it).
struct held_block {
  tp::smem<float, tile> view;
  tp::consumed_token token;
  int step;
};

struct manual_delayed_kernel {
  static constexpr tp::warp_specialization<2, 40> ws{};
  static constexpr int num_threads = ws.num_threads;
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> y) const {
    const int c = ws.compute_index(k);
    const int n = steps;
    auto body = [c, n](auto, auto xs, auto ys, tp::consumed_token done, held_block prev) {
      const auto mine = tp::rows<12>(ys, 12 * c);
      if (prev.step == 0) {
        tp::map([](float v) { return v; }, mine, tp::rows<12>(xs, 12 * c));
      } else {
        tp::map([](float v, float p) { return v + p; }, mine, tp::rows<12>(xs, 12 * c), tp::rows<12>(prev.view, 12 * c));
        prev.token.arrive();  // one step late: the block was read again above
      }
      if (prev.step + 1 == n) done.arrive();  // nothing comes after the last step
      return held_block{xs, done, prev.step + 1};
    };
    auto context = tp::compute_context([](auto pipeline) { pipeline(held_block{{}, {}, 0}); });
    auto s = tp::spec<tile>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline_warp_specialized(body, tp::grid(steps), tp::in_specs(s), tp::out_specs(s), ws,
                                       tp::max_concurrent_steps<2>, tp::delay_release<1>, tp::manual_consumed_barriers,
                                       context)(k, x, y);
  }
};

/// Operands left in global memory (gmem_spec) beside pipelined ones: the body reads a
/// per-step scalar from one GMEM input, and each compute warpgroup copies its rows of the
/// input block straight to a GMEM output with sync_copy. y(block i) = x(block i) + bias[i],
/// z = x.
struct gmem_operands_kernel {
  static constexpr tp::warp_specialization<2, 40> ws{};
  static constexpr int num_threads = ws.num_threads;
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 1> bias,
                        tp::gmem<float, 2, tile> y, tp::gmem<float, 2> z) const {
    const int c = ws.compute_index(k);
    auto body = [c](tp::index<1> at, auto xs, auto bias_gmem, auto ys, auto z_gmem) {
      const float b = bias_gmem.data[at[0]];
      tp::map([b](float v) { return v + b; }, tp::rows<12>(ys, 12 * c), tp::rows<12>(xs, 12 * c));
      tp::sync_copy(tp::rows<12>(xs, 12 * c), z_gmem.at(tp::ds{at[0] * rows + 12LL * c, 12}, tp::ds{0, 32}));
    };
    auto s = tp::spec<tile>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline_warp_specialized(body, tp::grid(steps), tp::in_specs(s, tp::gmem_spec),
                                       tp::out_specs(s, tp::gmem_spec), ws, tp::max_concurrent_steps<2>)(k, x, bias, y, z);
  }
};

/// Manual ready barriers: the pipeline hands the body z's block before it landed; the body
/// computes 2 x first and waits for z only then (as attention waits for V after Q K^T).
/// z's block changes every other step, and the body reads it only at steps i with
/// i % 6 in {1, 2, 3}: block 1 is waited for at both of its steps (the second wait passes
/// at once), blocks 0 and 3 only at their second step, block 2 never (the pipeline waits
/// for it before its slot is refilled). y(block i) = 2 x(block i) + (read ? z(block i / 2) : 0).
TP_HD constexpr bool manual_ready_reads(int step) { return step % 6 >= 1 && step % 6 <= 3; }

struct manual_ready_kernel {
  static constexpr tp::warp_specialization<2, 40> ws{};
  static constexpr int num_threads = ws.num_threads;
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> z,
                        tp::gmem<float, 2, tile> y) const {
    const int c = ws.compute_index(k);
    auto body = [c](tp::index<1> at, auto xs, tp::pending_block<tp::smem<float, tile>> zs, auto ys) {
      const auto mine = tp::rows<12>(ys, 12 * c);
      tp::map([](float v) { return 2 * v; }, mine, tp::rows<12>(xs, 12 * c));
      if (manual_ready_reads(at[0])) tp::map([](float o, float v) { return o + v; }, mine, mine, tp::rows<12>(zs.wait(), 12 * c));
    };
    tp::emit_pipeline_warp_specialized(
        body, tp::grid(steps),
        tp::in_specs(tp::spec<tile>([](auto i) { return tp::idx(i, 0); }),
                     tp::spec<tile>([](auto i) { return tp::idx(i / 2, 0); }, tp::manual_ready)),
        tp::out_specs(tp::spec<tile>([](auto i) { return tp::idx(i, 0); })), ws, tp::max_concurrent_steps<2>)(k, x, z, y);
  }
};

/// Nested pipelines on the compute warpgroups: the outer pipeline passes w and z through in
/// GMEM, and its body runs an emit_pipeline over band i of them, collective over the two
/// compute warpgroups (the memory warpgroup, first or last, keeps feeding the outer
/// pipeline meanwhile). The band's sum goes through run_scoped scratch, also collective
/// over the compute warpgroups. y(block i) = x(block i) + sum_j w(i, j), z(i, j) = 2 w(i, j).
template <int MemIdx>
struct nested_kernel {
  static constexpr tp::warp_specialization<2, 40, MemIdx> ws{};
  static constexpr int num_threads = ws.num_threads;
  int steps, inner_steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> w,
                        tp::gmem<float, 2, tile> y, tp::gmem<float, 2, tile> z) const {
    const int c = ws.compute_index(k), inner = inner_steps;
    auto mine = [c](auto v) { return tp::rows<12>(v, 12 * c); };
    auto body = [&k, mine, inner](tp::index<1> at, auto xs, auto wg, auto ys, auto zg) {
      const int i = at[0];
      tp::run_scoped<tp::smem<float, tile>>(k, [&](auto sum) {
        tp::map([](float v) { return v; }, mine(sum), mine(xs));
        auto add = [&](auto, auto ws_block, auto zs) {
          tp::map([](float s, float v) { return s + v; }, mine(sum), mine(sum), mine(ws_block));
          tp::map([](float v) { return 2 * v; }, mine(zs), mine(ws_block));
        };
        auto band = tp::spec<tile>([i](auto j) { return tp::idx(i, j); });
        tp::emit_pipeline(add, tp::grid(inner), tp::in_specs(band), tp::out_specs(band), tp::max_concurrent_steps<2>)(k, wg, zg);
        tp::map([](float v) { return v; }, mine(ys), mine(sum));
      });
    };
    auto s = tp::spec<tile>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline_warp_specialized(body, tp::grid(steps), tp::in_specs(s, tp::gmem_spec), tp::out_specs(s, tp::gmem_spec),
                                       ws, tp::max_concurrent_steps<2>)(k, x, w, y, z);
  }
};

template <int MemIdx>
void check_nested(int steps, int inner) {
  const auto hx = host_values(steps * rows * 32), hw = host_values(steps * rows * inner * 32LL);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {steps * rows, 32}, hx);
  auto w = tp::tensor<float, 2>::from_host(test::dev(), {steps * rows, inner * 32}, hw);
  const auto [y, z] = tp::kernel(nested_kernel<MemIdx>{steps, inner}, {}, tp::out_type<float>(steps * rows, 32),
                                 tp::out_type<float>(steps * rows, inner * 32))(test::dev(), x, w);
  const auto hy = y.to_host(), hz = z.to_host();
  std::vector<double> ry(hx.size()), rz(hw.size());
  for (int r = 0; r < steps * rows; ++r)
    for (int col = 0; col < 32; ++col) {
      double sum = hx[r * 32 + col];
      for (int j = 0; j < inner; ++j) sum += hw[(r * inner + j) * 32LL + col];
      ry[r * 32 + col] = sum;
    }
  for (std::size_t e = 0; e < hw.size(); ++e) rz[e] = 2.0 * hw[e];
  EXPECT_LT(test::rel_error(hy, ry), 1e-6) << "memory warpgroup " << MemIdx << ", " << steps << " x " << inner << " steps";
  EXPECT_EQ(test::rel_error(hz, rz), 0.0) << "memory warpgroup " << MemIdx;
}

/// A warp-specialised pipeline nested in another's body: its memory warpgroup would be the
/// outer one's, which is busy; reported.
struct nested_ws_kernel {
  static constexpr tp::warp_specialization<1, 40> ws{};
  static constexpr int num_threads = ws.num_threads;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> y) const {
    auto s = tp::spec<tile>([](auto i) { return tp::idx(i, 0); });
    auto copy = [](auto, auto xs, auto ys) { tp::map([](float v) { return v; }, ys, xs); };
    auto body = [&](auto, auto xg, auto yg) {
      tp::emit_pipeline_warp_specialized(copy, tp::grid(1), tp::in_specs(s), tp::out_specs(s), ws)(k, xg, yg);
    };
    tp::emit_pipeline_warp_specialized(body, tp::grid(1), tp::in_specs(tp::gmem_spec), tp::out_specs(tp::gmem_spec), ws)(k, x, y);
  }
};

/// A compute_context that calls the pipeline twice: an error.
struct twice_kernel {
  static constexpr int num_threads = 2;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> y) const {
    auto body = [](auto, auto xs, auto ys, int c) {
      tp::map([](float v) { return v; }, ys, xs);
      return c;
    };
    auto context = tp::compute_context([](auto pipeline) {
      pipeline(0);
      pipeline(0);
    });
    auto s = tp::spec<tile>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline_warp_specialized(body, tp::grid(1), tp::in_specs(s), tp::out_specs(s), tp::num_compute_wgs<1>,
                                       tp::memory_registers<40>, context)(k, x, y);
  }
};

/// A pipeline for 2 compute warpgroups in a kernel of 2 warpgroups: an error.
struct too_few_warpgroups_kernel {
  static constexpr int num_threads = 2;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> y) const {
    auto s = tp::spec<tile>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline_warp_specialized([](auto, auto, auto) {}, tp::grid(1), tp::in_specs(s), tp::out_specs(s),
                                       tp::num_compute_wgs<2>, tp::memory_registers<40>)(k, x, y);
  }
};

}  // namespace

TEST(WarpSpecialized, ManualConsumedBarriersAndComputeContext) {
  const int steps = 9;
  const auto hx = host_values(steps * rows * 32);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {steps * rows, 32}, hx);
  auto y = tp::kernel(manual_kernel{steps}, {}, tp::out_type<float>(steps * rows, 32))(test::dev(), x);
  const auto hy = y.to_host();
  for (int e = 0; e < steps * rows * 32; ++e) ASSERT_EQ(hy[e], hx[e] * static_cast<float>(e / (rows * 32) + 1));
}

TEST(WarpSpecialized, OperandsLeftInGlobalMemory) {
  const int steps = 5;
  const auto hx = host_values(steps * rows * 32);
  const auto hb = host_values(steps);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {steps * rows, 32}, hx);
  auto bias = tp::tensor<float, 1>::from_host(test::dev(), {steps}, hb);
  const auto [y, z] = tp::kernel(gmem_operands_kernel{steps}, {}, tp::out_type<float>(steps * rows, 32),
                                 tp::out_type<float>(steps * rows, 32))(test::dev(), x, bias);
  const auto hy = y.to_host(), hz = z.to_host();
  std::vector<double> ry(hx.size()), rz(hx.size());
  for (int e = 0; e < steps * rows * 32; ++e) ry[e] = double(hx[e]) + hb[e / (rows * 32)], rz[e] = hx[e];
  EXPECT_LT(test::rel_error(hy, ry), 1e-6);
  EXPECT_EQ(test::rel_error(hz, rz), 0.0);
}

TEST(WarpSpecialized, NestedPipelinesRunOnTheComputeWarpgroups) {
  check_nested<2>(3, 5);
  check_nested<0>(4, 1);  // memory warpgroup first: the nested pipeline's leader is warpgroup 1
}

TEST(WarpSpecialized, ManualReadyBarriersWaitedForInTheBody) {
  for (int steps : {2, 6, 11}) {
    const int z_blocks = (steps + 1) / 2;
    const auto hx = host_values(steps * rows * 32), hz = host_values(z_blocks * rows * 32);
    auto x = tp::tensor<float, 2>::from_host(test::dev(), {steps * rows, 32}, hx);
    auto z = tp::tensor<float, 2>::from_host(test::dev(), {z_blocks * rows, 32}, hz);
    const auto hy = tp::kernel(manual_ready_kernel{steps}, {}, tp::out_type<float>(steps * rows, 32))(test::dev(), x, z).to_host();
    std::vector<double> ref(hx.size());
    for (int e = 0; e < steps * rows * 32; ++e) {
      const int step = e / (rows * 32);
      ref[e] = 2.0 * hx[e] + (manual_ready_reads(step) ? hz[(step / 2) * rows * 32 + e % (rows * 32)] : 0.0);
    }
    EXPECT_LT(test::rel_error(hy, ref), 1e-6) << steps << " steps";
  }
}

TEST(WarpSpecialized, ManualConsumedBarriersReleasedOneStepLate) {
  for (int steps : {1, 2, 7}) {
    const auto hx = host_values(steps * rows * 32);
    auto x = tp::tensor<float, 2>::from_host(test::dev(), {steps * rows, 32}, hx);
    const auto hy = tp::kernel(manual_delayed_kernel{steps}, {}, tp::out_type<float>(steps * rows, 32))(test::dev(), x).to_host();
    std::vector<double> ref(hx.size());
    for (int e = 0; e < steps * rows * 32; ++e) ref[e] = double(hx[e]) + (e >= rows * 32 ? hx[e - rows * 32] : 0.0);
    EXPECT_LT(test::rel_error(hy, ref), 1e-6) << steps << " steps";
  }
}

namespace {

/// y = x + z, block by block, in clusters of C CTAs: the x blocks are the same for all CTAs
/// of a cluster and multicast (each CTA loads 32 / C of its 32 rows for all), z and y are
/// each CTA's own.
template <int C>
using mc_tile = tp::tile<tp::block<32, 32>, tp::swizzle<0>, tp::box_rows<32 / C>>;

template <int C>
struct multicast_kernel {
  static constexpr tp::warp_specialization<2, 40> ws{};
  static constexpr int num_threads = ws.num_threads;
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, mc_tile<C>> x, tp::gmem<float, 2, mc_tile<C>> z,
                        tp::gmem<float, 2, mc_tile<C>> y) const {
    const int c = ws.compute_index(k), cta = k.axis_index(0), cluster = cta / C, n = steps;
    auto body = [c](auto, auto xs, auto zs, auto ys) {
      tp::map([](float a, float b) { return a + b; }, tp::rows<16>(ys, 16 * c), tp::rows<16>(xs, 16 * c),
              tp::rows<16>(zs, 16 * c));
    };
    auto shared = [=](auto i) { return tp::idx(cluster * n + i, 0); };
    auto own = [=](auto i) { return tp::idx(cta * n + i, 0); };
    tp::emit_pipeline_warp_specialized(body, tp::grid(steps),
                                       tp::in_specs(tp::spec<mc_tile<C>>(shared, tp::multicast<C>), tp::spec<mc_tile<C>>(own)),
                                       tp::out_specs(tp::spec<mc_tile<C>>(own)), ws, tp::max_concurrent_steps<3>)(k, x, z, y);
    k.cluster_sync();
  }
};

template <int C>
void check_multicast(int clusters, int steps, int launch_cluster = C) {
  const long long xr = clusters * steps * 32LL, zr = clusters * C * steps * 32LL;
  const auto hx = host_values(xr * 32), hz = host_values(zr * 32);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {xr, 32}, hx);
  auto z = tp::tensor<float, 2>::from_host(test::dev(), {zr, 32}, hz);
  const tp::launch_config cfg{.grid = {clusters * C}, .cluster = launch_cluster};
  const auto y = tp::kernel(multicast_kernel<C>{steps}, cfg, tp::out_type<float>(zr, 32))(test::dev(), x, z).to_host();
  for (long long e = 0; e < zr * 32; ++e) {
    const long long cta = e / (steps * 32 * 32), within = e % (steps * 32 * 32);
    ASSERT_EQ(y[e], hx[(cta / C) * steps * 32 * 32 + within] + hz[e]) << "element " << e << ", clusters of " << C;
  }
}

}  // namespace

TEST(WarpSpecialized, MulticastToClusters) {
  check_multicast<2>(3, 5);  // more steps than slots
  check_multicast<2>(1, 1);
  check_multicast<4>(2, 7);
}

namespace {

/// Clusters of 2 x 2 CTAs over a 2-D grid, with a block shared along each axis (as a
/// matmul shares A along the tile columns and B along the tile rows): CTA (m, n) at step i
/// reads x block m (the same for both CTAs of its cluster row: multicast along axis 1),
/// z block n (multicast along axis 0) and writes its own y block. y = x + z.
struct multicast_2d_kernel {
  static constexpr tp::warp_specialization<2, 40> ws{};
  static constexpr int num_threads = ws.num_threads;
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, mc_tile<2>> x, tp::gmem<float, 2, mc_tile<2>> z,
                        tp::gmem<float, 2, mc_tile<2>> y) const {
    const int c = ws.compute_index(k), m = k.axis_index(0), n = k.axis_index(1), cols = k.axis_size(1), len = steps;
    auto body = [c](auto, auto xs, auto zs, auto ys) {
      tp::map([](float a, float b) { return a + b; }, tp::rows<16>(ys, 16 * c), tp::rows<16>(xs, 16 * c),
              tp::rows<16>(zs, 16 * c));
    };
    tp::emit_pipeline_warp_specialized(
        body, tp::grid(steps),
        tp::in_specs(tp::spec<mc_tile<2>>([=](auto i) { return tp::idx(m * len + i, 0); }, tp::multicast<2, 1>),
                     tp::spec<mc_tile<2>>([=](auto i) { return tp::idx(n * len + i, 0); }, tp::multicast<2, 0>)),
        tp::out_specs(tp::spec<mc_tile<2>>([=](auto i) { return tp::idx((m * cols + n) * len + i, 0); })), ws,
        tp::max_concurrent_steps<3>)(k, x, z, y);
    k.cluster_sync();
  }
};

}  // namespace

TEST(WarpSpecialized, MulticastAlongEachAxisOfATwoDimensionalCluster) {
  const int gm = 4, gn = 2, steps = 5, block = 32 * 32;
  const auto hx = host_values(gm * steps * block), hz = host_values(gn * steps * block);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {gm * steps * 32LL, 32}, hx);
  auto z = tp::tensor<float, 2>::from_host(test::dev(), {gn * steps * 32LL, 32}, hz);
  const tp::launch_config cfg{.grid = {gm, gn}, .cluster_shape = {2, 2}};
  const auto y = tp::kernel(multicast_2d_kernel{steps}, cfg, tp::out_type<float>(gm * gn * steps * 32LL, 32))(test::dev(), x, z)
                     .to_host();
  long long wrong = 0;
  for (int m = 0; m < gm; ++m)
    for (int n = 0; n < gn; ++n)
      for (int e = 0; e < steps * block; ++e)
        wrong += y[(m * gn + n) * steps * block + e] != hx[m * steps * block + e] + hz[n * steps * block + e];
  EXPECT_EQ(wrong, 0);
  if (test::on_gpu()) return;  // device-side checks trap on the GPU; the interpreter reports them
  const std::string e = test::error_of([&] {
    tp::kernel(multicast_2d_kernel{steps}, {.grid = {gm, gn}, .cluster_shape = {1, 2}}, tp::out_type<float>(gm * gn * steps * 32LL, 32))(
        test::dev(), x, z);
  });
  EXPECT_NE(e.find("input 1 is multicast<2, 0> but the launch's clusters span 1 CTAs along grid axis 0"), std::string::npos) << e;
}

TEST(WarpSpecialized, MulticastNeedsAMatchingCluster) {
  if (test::on_gpu()) GTEST_SKIP() << "device-side checks trap on the GPU; the interpreter reports them";
  EXPECT_NE(test::error_of([] { check_multicast<2>(2, 3, 1); })
                .find("the pipeline has multicast<2> specs but the launch's clusters have 1 CTAs"),
            std::string::npos);
  EXPECT_NE(test::error_of([] { check_multicast<2>(2, 3, 4); }).find("launch's clusters have 4 CTAs"), std::string::npos);
}

TEST(WarpSpecialized, BadConfigurationsAreReported) {
  if (test::on_gpu()) GTEST_SKIP() << "device-side checks trap on the GPU; the interpreter reports them";
  tp::tensor<float, 2> x(test::dev(), {rows, 32}), y(test::dev(), {rows, 32});
  try {
    tp::kernel(twice_kernel{}, {})(test::dev(), x, y);
    ADD_FAILURE() << "no error";
  } catch (const tp::error& e) {
    EXPECT_NE(std::string(e.what()).find("compute_context must call the pipeline exactly once; it called it 2 times"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NE(test::error_of([&] { tp::kernel(nested_ws_kernel{}, {})(test::dev(), x, y); })
                .find("emit_pipeline_warp_specialized is called inside the body (or compute_context) of another "
                      "warp-specialised pipeline"),
            std::string::npos);
  try {
    tp::kernel(too_few_warpgroups_kernel{}, {})(test::dev(), x, y);
    ADD_FAILURE() << "no error";
  } catch (const tp::error& e) {
    EXPECT_NE(std::string(e.what()).find("needs num_compute_wgs + 1 = 3 warpgroups, the kernel has 2"), std::string::npos)
        << e.what();
  }
}

namespace {

// Index maps the pipelines take without comparing indices: affine in the step of a one-axis
// grid (a new block every step), or declared tp::streamed; and those they compare.
constexpr auto affine_map = [](auto i) { return tp::idx(3 * i - 1, 0); };
constexpr auto halved_map = [](auto i) { return tp::idx(i / 2, 0); };
constexpr auto clamped_map = [](auto i) { return tp::idx(tp::min(i, 4), 0); };
static_assert(tp::affine_map_v<decltype(affine_map), 1> && !tp::affine_map_v<decltype(halved_map), 1> &&
              !tp::affine_map_v<decltype(clamped_map), 1>);
static_assert(decltype(tp::spec<tile>(affine_map))::streams<1>() && !decltype(tp::spec<tile>(halved_map))::streams<1>() &&
              decltype(tp::spec<tile>(halved_map, tp::streamed))::streams<1>() &&
              !decltype(tp::spec<tile>([](auto i, auto j) { return tp::idx(i + j, 0); }))::streams<2>() &&
              !decltype(tp::spec<tile>([](auto) { return tp::idx(0, 0); }))::streams<1>());

/// y(block i) = x(block i) * z(block i / 2): x streams by its affine map, z repeats each block
/// for two steps but is tp::streamed (fetched again at the second); only compute warpgroup 0
/// waits for their blocks (tp::waited_by<0>), and warpgroup 1 reads them behind it in a turn
/// order — or, with TurnOrder false, without one: the race the interpreter must report.
template <bool TurnOrder>
struct waited_by_kernel {
  static constexpr tp::warp_specialization<2, 40> ws{};
  static constexpr int num_threads = ws.num_threads;
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> z,
                        tp::gmem<float, 2, tile> y) const {
    const int c = ws.compute_index(k);
    const tp::turn_order<2> turns{c};
    auto body = [&, c](auto, auto xs, auto zs, auto ys) {
      auto work = [&] {
        tp::map([](float a, float b) { return a * b; }, tp::rows<12>(ys, 12 * c), tp::rows<12>(xs, 12 * c),
                tp::rows<12>(zs, 12 * c));
      };
      if constexpr (TurnOrder) turns.take(work);
      else work();
    };
    auto context = tp::compute_context([&](auto pipeline) {
      if constexpr (TurnOrder) turns.start();
      pipeline();
      if constexpr (TurnOrder) turns.finish();
    });
    tp::emit_pipeline_warp_specialized(
        body, tp::grid(steps),
        tp::in_specs(tp::spec<tile>([](auto i) { return tp::idx(i, 0); }, tp::waited_by<0>),
                     tp::spec<tile>([](auto i) { return tp::idx(i / 2, 0); }, tp::streamed, tp::waited_by<0>)),
        tp::out_specs(tp::spec<tile>([](auto i) { return tp::idx(i, 0); })), ws, tp::max_concurrent_steps<2>,
        context)(k, x, z, y);
  }
};

template <bool TurnOrder>
std::string run_waited_by(const tp::device& dev, int steps, std::vector<tp::interpret::event>* events = nullptr) {
  const auto hx = host_values(steps * rows * 32LL), hz = host_values(((steps + 1) / 2) * rows * 32LL);
  auto x = tp::tensor<float, 2>::from_host(dev, {steps * rows, 32}, hx);
  auto z = tp::tensor<float, 2>::from_host(dev, {((steps + 1) / 2) * rows, 32}, hz);
  tp::device d = dev;
  d.interpreter.events = events;
  return test::error_of([&] {
    const auto hy = tp::kernel(waited_by_kernel<TurnOrder>{steps}, {}, tp::out_type<float>(steps * rows, 32))(d, x, z).to_host();
    for (long long e = 0; e < steps * rows * 32LL; ++e) {
      const long long block = e / (rows * 32), within = e % (rows * 32);
      if (hy[e] != hx[e] * hz[(block / 2) * rows * 32 + within]) throw tp::error("wrong value at element " + std::to_string(e));
    }
  });
}

/// z's map ignores the step; with buffered<2> its block of the next item is fetched while this
/// item's runs (a chain of pipelines in a persistent loop). y(item, step) = x(item, step) + z(item).
struct buffered_stationary_kernel {
  static constexpr tp::warp_specialization<2, 40> ws{};
  static constexpr int num_threads = ws.num_threads;
  int items, steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> z,
                        tp::gmem<float, 2, tile> y) const {
    const int c = ws.compute_index(k), n = steps;
    auto pipeline_of = [&, c, n](int item) {
      auto body = [c](auto, auto xs, auto zs, auto ys) {
        tp::map([](float a, float b) { return a + b; }, tp::rows<12>(ys, 12 * c), tp::rows<12>(xs, 12 * c),
                tp::rows<12>(zs, 12 * c));
      };
      auto xy = tp::spec<tile>([item, n](auto s) { return tp::idx(item * n + s, 0); });
      return tp::emit_pipeline_warp_specialized(
          body, tp::grid(steps), tp::in_specs(xy, tp::spec<tile>([item](auto) { return tp::idx(item, 0); }, tp::buffered<2>)),
          tp::out_specs(xy), ws, tp::max_concurrent_steps<2>);
    };
    auto alloc = pipeline_of(0).get_allocations(k, x, z, y);
    tp::warp_specialized_for(ws, k, k.axis_index(0), items, k.axis_size(0),
                             [&](int item, tp::pipeline_state state, auto role) {
                               pipeline_of(item)(k, alloc, state, role, x, z, y);
                             });
  }
};

}  // namespace

TEST(WarpSpecialized, StreamedInputsWaitedByOneWarpgroupBehindATurnOrder) {
  for (int steps : {1, 2, 5, 8}) EXPECT_EQ(run_waited_by<true>(test::dev(), steps), "") << steps << " steps";
  if (test::on_gpu()) return;
  // Both inputs are fetched at every step, z's repeated blocks included.
  std::vector<tp::interpret::event> ev;
  ASSERT_EQ(run_waited_by<true>(test::dev(), 6, &ev), "");
  EXPECT_EQ(std::count_if(ev.begin(), ev.end(), [](auto& e) { return e.kind == tp::interpret::event::tma_load; }), 12);
  for (test::copy_mode m : test::all_copy_modes) EXPECT_EQ(run_waited_by<true>(test::interpreter(m), 5), "") << test::mode_name(m);
}

TEST(WarpSpecialized, ReadingAWaitedByBlockWithoutTheOrderIsARace) {
  if (test::on_gpu()) GTEST_SKIP() << "a race: the interpreter reports it";
  for (test::copy_mode m : test::all_copy_modes) {
    const std::string err = run_waited_by<false>(test::interpreter(m), 4);
    EXPECT_NE(err.find("race [missing wait]: warpgroup 1 reads shared memory that a TMA load may still be writing"),
              std::string::npos)
        << test::mode_name(m) << ": " << err;
  }
}

TEST(WarpSpecialized, BufferedStationaryInputInAChain) {
  for (const int items : {1, 3, 7}) {
    const int steps = 3;
    const auto hx = host_values(items * steps * rows * 32LL), hz = host_values(items * rows * 32LL);
    auto x = tp::tensor<float, 2>::from_host(test::dev(), {items * steps * rows, 32}, hx);
    auto z = tp::tensor<float, 2>::from_host(test::dev(), {items * rows, 32}, hz);
    auto y = tp::kernel(buffered_stationary_kernel{items, steps}, {.grid = {2}},
                        tp::out_type<float>(items * steps * rows, 32))(test::dev(), x, z);
    const auto hy = y.to_host();
    for (long long e = 0; e < items * steps * rows * 32LL; ++e) {
      const long long item = e / (steps * rows * 32), within = e % (rows * 32);
      ASSERT_EQ(hy[e], hx[e] + hz[item * rows * 32 + within]) << items << " items, element " << e;
    }
  }
}
