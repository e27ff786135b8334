// What the in-kernel profiler writes (profile.cuh records it, host/profiler.cuh reads it):
// one track per warpgroup of each CTA, a 64-byte header and then fixed-size events.
//   buffer   track 0 | track 1 | ...        track t = (linear CTA) * warpgroups + warpgroup
//   track    header | event[capacity]
// Events carry the low 32 bits of the SM's cycle counter (a logical tick in the
// interpreter), extended on the host from the track's start (a track may last 2^32
// cycles, over two seconds); the header anchors the counter to %globaltimer at the
// track's start and end, so the host converts cycles to nanoseconds and aligns the SMs.
#pragma once

#include "config.cuh"

#include <cstdint>

namespace tilepipe {

/// What happened. Spans have a begin and an end event, the others are instants. The kinds
/// before `epilogue` are per pipeline step (left out with TILEPIPE_PROFILE_COARSE).
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
  wgmma_wait,     // span: the pipeline's wait for the wgmmas a delayed release left in flight
  epilogue,       // span: a compute_context's code after its pipeline returned
  tile,           // span: one item of a persistent loop (tp::warp_specialized_for)
  scope,          // span: a user scope (tp::profile_scope); its begin is followed by a name record
  count
};

/// Whether this build records events of kind k.
TP_HD constexpr bool profile_records(profile_kind k) {
  return profiling && (profiling_steps || static_cast<int>(k) >= static_cast<int>(profile_kind::epilogue));
}

/// instant: a point in time; begin / end: the two ends of a span (spans that contain
/// others: tiles, epilogues, user scopes); span: a whole span in one record (the waits and
/// bodies of a step: one store instead of two), which began `lead` clock units before `time`.
enum class profile_phase : std::uint8_t { instant, begin, end, span };

/// Who a track belongs to (the track's name in traces).
enum class profile_role : std::int16_t { warpgroup, memory, compute };

/// One event: 16 bytes, written with one vector store.
struct alignas(16) profile_event {
  std::uint32_t time;  // the low 32 bits of the clock (SM cycles, or interpreter ticks); a span's end
  std::uint32_t lead;  // a span record's length, in clock units (0 for the other phases)
  std::uint32_t what;  // kind | phase << 8 | (operand + 1) << 16
  std::int32_t step;   // the pipeline step, persistent-loop item, or -1

  TP_HD static constexpr std::uint32_t pack(profile_kind k, profile_phase p, int operand) {
    return static_cast<std::uint32_t>(k) | static_cast<std::uint32_t>(p) << 8 | static_cast<std::uint32_t>(operand + 1) << 16;
  }
  TP_HD constexpr profile_kind kind() const { return static_cast<profile_kind>(what & 0xff); }
  TP_HD constexpr profile_phase phase() const { return static_cast<profile_phase>((what >> 8) & 0xff); }
  TP_HD constexpr int operand() const { return static_cast<int>(what >> 16) - 1; }
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
    case profile_kind::wgmma_wait: return "wgmma wait";
    case profile_kind::epilogue: return "epilogue";
    case profile_kind::tile: return "tile";
    case profile_kind::scope: return "scope";
    default: return "?";
  }
}

}  // namespace tilepipe
