// A failed device-side check, reported to the host: the first failing thread of a launch
// writes the message's format and arguments into the host memory the launch mapped, then
// traps. Plain stores and a system fence: no printf, which is a function call (ptxas then
// serialises every wgmma of the kernel). Device pass only (through sm90/primitives.cuh).
#pragma once

#include "../../core/config.cuh"
#include "../../core/error.cuh"

#include <type_traits>

namespace tilepipe::sm90 {

TP_DEVICE inline void copy_text(char* to, const char* from, int capacity) {
  int i = 0;
#pragma unroll 1
  for (; i + 1 < capacity && from[i]; ++i) to[i] = from[i];
  to[i] = 0;
}

/// A trap by any thread ends the whole grid, so the threads that did not claim the record
/// wait until the claimant has written it before they trap. The copies are loops (unrolled,
/// the format string became a store per character); inline, not a call: a call in a kernel
/// costs its compute warps spilled registers (seen in ptxas reports of the matmul).
template <class... A>
TP_DEVICE TP_FORCEINLINE void fail_recorded(failure_channel ch, const char* format, A... args) {
  static_assert((0 + ... + (std::is_convertible_v<A, const char*> ? 0 : 1)) <= device_failure::max_values,
                "tilepipe: a failure message takes at most device_failure::max_values integer arguments");
  if (ch.record) {
    if (atomicCAS(ch.claim, 0u, 1u) == 0u) {
      device_failure* f = ch.record;
      copy_text(f->format, format, sizeof f->format);
      int v = 0;
      (
          [&] {
            if constexpr (std::is_convertible_v<A, const char*>) copy_text(f->text, args, sizeof f->text);
            else f->values[v++] = static_cast<long long>(args);
          }(),
          ...);
      __threadfence_system();
      atomicExch(ch.claim, 2u);
    }
    while (atomicAdd(ch.claim, 0u) != 2u) {
    }
  }
  __trap();
}

}  // namespace tilepipe::sm90
