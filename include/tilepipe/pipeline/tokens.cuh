// What a pipeline's body gets besides its blocks, for inputs it handles itself: the
// consumed token of manual_consumed_barriers (the body releases the block) and the pending
// block of tp::manual_ready (the body waits for it). Public types of both pipelines.
#pragma once

#include "../backend/primitives.cuh"

namespace tilepipe {

/// What the body gets per input with manual_consumed_barriers: arrive() once per step from
/// every compute warpgroup, when done with the block. It releases the slot on the block's
/// last step and is a no-op on the others (the block stays for the next step).
struct consumed_token {
  prim::smem_barrier bar{};
  bool releases = false;
  TP_HD void arrive() const {
    if (releases) prim::mbarrier_arrive_per_warp(bar);
  }
};

/// What the body gets for an input whose spec has tp::manual_ready: the slot its block lands
/// in, and the wait for it. The slot's address may be used at once (a wgmma descriptor, a
/// view of its rows); its bytes only after wait(), which returns the view. Every warpgroup
/// that reads the block waits; waiting again (a later step of the same block) returns at once.
/// For an input with tp::waited_by<w>, wait() waits only in compute warpgroup w and returns
/// the view at once in the others (which read it behind w, in a turn order).
template <class View>
struct pending_block {
  View view;
  prim::smem_barrier ready;
  std::uint32_t parity;
  prim::wait_site site;
  bool waits = true;  // false in the warpgroups a tp::waited_by input leaves out
  TP_HD View wait() const {
    if (waits) prim::mbarrier_wait(ready, parity, site);
    return view;
  }
};


}  // namespace tilepipe
