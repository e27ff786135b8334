// A persistent warp-specialised kernel written as its schedule (CUTLASS's kernel over a tile
// scheduler; ThunderKittens' setup / load / compute / finish): the work items a CTA runs,
// and the pipeline of one item (its grid, block specs, step body, and compute_context with
// the item's epilogue). The library owns the rest:
//
//     auto pipeline_of = [&](work_tile u) { return tp::emit_pipeline_warp_specialized(...); };
//     auto loop = tp::persistent_pipelines<work_tile>(ws, ctx, pipeline_of, a, b);
//     ... the kernel's own shared memory (epilogue buffers: ExtraSmem bytes) ...
//     loop.run(sched.worker(w, workers));          // items[0], items[1], ...
//     loop.run(first, end, stride, item_of);        // item_of(j), round robin over the CTAs
//
// persistent_pipelines names the pipeline's type from a default item, checks at compile time
// that its slots and barriers plus ExtraSmem bytes fit in shared memory, and allocates them
// once (every warpgroup, collectively). run chains the items' pipelines on that allocation
// (start, steady..., stop: the memory warpgroup fetches the next item's blocks while the
// compute warpgroups finish this one's) under the warp-specialised register split. A loop
// whose items need more than the pipeline per item (the collective matmuls wait for a peer
// on the memory side) uses each(first, end, stride, f), f(j, state, role, alloc).
#pragma once

#include "../core/error.cuh"
#include "warp_specialized.cuh"

#include <cuda/std/tuple>

namespace tilepipe {

template <class Split, class PipelineOf, class Alloc, class... G>
class persistent_loop {
 public:
  TP_HD persistent_loop(Split split, kernel_context& k, const PipelineOf& pipeline_of, Alloc alloc, const G&... refs)
      : split_(split), k_(k), pipeline_of_(pipeline_of), alloc_(alloc), refs_(refs...) {}

  /// Runs the pipelines of items[0], items[1], ... < items.size().
  template <class Items>
  TP_HD void run(const Items& items) {
    run(0, items.size(), 1, [&](int j) { return items[j]; });
  }
  /// Runs the pipelines of item_of(j) for j = first, first + stride, ... < end.
  template <class ItemOf>
  TP_HD void run(int first, int end, int stride, ItemOf&& item_of) {
    each(first, end, stride, [&](int j, pipeline_state state, auto role, Alloc& alloc) {
      cuda::std::apply([&](const auto&... g) { pipeline_of_(item_of(j))(k_, alloc, state, role, g...); }, refs_);
    });
  }
  /// Calls f(j, state, role, alloc) for j = first, first + stride, ... < end, where f runs
  /// the j-th pipeline of the chain itself (with other refs, or around other work).
  template <class F>
  TP_HD void each(int first, int end, int stride, F&& f) {
    warp_specialized_for(split_, k_, first, end, stride,
                         [&](int j, pipeline_state state, auto role) { f(j, state, role, alloc_); });
  }

 private:
  Split split_;
  kernel_context& k_;
  const PipelineOf& pipeline_of_;
  Alloc alloc_;
  cuda::std::tuple<const G&...> refs_;
};

/// The allocation and loop of a chain of warp-specialised pipelines, pipeline_of(Item) each,
/// over the GMEM refs `refs` (inputs, then outputs, as the pipeline's specs); ExtraSmem:
/// the shared memory the kernel allocates itself after them, for the budget check.
template <class Item, std::uint32_t ExtraSmem = 0, int NC, int MemRegs, int MemIdx, class PipelineOf, class... G>
TP_HD auto persistent_pipelines(warp_specialization<NC, MemRegs, MemIdx> split, kernel_context& k,
                                const PipelineOf& pipeline_of, const G&... refs) {
  using pipeline = decltype(pipeline_of(Item{}));
  static_assert(diagnostic::smem_over_budget<pipeline::template smem_bytes<G...> + ExtraSmem, smem_capacity>::ok);
  auto alloc = pipeline_of(Item{}).get_allocations(k, refs...);
  return persistent_loop<warp_specialization<NC, MemRegs, MemIdx>, PipelineOf, decltype(alloc), G...>(
      split, k, pipeline_of, alloc, refs...);
}

}  // namespace tilepipe
