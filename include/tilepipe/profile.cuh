// The in-kernel profiler's recording side (Pallas Mosaic GPU's profile_space, without the
// hand-written scopes): with TILEPIPE_PROFILE defined, the pipelines and the persistent
// loop record what they do, per warpgroup, into the buffer of a tp::profiler bound at
// launch (host/profiler.cuh reads it and writes a Perfetto trace). Without TILEPIPE_PROFILE
// the recorder is empty and the generated code is that of a build without it.
//
// Each thread's kernel_context holds a recorder: the write position of its warpgroup's
// track, in registers. Every thread of the warpgroup advances it alike (no divergent
// branch); the leader thread stores each event, stamped with prim::profile_clock, with
// one predicated 16-byte store. A full track drops further records and counts them: a
// trace is truncated, never corrupted.
//
// Kernels add their own spans with tp::profile_scope:
//     { tp::profile_scope s(ctx, "softmax");  ...  }   // a span named "softmax"
#pragma once

#include "backend/primitives.cuh"
#include "core/profile_format.cuh"

namespace tilepipe {

/// One warpgroup's write position in its track (a member of kernel_context): four registers
/// and a predicate. Not recording (no profiler bound) is capacity 0, not a branch.
class profile_recorder {
 public:
  /// When the CTA starts: the warpgroup's track is (linear CTA) * warpgroups + warpgroup,
  /// CTAs linearised x first; anchors the clock.
  TP_HD TP_FORCEINLINE void start(const profile_buffer& b, const int (&cta)[3], const int (&extent)[3], int warpgroups) {
    if (!b.base) return;
    leader_ = prim::leader();
    capacity_ = b.capacity;
    const int wg = prim::warpgroup_index();
    const long long linear = cta[0] + static_cast<long long>(extent[0]) * (cta[1] + static_cast<long long>(extent[1]) * cta[2]);
    auto* track = reinterpret_cast<profile_track_header*>(b.base + (linear * warpgroups + wg) * profile_track_bytes(b.capacity));
    events_ = reinterpret_cast<profile_event*>(track + 1);
    if (!leader_) return;
    track->sm = prim::sm_id();
    for (int a = 0; a < 3; ++a) track->cta[a] = cta[a];
    track->warpgroup = static_cast<std::int16_t>(wg);
    track->role = profile_role::warpgroup;
    track->role_index = static_cast<std::int16_t>(wg);
    track->generation = b.generation;
    track->start_global = prim::global_timer();
    track->start_clock = prim::profile_clock();
  }

  /// The clock, for a span recorded whole: read it where the span begins, pass it to span().
  TP_HD TP_FORCEINLINE std::uint64_t clock() const { return prim::profile_clock(); }

  /// Records one event (a record past the track's capacity is counted, not written). No
  /// branch: the clock is read and the position advanced also when nothing is recorded
  /// (capacity 0), so that the code around the pipelines' waits stays straight.
  TP_HD TP_FORCEINLINE void mark(profile_kind kind, profile_phase phase, int operand, long long step) {
    put(static_cast<std::uint32_t>(prim::profile_clock()), 0, profile_event::pack(kind, phase, operand), step);
  }

  /// Records a whole span that began at clock `begin` (from clock()) and ends now.
  TP_HD TP_FORCEINLINE void span(profile_kind kind, std::uint64_t begin, int operand, long long step) {
    const auto now = static_cast<std::uint32_t>(prim::profile_clock());
    put(now, now - static_cast<std::uint32_t>(begin), profile_event::pack(kind, profile_phase::span, operand), step);
  }

  /// A user scope's begin: the event and a record with the first profile_name_chars
  /// characters of its name (left out when only the event fits).
  TP_HD TP_FORCEINLINE void begin_scope(const char* name) {
    const std::uint32_t i = count_;
    mark(profile_kind::scope, profile_phase::begin, -1, -1);
    ++count_;
    if (!leader_ || i + 1 >= capacity_) return;
    alignas(16) char text[profile_name_chars] = {};
    for (int c = 0; c < profile_name_chars && name[c]; ++c) text[c] = name[c];
    events_[i + 1] = *reinterpret_cast<const profile_event*>(text);
  }

  /// Names the track (memory, compute i); unnamed tracks are "warpgroup i".
  TP_HD TP_FORCEINLINE void set_role(profile_role role, int index) {
    if (!events_ || !leader_) return;
    header()->role = role;
    header()->role_index = static_cast<std::int16_t>(index);
  }

  /// When the CTA ends: the records written, those dropped, the end anchor.
  TP_HD TP_FORCEINLINE void finish() {
    if (!events_ || !leader_) return;
    profile_track_header* h = header();
    h->end_clock = prim::profile_clock();
    h->end_global = prim::global_timer();
    h->count = count_ < capacity_ ? count_ : capacity_;
    h->dropped = count_ - h->count;
  }

 private:
  TP_HD profile_track_header* header() const { return reinterpret_cast<profile_track_header*>(events_) - 1; }

  TP_HD TP_FORCEINLINE void put(std::uint32_t time, std::uint32_t lead, std::uint32_t what, long long step) {
    const std::uint32_t i = count_++;
    if (leader_ && i < capacity_) events_[i] = {time, lead, what, static_cast<std::int32_t>(step)};
  }

  profile_event* events_ = nullptr;  // the track's records; null: not recording
  std::uint32_t count_ = 0;          // records taken, written or dropped
  std::uint32_t capacity_ = 0;
  bool leader_ = false;
};

}  // namespace tilepipe
