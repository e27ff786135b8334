// Semaphores between devices (Pallas' semaphore_signal / semaphore_wait with device_id):
// counters in a symmetric buffer of unsigned words, one copy per device. A warpgroup
// signals a peer's counter after the writes it guards, and a warpgroup waits on its own
// device's counter before reading what the peers wrote.
//
//     tp::semaphore_signal(sems, slot, peer);         // after tp::wait_smem_to_gmem<0>() for TMA stores
//     tp::semaphore_wait(sems, slot, expected_count); // then read what the signallers wrote
//
// Unlike Pallas' semaphore_wait, a wait does not decrement: counts only grow (modulo 2^32),
// so that all CTAs of a device may wait on one counter for the same count. A kernel that
// runs repeatedly waits for the count of its launch (launch number x signals per launch).
#pragma once

#include "../backend/primitives.cuh"
#include "../core/refs.cuh"

namespace tilepipe {

/// Every thread of the warpgroup: adds `inc` to counter `index` of device `device`'s copy,
/// with release semantics at system scope. Everything the warpgroup wrote before the call,
/// with ordinary stores or with TMA stores it already waited for (wait_smem_to_gmem<0>, not
/// only reads_done), is visible to a device that sees the new count.
template <class... Tiles>
TP_HD TP_FORCEINLINE void semaphore_signal(const symmetric_ref<unsigned, 1, Tiles...>& sems, int index, int device,
                                           unsigned inc = 1) {
  TP_REQUIRE(index >= 0 && index < sems.local.shape[0], "tp::semaphore_signal: counter %d of %lld", index,
             sems.local.shape[0]);
  prim::warpgroup_sync();  // every thread's writes precede the leader's release
  if (prim::leader()) prim::signal_add(sems.remote(device).data + index, inc);
}

/// Every thread of the warpgroup: waits until this device's counter `index` reaches
/// `count` (acquire at system scope); afterwards the warpgroup's reads, ordinary or by TMA,
/// see what the signallers published.
template <class... Tiles>
TP_HD TP_FORCEINLINE void semaphore_wait(const symmetric_ref<unsigned, 1, Tiles...>& sems, int index, unsigned count) {
  TP_REQUIRE(index >= 0 && index < sems.local.shape[0], "tp::semaphore_wait: counter %d of %lld", index,
             sems.local.shape[0]);
  if (prim::leader()) prim::signal_wait(sems.local.data + index, count);
  prim::warpgroup_sync();  // the leader's acquire precedes every thread's reads
}

}  // namespace tilepipe
