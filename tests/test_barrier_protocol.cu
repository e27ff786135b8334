// The interpreter's barrier protocol checks and the race detector's ordering rules, each
// on a kernel made to break exactly one rule, next to a variant that keeps it.
#include "planted.hpp"

namespace {

using test::copy_mode;
using tile_t = tp::tile<tp::block<64, 64>>;
using view = tp::smem<float, tile_t>;
using gmem_f = tp::gmem<float, 2, tile_t>;

/// Launches kernel k (one 64 x 64 f32 input, one output) on the interpreter; returns the error.
template <class K>
std::string run(const K& k, copy_mode m = copy_mode::at_wait) {
  const auto dev = test::interpreter(m);
  const auto hx = test::random_values<float>(64 * 64);
  auto x = tp::tensor<float, 2>::from_host(dev, {64, 64}, hx);
  return test::error_of([&] { tp::kernel(k, {.grid = {1}}, tp::out_type<float>(64, 64))(dev, x); });
}

void expect_has(const std::string& err, std::initializer_list<const char*> phrases) {
  ASSERT_FALSE(err.empty()) << "nothing was reported";
  for (const char* p : phrases) EXPECT_NE(err.find(p), std::string::npos) << "expected \"" << p << "\" in:\n" << err;
}

// ---- parity aliasing ---------------------------------------------------------------------

template <bool WaitBetween>
struct two_phases_kernel {  // warpgroup 0 completes two phases of `bar` while warpgroup 1 waits for the first
  static constexpr int num_threads = 2;
  TP_HD void operator()(tp::kernel_context& k, gmem_f, gmem_f, tp::barriers<1> bar, tp::barriers<1> go,
                        tp::barriers<1> back) const {
    tp::name_barriers(bar, "bar");
    if (k.thread_index() == 0) {
      tp::barrier_wait(go[0], 0);  // runs after warpgroup 1 blocked on bar
      tp::barrier_arrive(bar[0]);
      if constexpr (WaitBetween) tp::barrier_wait(back[0], 0);
      tp::barrier_arrive(bar[0]);
    } else {
      tp::barrier_arrive(go[0]);
      tp::barrier_wait(bar[0], 0);
      if constexpr (WaitBetween) tp::barrier_arrive(back[0]);
      tp::barrier_wait(bar[0], 1);
    }
  }
};

TEST(BarrierProtocol, PhaseCompletedTwiceWhileAWaiterWaitsForTheFirst) {
  TP_INTERPRETER_ONLY();
  expect_has(run(two_phases_kernel<false>{}), {"barrier protocol [parity aliasing]", "'bar'", "warpgroup 1",
                                               "completed phase 1 while warpgroup 1 was still waiting for phase 0"});
  EXPECT_EQ(run(two_phases_kernel<true>{}), "");
}

struct runs_ahead_kernel {  // warpgroup 0 completes two phases before warpgroup 1 waits at all
  static constexpr int num_threads = 2;
  TP_HD void operator()(tp::kernel_context& k, gmem_f, gmem_f, tp::barriers<1> bar) const {
    tp::name_barriers(bar, "bar");
    if (k.thread_index() == 0) {
      tp::barrier_arrive(bar[0]);
      tp::barrier_arrive(bar[0]);
    } else {
      tp::barrier_wait(bar[0], 0);  // phase 0 is long gone: this waits for phase 2
    }
  }
};

TEST(BarrierProtocol, WaiterTwoPhasesBehind) {
  TP_INTERPRETER_ONLY();
  expect_has(run(runs_ahead_kernel{}), {"barrier protocol [parity aliasing]", "warpgroup 1 waits on mbarrier 'bar'",
                                        "completed 2 phase(s)"});
}

// ---- arrivals, transaction bytes, exit ---------------------------------------------------

struct too_many_kernel {
  TP_HD void operator()(tp::kernel_context&, gmem_f, gmem_f, tp::barriers<1> bar) const {
    tp::prim::mbarrier_arrive(bar[0].ptr, 2);
  }
};

TEST(BarrierProtocol, MoreArrivalsThanTheCount) {
  TP_INTERPRETER_ONLY();
  expect_has(run(too_many_kernel{}), {"barrier protocol [too many arrivals]", "arrivals 2/1"});
}

template <int Arrivals, std::uint32_t ExpectTx>
struct left_pending_kernel {  // one arrival on a barrier that needs `Arrivals`, maybe announcing bytes that never come
  TP_HD void operator()(tp::kernel_context&, gmem_f, gmem_f, tp::barriers<1, Arrivals> bar) const {
    tp::name_barriers(bar, "half-done");
    if constexpr (ExpectTx > 0) tp::prim::mbarrier_arrive_expect_tx(bar[0].ptr, ExpectTx);
    else tp::prim::mbarrier_arrive(bar[0].ptr);
  }
};

TEST(BarrierProtocol, PendingArrivalsOrBytesAtExit) {
  TP_INTERPRETER_ONLY();
  expect_has(run(left_pending_kernel<2, 0>{}),
             {"barrier protocol [pending at exit]", "'half-done'", "1 of 2 arrivals (from warpgroup 0)"});
  expect_has(run(left_pending_kernel<1, 256>{}), {"barrier protocol [pending at exit]", "256 transaction bytes"});
  EXPECT_EQ(run(left_pending_kernel<1, 0>{}), "");  // one arrival of one: the phase completed
}

template <bool Wait>
struct load_kernel {  // loads x into SMEM and stores it to y (optionally forgetting the wait)
  TP_HD void operator()(tp::kernel_context&, gmem_f x, gmem_f, view buf, tp::barriers<1> bar) const {
    tp::name_barriers(bar, "loaded");
    tp::copy_gmem_to_smem(x, tp::idx(0, 0), buf, bar[0]);
    if constexpr (Wait) tp::barrier_wait(bar[0], 0);
  }
};

TEST(BarrierProtocol, LoadNeverWaitedFor) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes) {
    expect_has(run(load_kernel<false>{}, m), {"barrier protocol [load never waited]", "'loaded'"});
    EXPECT_EQ(run(load_kernel<true>{}, m), "") << test::mode_name(m);
  }
}

