// The planted-bug suite: small kernels that each carry one classic pipelining or barrier
// protocol bug (one of them in a 2-CTA cluster with multicast, one a manual ready barrier
// the body never waits on). The interpreter must report every one of them with a message
// naming the bug class, in every copy mode; the corrected twin of each must run clean and
// compute the right result.
#include "planted.hpp"

#include "examples/debug_hangs/producer_consumer_kernel.cuh"

#include <cmath>

namespace {

using test::copy_mode;

// ---- the hand-rolled producer/consumer kernel (examples/debug_hangs) -------------------

template <pc_bug Bug>
std::string run_producer_consumer(const tp::device& dev, int blocks = 6) {
  using K = producer_consumer_kernel<Bug>;
  const auto hx = test::random_values<float>(static_cast<std::size_t>(32 * blocks * 64));
  auto x = tp::tensor<float, 2>::from_host(dev, {32LL * blocks, 64}, hx);
  const K k{blocks};
  return test::error_of([&] {
    auto y = tp::kernel(k, k.config(), tp::out_type<float>(32LL * blocks, 64))(dev, x);
    const auto hy = y.to_host();
    for (std::size_t i = 0; i < hx.size(); ++i)
      if (hy[i] != 2.0f * hx[i] + 1.0f)
        throw tp::error("wrong result at element " + std::to_string(i) + ": " + std::to_string(hy[i]));
  });
}

template <pc_bug Bug>
void expect_reported(std::initializer_list<const char*> phrases) {
  for (copy_mode m : test::all_copy_modes) {
    const std::string err = run_producer_consumer<Bug>(test::interpreter(m));
    ASSERT_FALSE(err.empty()) << pc_bug_name(Bug) << " was not reported (copy mode " << test::mode_name(m) << ")";
    for (const char* p : phrases)
      EXPECT_NE(err.find(p), std::string::npos)
          << pc_bug_name(Bug) << " (copy mode " << test::mode_name(m) << "): expected \"" << p << "\" in:\n" << err;
  }
}

TEST(PlantedBugs, ProducerConsumerCorrectTwinRunsClean) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes)
    for (int blocks : {1, 2, 3, 6})
      EXPECT_EQ(run_producer_consumer<pc_bug::none>(test::interpreter(m), blocks), "")
          << "copy mode " << test::mode_name(m) << ", " << blocks << " blocks";
}

TEST(PlantedBugs, MissingReadyWait) {
  TP_INTERPRETER_ONLY();
  expect_reported<pc_bug::missing_ready_wait>({"race [missing wait]", "TMA load", "'in", "warpgroup 1"});
}

TEST(PlantedBugs, ConsumedBarrierReleasedTooEarly) {
  TP_INTERPRETER_ONLY();
  expect_reported<pc_bug::early_release>({"race [buffer released too early]", "warpgroup 1 read", "tp::map input"});
}

TEST(PlantedBugs, WrongInitialPhaseOfConsumer) {
  TP_INTERPRETER_ONLY();
  // A race where the load is still in flight at the wait (at_wait, shuffled); a hang
  // where it already landed (eager) - as on the GPU, depending on timing.
  expect_reported<pc_bug::wrong_phase_consumer>({"wrong initial phase"});
  EXPECT_NE(run_producer_consumer<pc_bug::wrong_phase_consumer>(test::interpreter()).find("race [missing wait]"),
            std::string::npos);
  EXPECT_NE(run_producer_consumer<pc_bug::wrong_phase_consumer>(test::interpreter(copy_mode::eager)).find("deadlock"),
            std::string::npos);
}

TEST(PlantedBugs, WrongInitialPhaseOfProducer) {
  TP_INTERPRETER_ONLY();
  expect_reported<pc_bug::wrong_phase_producer>({"deadlock", "'consumed' slot 0", "[wrong initial phase?]"});
}

TEST(PlantedBugs, ExpectTxTooLarge) {
  TP_INTERPRETER_ONLY();
  expect_reported<pc_bug::expect_tx_too_large>({"deadlock", "[expect_tx mismatch]", "'ready' slot 0", "1024"});
}

TEST(PlantedBugs, ExpectTxTooSmall) {
  TP_INTERPRETER_ONLY();
  expect_reported<pc_bug::expect_tx_too_small>({"barrier protocol [expect_tx mismatch]", "'ready' slot 0", "1024"});
}

