// Warpgroups taking turns (FlashAttention-3's ping-pong): N warpgroups run a section one
// after another in the fixed cycle 0, 1, ..., N - 1, 0, ... — typically the issue of their
// wgmmas, so that while the tensor cores work for one warpgroup the others run their
// softmax. Every participant takes the same number of turns.
//
//     tp::turn_order<2> turns{ci};   // this warpgroup's place in the cycle
//     turns.start();                 // once, before the first turn
//     turns.wait();  issue wgmmas;  turns.pass();   // a turn (or turns.take([&] { ... }))
//     turns.finish();                // once, after the last turn
//
// Named barrier Base + i opens place i's turn: place i waits on it (bar.sync) and the
// place before it signals it when its own turn ends (bar.arrive), two warpgroups per
// barrier. start() opens place 0's first turn; finish() consumes the signal the last
// place's last turn leaves, so the barriers are idle afterwards.
#pragma once

#include "../backend/primitives.cuh"
#include "../core/config.cuh"

namespace tilepipe {

template <int N, int Base = prim::user_barrier_base>
struct turn_order {
  static_assert(N >= 2, "tilepipe: turn_order needs at least two warpgroups");
  static_assert(Base >= prim::user_barrier_base && Base + N <= 16,
                "tilepipe: turn_order uses named barriers Base .. Base + N - 1, which must lie in "
                "prim::user_barrier_base .. 15");
  static constexpr int pair = 2 * warpgroup_size;  // the waiter and the signaller

  int place;  // 0 .. N - 1

  TP_HD void start() const {
    if (place == N - 1) prim::named_barrier_arrive(Base, pair);
  }
  /// Blocks until the previous place has passed the turn on.
  TP_HD void wait() const { prim::named_barrier_sync(Base + place, pair); }
  /// Opens the next place's turn.
  TP_HD void pass() const { prim::named_barrier_arrive(Base + (place + 1) % N, pair); }
  /// wait(), f(), pass().
  template <class F>
  TP_HD void take(F&& f) const {
    wait();
    f();
    pass();
  }
  TP_HD void finish() const {
    if (place == 0) wait();
  }
};

}  // namespace tilepipe
