// An operand left in global memory (tp::gmem_spec), in either pipeline: no slots, no
// barriers, nothing to fetch, store or release; the body gets the call's GMEM ref.
#pragma once

#include "../backend/primitives.cuh"

#include <cstdint>

namespace tilepipe::pipeline_detail {

template <class Gmem>
struct gmem_operand {
  // emit_pipeline's: the call's ref, bound when it makes its operands (the warp-specialised
  // pipeline allocates its operands once for a chain and hands each call's ref to the body)
  const Gmem* gmem = nullptr;
  static constexpr int slots = 0;
  static constexpr int delay = 0;
  static constexpr std::uint32_t allocation_bytes = 0;

  /// What emit_pipeline's body gets: the call's GMEM ref.
  TP_HD const Gmem& view() const { return *gmem; }
  TP_HD const Gmem& body_view() const { return *gmem; }

  // Every other step of both pipelines' operand protocols does nothing.
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

}  // namespace tilepipe::pipeline_detail