TEST(PlantedBugs, EarlyExitSkipsAnArrive) {
  TP_INTERPRETER_ONLY();
  expect_reported<pc_bug::skipped_arrive>({"deadlock", "[skipped arrive]", "warpgroup 1 has returned"});
}

TEST(PlantedBugs, MissingCommitSmemBeforeTmaStore) {
  TP_INTERPRETER_ONLY();
  expect_reported<pc_bug::missing_commit>({"race [missing proxy fence]", "TMA store", "commit_smem"});
}

TEST(PlantedBugs, OutputSlotReusedBeforeItsStoreReadIt) {
  TP_INTERPRETER_ONLY();
  expect_reported<pc_bug::store_slot_reuse>({"race [slot reused before its store read it]", "'out"});
}

// ---- a pipelined matmul whose body leaves one wgmma group in flight -------------------

template <int Delay>
struct in_flight_matmul {
  using tile_t = tp::tile<tp::block<64, 64>, tp::swizzle<128>>;
  int k_steps;

  TP_HD void operator()(tp::kernel_context& k, tp::gmem<tp::bf16, 2, tile_t> a, tp::gmem<tp::bf16, 2, tile_t> b,
                        tp::gmem<tp::bf16, 2, tile_t> c) const {
    tp::accumulator<64, 64> acc = tp::zeros<float, 64, 64>();
    auto body = [&](auto, auto a_smem, auto b_smem) {
      tp::wgmma(acc, a_smem, b_smem);
      tp::wgmma_wait<1>();  // the group just issued stays in flight into the next step
    };
    tp::emit_pipeline(body, tp::grid(k_steps),
                      tp::in_specs(tp::spec<tile_t>([](auto kk) { return tp::idx(0, kk); }),
                                   tp::spec<tile_t>([](auto kk) { return tp::idx(kk, 0); })),
                      tp::max_concurrent_steps<2>, tp::delay_release<Delay>)(k, a, b);
    tp::wgmma_wait<0>(acc);
    auto c_smem = k.alloc<tp::smem<tp::bf16, tile_t>>();
    tp::store(c_smem, acc);
    tp::commit_smem();
    tp::copy_smem_to_gmem(c_smem, c, tp::idx(0, 0));
    tp::wait_smem_to_gmem<0>();
  }
};

template <int Delay>
std::string run_in_flight_matmul(const tp::device& dev, int k_steps) {
  const long long K = 64LL * k_steps;
  const auto ha = test::random_values<tp::bf16>(static_cast<std::size_t>(64 * K));
  const auto hb = test::random_values<tp::bf16>(static_cast<std::size_t>(K * 64));
  auto a = tp::tensor<tp::bf16, 2>::from_host(dev, {64, K}, ha);
  auto b = tp::tensor<tp::bf16, 2>::from_host(dev, {K, 64}, hb);
  const in_flight_matmul<Delay> kern{k_steps};
  return test::error_of([&] {
    auto c = tp::kernel(kern, {.grid = {1}}, tp::out_type<tp::bf16>(64, 64))(dev, a, b);
    const auto hc = c.to_host();
    std::vector<double> ref(64 * 64, 0.0);
    for (int i = 0; i < 64; ++i)
      for (int j = 0; j < 64; ++j)
        for (long long kk = 0; kk < K; ++kk)
          ref[i * 64 + j] += double(tp::to_float(ha[i * K + kk])) * tp::to_float(hb[kk * 64 + j]);
    const double err = test::rel_error(hc, ref);
    if (!(err < 1e-2)) throw tp::error("wrong result: relative error " + std::to_string(err));
  });
}

TEST(PlantedBugs, AsyncWgmmaWithoutDelayRelease) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes) {
    const std::string err = run_in_flight_matmul<0>(test::interpreter(m), 4);
    EXPECT_NE(err.find("race [missing delay_release]"), std::string::npos) << test::mode_name(m) << ": " << err;
    EXPECT_NE(err.find("wgmma group issued by warpgroup 0 at pipeline step 0"), std::string::npos) << err;
    EXPECT_NE(err.find("'pipeline input"), std::string::npos) << err;
  }
}

TEST(PlantedBugs, AsyncWgmmaWithDelayReleaseRunsClean) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes)
    for (int steps : {1, 2, 3, 5}) EXPECT_EQ(run_in_flight_matmul<1>(test::interpreter(m), steps), "") << steps;
}

