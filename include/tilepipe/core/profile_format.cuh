// What the in-kernel profiler writes (profile.cuh records it, host/profiler.cuh reads it):
// one track per warpgroup of each CTA, a 64-byte header and then fixed-size events.
//   buffer   track 0 | track 1 | ...        track t = (linear CTA) * warpgroups + warpgroup
//   track    header | event[capacity]
// Events carry the SM's cycle counter (a logical tick in the interpreter); the header
// anchors it to %globaltimer at the track's start and end, so the host converts cycles to
// nanoseconds and aligns the SMs.
#pragma once

#include "config.cuh"

#include <cstdint>

namespace tilepipe {

/// What happened. Spans have a begin and an end event, the others are instants.
enum class profile_kind : std::uint8_t {
  fetch,          // instant: a TMA load of an input block issued
  wait_ready,     // span: waiting for an input block to land
  wait_consumed,  // span (memory warpgroup): waiting until the compute side released a slot
  release,        // instant (compute): an input slot released to the memory warpgroup
  body,           // span: the pipeline's body at one step
  wait_output,    // span: waiting until an output slot's previous store has read it
  written,        // instant (compute): an output block written, handed to the memory warpgroup
  wait_written,   // span (memory warpgroup): waiting until the compute side wrote an output block
  store,          // instant: a TMA store of an output block issued
  wait_store,     // span: waiting for stores (their reads of SMEM, or their writes)
  wgmma,          // instant: a tp::wgmma issued (one group of instructions)
  wgmma_wait,     // span: tp::wgmma_wait, or the pipeline's wait for delayed releases
  barrier_wait,   // span: tp::barrier_wait on a user barrier
  epilogue,       // span: a compute_context's code after its pipeline returned
  tile,           // span: one item of a persistent loop (tp::warp_specialized_for)
  scope,          // span: a user scope (tp::profile_scope); its begin is followed by a name record
  count
};

enum class profile_phase : std::uint8_t { instant, begin, end };

/// Who a track belongs to (the track's name in traces).
enum class profile_role : std::int16_t { warpgroup, memory, compute };

/// One event: 16 bytes, written with one store.
struct alignas(16) profile_event {
  std::uint64_t time;     // SM cycles (GPU) or logical ticks (interpreter)
  profile_kind kind;
  profile_phase phase;
  std::int16_t operand;   // the pipeline operand (inputs, then outputs), or -1
  std::int32_t step;      // the pipeline step, persistent-loop item, or -1
};
static_assert(sizeof(profile_event) == 16);

/// Characters of a user scope's name kept (the record after its begin event).
inline constexpr int profile_name_chars = 16;

struct alignas(64) profile_track_header {
  std::uint64_t start_global, start_clock;  // %globaltimer (ns) and the clock, read together at the start
  std::uint64_t end_global, end_clock;      // and at the end
  std::uint32_t count;                      // events written
  std::uint32_t dropped;                    // events that did not fit (the track is truncated)
  std::int32_t sm;                          // the SM (the CTA's position in the interpreter's order)
  std::int32_t cta[3];
  std::int16_t warpgroup;
  profile_role role;
  std::int16_t role_index;                  // which compute warpgroup
  std::uint16_t generation;                 // the launch that wrote the track (profile_buffer)
};
static_assert(sizeof(profile_track_header) == 64);

/// Where a launch's events go (a kernel parameter while profiling).
struct profile_buffer {
  unsigned char* base = nullptr;  // null: this launch records nothing
  std::uint32_t capacity = 0;     // events per track
  std::uint16_t generation = 0;   // which launch of the buffer this is: tracks the launch did not
                                  // write keep an older one, so the buffer is not cleared per launch
};

TP_HD constexpr std::uint64_t profile_track_bytes(std::uint32_t capacity) {
  return sizeof(profile_track_header) + static_cast<std::uint64_t>(capacity) * sizeof(profile_event);
}

/// A warpgroup's write position, kept in the top bytes of its CTA's shared memory.
struct profile_cursor {
  profile_event* next;  // null: not recording
  profile_event* end;
  profile_track_header* track;
  std::uint32_t dropped;
  std::uint32_t unused;
};
static_assert(sizeof(profile_cursor) == 32);

/// Shared memory the profiler takes from the top of each CTA's dynamic shared memory
/// (one cursor per warpgroup), only in TILEPIPE_PROFILE builds.
inline constexpr std::uint32_t profile_smem_reserve = profiling ? max_warpgroups * sizeof(profile_cursor) : 0;

/// The name of a kind in traces.
inline const char* profile_kind_name(profile_kind k) {
  switch (k) {
    case profile_kind::fetch: return "fetch";
    case profile_kind::wait_ready: return "wait ready";
    case profile_kind::wait_consumed: return "wait consumed";
    case profile_kind::release: return "release";
    case profile_kind::body: return "body";
    case profile_kind::wait_output: return "wait output slot";
    case profile_kind::written: return "written";
    case profile_kind::wait_written: return "wait written";
    case profile_kind::store: return "store";
    case profile_kind::wait_store: return "wait store";
    case profile_kind::wgmma: return "wgmma";
    case profile_kind::wgmma_wait: return "wgmma wait";
    case profile_kind::barrier_wait: return "barrier wait";
    case profile_kind::epilogue: return "epilogue";
    case profile_kind::tile: return "tile";
    case profile_kind::scope: return "scope";
    default: return "?";
  }
}

}  // namespace tilepipe
