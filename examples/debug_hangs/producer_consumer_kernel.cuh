// A hand-rolled producer/consumer kernel, y = 2 x + 1: warpgroup 0 streams blocks of x into
// a ring of two SMEM slots with TMA; warpgroup 1 computes from each slot into one of two
// output buffers and stores them with TMA. The slots are handed over with two barrier
// rings: ready (TMA load -> consumer) and consumed (consumer -> producer).
//
// `Bug` plants one classic protocol bug; pc_bug::none is the correct kernel. The
// interpreter tests (tests/test_planted_bugs.cu) check that each bug is reported and
// named; examples/debug_hangs runs the ones that hang on the GPU in TILEPIPE_DEBUG_HANGS
// builds, where the bounded barrier wait must print and trap.
#pragma once

#include <tilepipe/tilepipe.cuh>

namespace tp = tilepipe;

enum class pc_bug {
  none,
  missing_ready_wait,    // the consumer reads a slot without waiting for its load
  early_release,         // the consumer releases a slot (consumed arrive) before reading it
  wrong_phase_consumer,  // the consumer's first wait is for parity 1: it passes before the load lands
  wrong_phase_producer,  // the producer's first wait is for parity 0 although the slots start free: hang
  expect_tx_too_large,   // expect_tx announces 1 KB more than the load delivers: hang
  expect_tx_too_small,   // expect_tx announces 1 KB less: the phase completes with bytes in flight
  skipped_arrive,        // the consumer leaves early without releasing its slot: hang
  missing_commit,        // the consumer stores its output without commit_smem (no proxy fence)
  store_slot_reuse,      // the consumer rewrites an output buffer before its store has read it
};

inline const char* pc_bug_name(pc_bug b) {
  switch (b) {
    case pc_bug::none: return "none";
    case pc_bug::missing_ready_wait: return "missing_ready_wait";
    case pc_bug::early_release: return "early_release";
    case pc_bug::wrong_phase_consumer: return "wrong_phase_consumer";
    case pc_bug::wrong_phase_producer: return "wrong_phase_producer";
    case pc_bug::expect_tx_too_large: return "expect_tx_too_large";
    case pc_bug::expect_tx_too_small: return "expect_tx_too_small";
    case pc_bug::skipped_arrive: return "skipped_arrive";
    case pc_bug::missing_commit: return "missing_commit";
    case pc_bug::store_slot_reuse: return "store_slot_reuse";
  }
  return "?";
}

template <pc_bug Bug = pc_bug::none>
struct producer_consumer_kernel {
  static constexpr int num_threads = 2;
  using T = float;
  using tile_t = tp::tile<tp::block<32, 64>>;  // 8 KB blocks
  using view = tp::smem<T, tile_t>;
  static constexpr std::uint32_t block_bytes = tp::block_bytes_v<tile_t, T>;

  int blocks;  // x and y are (32 * blocks) x 64

  TP_HD void operator()(tp::kernel_context& ctx, tp::gmem<T, 2, tile_t> x, tp::gmem<T, 2, tile_t> y, view in0, view in1,
                        view out0, view out1, tp::barriers<2> ready, tp::barriers<2> consumed) const {
    tp::name_barriers(ready, "ready");
    tp::name_barriers(consumed, "consumed");
    tp::name_buffer(in0, "in", 0);
    tp::name_buffer(in1, "in", 1);
    tp::name_buffer(out0, "out", 0);
    tp::name_buffer(out1, "out", 1);
    if (ctx.thread_index() == 0) produce(x, in0, in1, ready, consumed);
    else consume(y, in0, in1, out0, out1, ready, consumed);
  }

  TP_HD void produce(const tp::gmem<T, 2, tile_t>& x, const view& in0, const view& in1, tp::barriers<2> ready,
                     tp::barriers<2> consumed) const {
    for (int i = 0; i < blocks; ++i) {
      const int slot = i % 2;
      const unsigned use = static_cast<unsigned>(i / 2);
      // A slot starts free: the first wait (parity 1) passes at once; later ones wait for
      // the consumer's release of the slot's previous use.
      const unsigned free_parity = Bug == pc_bug::wrong_phase_producer ? (use & 1u) : ((use & 1u) ^ 1u);
      tp::barrier_wait(consumed[slot], free_parity);
      const view& dst = slot == 0 ? in0 : in1;
      if constexpr (Bug == pc_bug::expect_tx_too_large || Bug == pc_bug::expect_tx_too_small) {
        if (tp::prim::leader()) {
          tp::prim::mbarrier_arrive_expect_tx(ready[slot].ptr,
                                              Bug == pc_bug::expect_tx_too_large ? block_bytes + 1024 : block_bytes - 1024);
          tp::issue_block_load<tile_t>(x, tp::idx(i, 0), dst.base, ready[slot].ptr);
        }
      } else {
        tp::copy_gmem_to_smem(x, tp::idx(i, 0), dst, ready[slot]);
      }
    }
  }

  TP_HD void consume(const tp::gmem<T, 2, tile_t>& y, const view& in0, const view& in1, const view& out0,
                     const view& out1, tp::barriers<2> ready, tp::barriers<2> consumed) const {
    for (int i = 0; i < blocks; ++i) {
      const int slot = i % 2;
      const unsigned use = static_cast<unsigned>(i / 2);
      const view& src = slot == 0 ? in0 : in1;
      const view& out = slot == 0 ? out0 : out1;
      if constexpr (Bug != pc_bug::missing_ready_wait)
        tp::barrier_wait(ready[slot], Bug == pc_bug::wrong_phase_consumer ? ((use & 1u) ^ 1u) : (use & 1u));
      if constexpr (Bug == pc_bug::early_release) tp::barrier_arrive(consumed[slot]);
      if constexpr (Bug == pc_bug::skipped_arrive)
        if (i == 2) {  // e.g. "nothing left to do": but the producer still waits for this slot
          tp::wait_smem_to_gmem<0>();
          return;
        }
      // The store issued from this output buffer two blocks ago must have read it.
      if constexpr (Bug != pc_bug::store_slot_reuse) tp::wait_smem_to_gmem<1>(tp::reads_done);
      tp::map([](float v) { return 2.0f * v + 1.0f; }, out, src);
      if constexpr (Bug != pc_bug::early_release) tp::barrier_arrive(consumed[slot]);
      if constexpr (Bug != pc_bug::missing_commit) tp::commit_smem();
      tp::copy_smem_to_gmem(out, y, tp::idx(i, 0));
    }
    tp::wait_smem_to_gmem<0>();
  }

  tp::launch_config config() const { return {.grid = {1}}; }
};