// ---- manual consumed barriers: a block released while the wgmma reading it runs ---------

template <bool WaitFirst>
struct manual_release_matmul {  // C = A * B over K, the body releasing its blocks itself
  static constexpr int num_threads = 2;
  using tile_t = tp::tile<tp::block<64, 64>, tp::swizzle<128>>;
  int k_steps;

  TP_HD void operator()(tp::kernel_context& k, tp::gmem<tp::bf16, 2, tile_t> a, tp::gmem<tp::bf16, 2, tile_t> b,
                        tp::gmem<tp::bf16, 2, tile_t> c) const {
    tp::accumulator<64, 64> acc;
    auto body = [&acc](auto, auto a_smem, auto b_smem, auto a_done, auto b_done) {
      tp::wgmma(acc, a_smem, b_smem);
      if constexpr (WaitFirst) tp::wgmma_wait<0>();
      else tp::wgmma_wait<1>();  // the group stays in flight, yet the blocks are released below
      a_done.arrive();
      b_done.arrive();
    };
    auto context = tp::compute_context([&](auto pipeline) {
      acc = tp::zeros<float, 64, 64>();
      pipeline();
      tp::wgmma_wait<0>(acc);
      auto c_smem = k.alloc_per_warpgroup<tp::smem<tp::bf16, tile_t>>();
      tp::store(c_smem, acc);
      tp::commit_smem();
      tp::copy_smem_to_gmem(c_smem, c, tp::idx(0, 0));
      tp::wait_smem_to_gmem<0>();
    });
    tp::emit_pipeline_warp_specialized(
        body, tp::grid(k_steps),
        tp::in_specs(tp::spec<tile_t>([](auto kk) { return tp::idx(0, kk); }),
                     tp::spec<tile_t>([](auto kk) { return tp::idx(kk, 0); })),
        tp::out_specs(), tp::num_compute_wgs<1>, tp::memory_registers<40>, tp::max_concurrent_steps<2>,
        tp::manual_consumed_barriers, context)(k, a, b);
  }
};

template <bool WaitFirst>
std::string run_manual_release(const tp::device& dev, int k_steps) {
  const long long K = 64LL * k_steps;
  const auto ha = test::random_values<tp::bf16>(static_cast<std::size_t>(64 * K));
  const auto hb = test::random_values<tp::bf16>(static_cast<std::size_t>(K * 64));
  auto a = tp::tensor<tp::bf16, 2>::from_host(dev, {64, K}, ha);
  auto b = tp::tensor<tp::bf16, 2>::from_host(dev, {K, 64}, hb);
  return test::error_of([&] {
    const auto hc = tp::kernel(manual_release_matmul<WaitFirst>{k_steps}, {}, tp::out_type<tp::bf16>(64, 64))(dev, a, b).to_host();
    std::vector<double> ref(64 * 64, 0.0);
    for (int i = 0; i < 64; ++i)
      for (long long kk = 0; kk < K; ++kk)
        for (int j = 0; j < 64; ++j) ref[i * 64 + j] += double(tp::to_float(ha[i * K + kk])) * tp::to_float(hb[kk * 64 + j]);
    if (!(test::rel_error(hc, ref) < 1e-2)) throw tp::error("wrong result");
  });
}

TEST(PlantedBugs, ManualReleaseWhileWgmmaReads) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes) {
    const std::string err = run_manual_release<false>(test::interpreter(m), 4);
    EXPECT_NE(err.find("race [released while a wgmma reads]"), std::string::npos) << test::mode_name(m) << ": " << err;
    EXPECT_NE(err.find("consumed (manual) barrier of operand"), std::string::npos) << err;
    EXPECT_NE(err.find("after tp::wgmma_wait"), std::string::npos) << err;
    EXPECT_EQ(err.find("delay_release"), std::string::npos) << err;
  }
}

TEST(PlantedBugs, ManualReleaseAfterWgmmaWaitRunsClean) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes)
    for (int steps : {1, 3, 5}) EXPECT_EQ(run_manual_release<true>(test::interpreter(m), steps), "") << steps;
}

// ---- manual ready barriers: a body that reads its pending block without waiting -------

