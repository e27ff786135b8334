// An operand left in global memory (tp::gmem_spec), in either pipeline: no slots, no
// barriers, nothing to fetch, store or release; the pipeline hands its body the call's GMEM
// ref (body_view).
#pragma once

#include "../backend/primitives.cuh"

#include <cstdint>

namespace tilepipe::pipeline_detail {

struct gmem_operand {
  static constexpr int slots = 0;
  static constexpr int delay = 0;
  static constexpr std::uint32_t allocation_bytes = 0;

  // Every step of the operand protocol does nothing.
  template <class... A>
  TP_HD void allocate(A&&...) {}
  template <class... A>
  TP_HD void init_barriers(A&&...) const {}
  template <class... A>
  TP_HD void inval_barriers(A&&...) const {}
  template <class... A>
  TP_HD void restart(A&&...) {}
  template <class... A>
  TP_HD void produce(A&&...) {}
  template <class... A>
  TP_HD void consume(A&&...) {}
  template <class... A>
  TP_HD bool refills_after(A&&...) const {
    return false;
  }
  template <class... A>
  TP_HD void release_after(A&&...) {}
  template <class... A>
  TP_HD void release_tail(A&&...) {}
  template <class... A>
  TP_HD bool begin_run(A&&...) {
    return false;
  }
  template <class... A>
  TP_HD bool run_ends(A&&...) const {
    return false;
  }
  template <class... A>
  TP_HD void end_run(A&&...) {}
  template <class... A>
  TP_HD void store(A&&...) const {}
  template <class... A>
  TP_HD bool store_if_ended(A&&...) {
    return false;
  }
  template <int, class... A>
  TP_HD void free_stored(A&&...) {}
  template <class... A>
  TP_HD void drain(A&&...) {}
};

/// What the body gets for an operand whose GMEM ref is g: an SMEM operand's block (or, with
/// tp::manual_ready, the block and its wait), or a GMEM operand's ref.
template <class Op, class G>
TP_HD auto body_view(const Op& op, const G&) {
  return op.body_view();
}
template <class G>
TP_HD const G& body_view(const gmem_operand&, const G& g) {
  return g;
}

}  // namespace tilepipe::pipeline_detail
