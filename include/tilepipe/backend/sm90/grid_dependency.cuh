// sm_90 programmatic dependent launch: one wrapper per PTX instruction. A kernel launched
// with the programmatic-stream-serialization attribute may start while the previous kernel
// in its stream still runs; it must wait (griddepcontrol.wait) before it reads what that
// kernel writes. The previous kernel lets it start early with griddepcontrol.launch_dependents.
// Device pass only (through sm90/primitives.cuh).
#pragma once

#include "../../core/config.cuh"

namespace tilepipe::sm90 {

/// griddepcontrol.wait: blocks until the grids this one depends on have completed and
/// their memory operations are visible. Returns at once in a grid launched without the
/// attribute.
TP_DEVICE TP_FORCEINLINE void griddepcontrol_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

/// griddepcontrol.launch_dependents: this CTA no longer holds back the launch of the next
/// grid in the stream (which starts once every CTA has said so, or exited).
TP_DEVICE TP_FORCEINLINE void griddepcontrol_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

}  // namespace tilepipe::sm90