template <bool Wait>
struct manual_ready_map {  // y = x + z, z with tp::manual_ready
  static constexpr int num_threads = 2;
  using tile_t = tp::tile<tp::block<16, 32>>;
  int steps;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile_t> x, tp::gmem<float, 2, tile_t> z,
                        tp::gmem<float, 2, tile_t> y) const {
    auto body = [](auto, auto xs, auto zs, auto ys) {
      if constexpr (Wait) tp::map([](float a, float b) { return a + b; }, ys, xs, zs.wait());
      else tp::map([](float a, float b) { return a + b; }, ys, xs, zs.view);  // the block may not have landed
    };
    auto s = tp::spec<tile_t>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline_warp_specialized(body, tp::grid(steps),
                                       tp::in_specs(s, tp::spec<tile_t>([](auto i) { return tp::idx(i, 0); }, tp::manual_ready)),
                                       tp::out_specs(s), tp::num_compute_wgs<1>, tp::memory_registers<40>,
                                       tp::max_concurrent_steps<2>)(k, x, z, y);
  }
};

template <bool Wait>
std::string run_manual_ready(const tp::device& dev, int steps) {
  const auto hx = test::random_values<float>(static_cast<std::size_t>(steps * 16 * 32));
  const auto hz = test::random_values<float>(hx.size());
  auto x = tp::tensor<float, 2>::from_host(dev, {steps * 16LL, 32}, hx);
  auto z = tp::tensor<float, 2>::from_host(dev, {steps * 16LL, 32}, hz);
  return test::error_of([&] {
    const auto hy = tp::kernel(manual_ready_map<Wait>{steps}, {}, tp::out_type<float>(steps * 16LL, 32))(dev, x, z).to_host();
    for (std::size_t i = 0; i < hx.size(); ++i)
      if (hy[i] != hx[i] + hz[i]) throw tp::error("wrong result at element " + std::to_string(i));
  });
}

TEST(PlantedBugs, ManualReadyBlockReadWithoutWaiting) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes) {
    const std::string err = run_manual_ready<false>(test::interpreter(m), 4);
    EXPECT_NE(err.find("race [missing wait]"), std::string::npos) << test::mode_name(m) << ": " << err;
    EXPECT_NE(err.find("TMA load issued by warpgroup 1, completing on barrier 'ready (manual) barrier of operand 1'"),
              std::string::npos)
        << err;
  }
}

TEST(PlantedBugs, ManualReadyBlockWaitedForRunsClean) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes)
    for (int steps : {1, 3, 5}) EXPECT_EQ(run_manual_ready<true>(test::interpreter(m), steps), "") << steps;
}

// ---- wgmma reading an operand the warpgroup wrote itself (e.g. softmax probabilities) ---

enum class operand_bug { none, missing_fence, rewritten_while_read };

template <operand_bug Bug>
struct staged_operand_matmul {  // C = relu(A) * B, relu(A) staged through SMEM as the wgmma A operand
  using tile_t = tp::tile<tp::block<64, 64>, tp::swizzle<128>>;
  using view = tp::smem<tp::bf16, tile_t>;

  TP_HD void operator()(tp::kernel_context&, tp::gmem<tp::bf16, 2, tile_t> a, tp::gmem<tp::bf16, 2, tile_t> b,
                        tp::gmem<tp::bf16, 2, tile_t> c, view a_in, view a_op, view b_op, view c_out,
                        tp::barriers<1, 2> loaded) const {
    tp::copy_gmem_to_smem(a, tp::idx(0, 0), a_in, loaded[0]);
    tp::copy_gmem_to_smem(b, tp::idx(0, 0), b_op, loaded[0]);
    tp::barrier_wait(loaded[0], 0);
    const auto relu = tp::max(tp::load<tp::bf16>(a_in), 0.0f);
    tp::store(a_op, relu);
    if constexpr (Bug != operand_bug::missing_fence) tp::commit_smem();
    tp::accumulator<64, 64> acc = tp::zeros<float, 64, 64>();
    tp::wgmma(acc, a_op, b_op);
    if constexpr (Bug == operand_bug::rewritten_while_read) tp::store(a_op, relu);
    tp::wgmma_wait<0>(acc);
    tp::store(c_out, acc);
    tp::commit_smem();
    tp::copy_smem_to_gmem(c_out, c, tp::idx(0, 0));
    tp::wait_smem_to_gmem<0>();
  }
};