struct inval_busy_kernel {
  TP_HD void operator()(tp::kernel_context&, gmem_f, gmem_f, tp::barriers<1, 2> bar) const {
    tp::prim::mbarrier_arrive(bar[0].ptr);
    tp::prim::mbarrier_inval(bar[0].ptr);
  }
};

TEST(BarrierProtocol, InvalidatedPartWayThroughAPhase) {
  TP_INTERPRETER_ONLY();
  expect_has(run(inval_busy_kernel{}), {"barrier protocol [barrier in use]", "invalidated part-way through phase 0"});
}

// ---- deadlocks ---------------------------------------------------------------------------

struct missing_sync_kernel {  // warpgroup 1 returns without joining the CTA-wide barrier
  static constexpr int num_threads = 2;
  TP_HD void operator()(tp::kernel_context& k, gmem_f, gmem_f) const {
    if (k.thread_index() == 1) return;
    k.sync_threads();
  }
};

TEST(BarrierProtocol, DeadlockOnNamedBarrierSaysWhoIsMissing) {
  TP_INTERPRETER_ONLY();
  expect_has(run(missing_sync_kernel{}), {"deadlock", "named barrier 0 (128 of 256 threads arrived: warpgroup 0)",
                                          "warpgroup 1 has returned from the kernel"});
}

// ---- race detector rules -----------------------------------------------------------------

struct overlapping_loads_kernel {  // two loads into one buffer, the second before the first was waited for
  TP_HD void operator()(tp::kernel_context&, gmem_f x, gmem_f, view buf, tp::barriers<2> bar) const {
    tp::copy_gmem_to_smem(x, tp::idx(0, 0), buf, bar[0]);
    tp::copy_gmem_to_smem(x, tp::idx(0, 0), buf, bar[1]);
    tp::barrier_wait(bar[0], 0);
    tp::barrier_wait(bar[1], 0);
  }
};

TEST(RaceRules, LoadIntoABufferAnotherLoadStillWrites) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes) expect_has(run(overlapping_loads_kernel{}, m), {"race [overlapping TMA loads]"});
}