template <operand_bug Bug>
std::string run_staged(const tp::device& dev) {
  const auto ha = test::random_values<tp::bf16>(64 * 64), hb = test::random_values<tp::bf16>(64 * 64);
  auto a = tp::tensor<tp::bf16, 2>::from_host(dev, {64, 64}, ha);
  auto b = tp::tensor<tp::bf16, 2>::from_host(dev, {64, 64}, hb);
  return test::error_of([&] {
    auto c = tp::kernel(staged_operand_matmul<Bug>{}, {.grid = {1}}, tp::out_type<tp::bf16>(64, 64))(dev, a, b);
    const auto hc = c.to_host();
    std::vector<double> ref(64 * 64, 0.0);
    for (int i = 0; i < 64; ++i)
      for (int j = 0; j < 64; ++j)
        for (int kk = 0; kk < 64; ++kk)
          ref[i * 64 + j] += std::max(0.0, double(tp::to_float(ha[i * 64 + kk]))) * tp::to_float(hb[kk * 64 + j]);
    const double err = test::rel_error(hc, ref);
    if (!(err < 1e-2)) throw tp::error("wrong result: relative error " + std::to_string(err));
  });
}

TEST(PlantedBugs, WgmmaReadsGenericWritesWithoutFence) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes) {
    const std::string err = run_staged<operand_bug::missing_fence>(test::interpreter(m));
    EXPECT_NE(err.find("race [missing proxy fence]: a wgmma reads"), std::string::npos) << err;
    EXPECT_NE(err.find("tp::store"), std::string::npos) << err;
  }
}

TEST(PlantedBugs, OperandRewrittenWhileWgmmaReadsIt) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes) {
    const std::string err = run_staged<operand_bug::rewritten_while_read>(test::interpreter(m));
    EXPECT_NE(err.find("race [wgmma still reading]"), std::string::npos) << err;
  }
}

TEST(PlantedBugs, StagedOperandCorrectTwinRunsClean) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes) EXPECT_EQ(run_staged<operand_bug::none>(test::interpreter(m)), "");
}

// ---- two warpgroups handing a block over through SMEM ---------------------------------

template <bool Synchronised>
struct handoff_kernel {  // warpgroup 0 loads x and writes it to buf; warpgroup 1 stores 2 * buf to y
  static constexpr int num_threads = 2;
  using tile_t = tp::tile<tp::block<64, 64>>;
  using view = tp::smem<float, tile_t>;

  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile_t> x, tp::gmem<float, 2, tile_t> y, view in,
                        view buf, view out, tp::barriers<1> loaded) const {
    if (k.thread_index() == 0) {
      tp::copy_gmem_to_smem(x, tp::idx(0, 0), in, loaded[0]);
      tp::barrier_wait(loaded[0], 0);
      tp::store(buf, tp::load<float>(in));
    }
    if constexpr (Synchronised) k.sync_threads();
    if (k.thread_index() == 1) {
      tp::store(out, tp::load<float>(buf) * 2.0f);
      tp::commit_smem();
      tp::copy_smem_to_gmem(out, y, tp::idx(0, 0));
      tp::wait_smem_to_gmem<0>();
    }
  }
};

template <bool Synchronised>
std::string run_handoff(const tp::device& dev) {
  const auto hx = test::random_values<float>(64 * 64);
  auto x = tp::tensor<float, 2>::from_host(dev, {64, 64}, hx);
  return test::error_of([&] {
    auto y = tp::kernel(handoff_kernel<Synchronised>{}, {.grid = {1}}, tp::out_type<float>(64, 64))(dev, x);
    const auto hy = y.to_host();
    for (std::size_t i = 0; i < hx.size(); ++i)
      if (hy[i] != 2.0f * hx[i]) throw tp::error("wrong result at " + std::to_string(i));
  });
}

TEST(PlantedBugs, UnsynchronisedHandoffBetweenWarpgroups) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes) {
    const std::string err = run_handoff<false>(test::interpreter(m));
    EXPECT_NE(err.find("race [unsynchronized]: warpgroups"), std::string::npos) << err;
    EXPECT_NE(err.find("'SMEM scratch, kernel parameter 3'"), std::string::npos) << err;
  }
}

TEST(PlantedBugs, SynchronisedHandoffRunsClean) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes) EXPECT_EQ(run_handoff<true>(test::interpreter(m)), "");
}

// ---- a block multicast to a 2-CTA cluster through one slot -----------------------------

// Warpgroup 1 of each CTA loads half of x's block i and multicasts it into both CTAs' slot;
// warpgroup 0 stores slot + 1 to its CTA's rows of y and releases the slot. The slot may be
// refilled only when the consumers of *both* CTAs released it: the planted bug counts and
// signals only the CTA's own consumer, so one CTA's multicast for the next block reaches
// the peer's slot while the peer's previous load into it may not even have completed.
template <bool CountsWholeCluster>
struct cluster_slot_kernel {
  static constexpr int num_threads = 2;
  using tile_t = tp::tile<tp::block<32, 64>, tp::swizzle<0>, tp::box_rows<16>>;  // two boxes: one per CTA
  using view = tp::smem<float, tile_t>;
  int steps;

  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, tile_t> x, tp::gmem<float, 2, tile_t> y, view slot,
                        view out, tp::barriers<1> ready, tp::barriers<1, CountsWholeCluster ? 8 : 4> consumed) const {
    k.cluster_sync();  // the barriers of both CTAs are initialised before any multicast
    const int rank = k.cluster_rank();
    if (k.thread_index() == 1) {
      for (int i = 0; i < steps; ++i) {
        if (i > 0) tp::barrier_wait(consumed[0], (i - 1) & 1);
        if (tp::prim::leader()) {
          tp::prim::mbarrier_arrive_expect_tx(ready[0].ptr, tp::block_bytes_v<tile_t, float>);
          tp::issue_block_load_multicast<tile_t>(x, tp::idx(i, 0), slot.base, ready[0].ptr, rank, 2, 0b11);
        }
      }
    } else {
      for (int i = 0; i < steps; ++i) {
        tp::barrier_wait(ready[0], i & 1);
        tp::wait_smem_to_gmem<0>(tp::reads_done);  // out is free again
        tp::map([](float v) { return v + 1.0f; }, out, slot);
        if constexpr (CountsWholeCluster) tp::prim::mbarrier_arrive_per_warp_cluster(tp::prim::barrier_at(consumed[0].ptr), 0b11);
        else tp::prim::mbarrier_arrive_per_warp(consumed[0].ptr);
        tp::commit_smem();
        tp::copy_smem_to_gmem(out, y, tp::idx(rank * steps + i, 0));
      }
      tp::wait_smem_to_gmem<0>();
    }
    k.cluster_sync();  // no CTA exits while its peer still arrives on its barriers
  }
};

template <bool CountsWholeCluster>
std::string run_cluster_slot(const tp::device& dev, int steps = 5) {
  const auto hx = test::random_values<float>(static_cast<std::size_t>(32 * 64 * steps));
  auto x = tp::tensor<float, 2>::from_host(dev, {32LL * steps, 64}, hx);
  return test::error_of([&] {
    const tp::launch_config cfg{.grid = {2}, .cluster = 2};
    auto y = tp::kernel(cluster_slot_kernel<CountsWholeCluster>{steps}, cfg, tp::out_type<float>(64LL * steps, 64))(dev, x);
    const auto hy = y.to_host();
    for (std::size_t i = 0; i < hy.size(); ++i)
      if (hy[i] != hx[i % hx.size()] + 1.0f) throw tp::error("wrong result at " + std::to_string(i));
  });
}

TEST(PlantedBugs, MulticastSlotReleasedByOneCtaOnly) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes) {
    const std::string err = run_cluster_slot<false>(test::interpreter(m));
    EXPECT_NE(err.find("race [overlapping TMA loads]"), std::string::npos) << test::mode_name(m) << ":\n" << err;
    EXPECT_NE(err.find("CTA (0..1)"), std::string::npos) << err;
  }
}

TEST(PlantedBugs, MulticastSlotReleasedByTheWholeClusterRunsClean) {
  TP_INTERPRETER_ONLY();
  for (copy_mode m : test::all_copy_modes)
    for (int steps : {1, 2, 5}) EXPECT_EQ(run_cluster_slot<true>(test::interpreter(m), steps), "") << test::mode_name(m);
}

// ---- detection can be turned off -------------------------------------------------------

TEST(PlantedBugs, DetectionOffLetsARaceThrough) {
  TP_INTERPRETER_ONLY();
  auto dev = test::interpreter(copy_mode::eager);  // eager: the data is there, only the order is wrong
  dev.interpreter.detect_races = false;
  EXPECT_EQ(run_producer_consumer<pc_bug::missing_commit>(dev), "");
  dev.interpreter.detect_races = true;
  EXPECT_NE(run_producer_consumer<pc_bug::missing_commit>(dev), "");
}

}  // namespace