enum class fence_case { fenced, write_after_fence, other_warpgroup_fenced, other_warpgroup_unfenced, fenced_unsynced };

template <fence_case C>
struct fence_kernel {  // writes y's block to SMEM with generic stores, then stores it with TMA
  static constexpr int num_threads = 2;
  TP_HD void operator()(tp::kernel_context& k, gmem_f, gmem_f y, view buf) const {
    const auto ones = tp::full<float, 64, 64>(1.0f);
    constexpr bool one_wg = C == fence_case::fenced || C == fence_case::write_after_fence;
    const int writer = one_wg ? 0 : 1;
    if (k.thread_index() == writer) {
      if constexpr (C == fence_case::write_after_fence) tp::commit_smem();
      tp::store(buf, ones);
      if constexpr (C != fence_case::write_after_fence && C != fence_case::other_warpgroup_unfenced) tp::commit_smem();
    }
    if constexpr (C != fence_case::fenced_unsynced) k.sync_threads();
    if (k.thread_index() == 0) {
      tp::copy_smem_to_gmem(buf, y, tp::idx(0, 0));
      tp::wait_smem_to_gmem<0>();
    }
  }
};

TEST(RaceRules, ProxyFenceMustFollowTheWriteAndPrecedeTheStore) {
  TP_INTERPRETER_ONLY();
  EXPECT_EQ(run(fence_kernel<fence_case::fenced>{}), "");
  EXPECT_EQ(run(fence_kernel<fence_case::other_warpgroup_fenced>{}), "");
  expect_has(run(fence_kernel<fence_case::write_after_fence>{}), {"race [missing proxy fence]", "warpgroup 0 wrote"});
  expect_has(run(fence_kernel<fence_case::other_warpgroup_unfenced>{}), {"race [missing proxy fence]", "warpgroup 1 wrote"});
  // Nothing orders warpgroup 1's write and warpgroup 0's TMA store (which of the two
  // conflicting accesses comes first depends on the schedule).
  expect_has(run(fence_kernel<fence_case::fenced_unsynced>{}), {"race [", "warpgroup 1"});
}

struct read_read_kernel {  // both warpgroups read one loaded buffer: reads never conflict
  static constexpr int num_threads = 2;
  TP_HD void operator()(tp::kernel_context& k, gmem_f x, gmem_f y, view in, tp::barriers<1> bar, view out0, view out1) const {
    if (k.thread_index() == 0) tp::copy_gmem_to_smem(x, tp::idx(0, 0), in, bar[0]);
    tp::barrier_wait(bar[0], 0);
    const view& out = k.thread_index() == 0 ? out0 : out1;
    tp::store(out, tp::load<float>(in));
    tp::commit_smem();
    if (k.thread_index() == 0) tp::copy_smem_to_gmem(out, y, tp::idx(0, 0));
    tp::wait_smem_to_gmem<0>();
  }
};

TEST(RaceRules, ConcurrentReadsDoNotConflict) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes) EXPECT_EQ(run(read_read_kernel{}, m), "");
}

template <bool ReadWait>
struct store_then_rewrite_kernel {  // one buffer stored twice; the rewrite waits for the first store to read it
  TP_HD void operator()(tp::kernel_context&, gmem_f, gmem_f y, view buf) const {
    tp::store(buf, tp::full<float, 64, 64>(1.0f));
    tp::commit_smem();
    tp::copy_smem_to_gmem(buf, y, tp::idx(0, 0));
    if constexpr (ReadWait) tp::wait_smem_to_gmem<0>(tp::reads_done);
    tp::store(buf, tp::full<float, 64, 64>(2.0f));
    tp::commit_smem();
    tp::copy_smem_to_gmem(buf, y, tp::idx(0, 0));
    tp::wait_smem_to_gmem<0>();
  }
};

TEST(RaceRules, RewriteAfterBulkWaitReadIsOrdered) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes) {
    EXPECT_EQ(run(store_then_rewrite_kernel<true>{}, m), "");
    expect_has(run(store_then_rewrite_kernel<false>{}, m), {"race [slot reused before its store read it]"});
  }
}

}  // namespace
