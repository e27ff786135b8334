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
// trace is truncated, never corrupted. The library records through a profile_recorder_ref (a
// pointer to that recorder, kernel_context::profiler()), which every pipelined operand is
// given when it is allocated: no pipeline call takes the context only to record.
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

/// The calling warpgroup's track as the library and kernels record on it: what
/// kernel_context::profiler() returns and what a pipelined operand keeps from its
/// allocation. Without TILEPIPE_PROFILE it is empty and every call compiles to nothing;
/// with it, the events of kinds this build does not record (TILEPIPE_PROFILE_COARSE) too.
class profile_recorder_ref {
 public:
  profile_recorder_ref() = default;
#if TP_PROFILE
  TP_HD explicit profile_recorder_ref(profile_recorder& r) : r_(&r) {}
#endif

  /// An event of `kind`: an instant, or a span's begin or end.
  TP_HD void mark([[maybe_unused]] profile_kind kind, [[maybe_unused]] profile_phase phase,
                  [[maybe_unused]] int operand = -1, [[maybe_unused]] long long step = -1) const {
#if TP_PROFILE
    if (profile_records(kind)) r_->mark(kind, phase, operand, step);
#endif
  }
  TP_HD void begin(profile_kind kind, int operand = -1, long long step = -1) const {
    mark(kind, profile_phase::begin, operand, step);
  }
  TP_HD void end(profile_kind kind, int operand = -1, long long step = -1) const {
    mark(kind, profile_phase::end, operand, step);
  }
  /// Where a span of `kind` recorded whole (span()) begins: the clock (0 when this build
  /// does not record the kind).
  TP_HD std::uint64_t clock([[maybe_unused]] profile_kind kind) const {
#if TP_PROFILE
    if (profile_records(kind)) return r_->clock();
#endif
    return 0;
  }
  /// A span that began at clock() `begin` and ends now, in one record.
  TP_HD void span([[maybe_unused]] profile_kind kind, [[maybe_unused]] std::uint64_t begin,
                  [[maybe_unused]] int operand = -1, [[maybe_unused]] long long step = -1) const {
#if TP_PROFILE
    if (profile_records(kind)) r_->span(kind, begin, operand, step);
#endif
  }
  /// Runs wait() and records it as a span of `kind` (one record).
  template <class Wait>
  TP_HD void wait(profile_kind kind, int operand, long long step, Wait&& w) const {
    const std::uint64_t from = clock(kind);
    w();
    span(kind, from, operand, step);
  }
  /// Names the track (memory, compute i).
  TP_HD void set_role([[maybe_unused]] profile_role role, [[maybe_unused]] int index = 0) const {
#if TP_PROFILE
    r_->set_role(role, index);
#endif
  }
  /// A user scope's begin (profile_scope); its end is end(profile_kind::scope).
  TP_HD void begin_scope([[maybe_unused]] const char* name) const {
#if TP_PROFILE
    r_->begin_scope(name);
#endif
  }
  /// The launch starts the track when the CTA starts (profile_recorder::start) and ends it
  /// when the CTA ends.
  TP_HD void start([[maybe_unused]] const profile_buffer& b, [[maybe_unused]] const int (&cta)[3],
                   [[maybe_unused]] const int (&extent)[3], [[maybe_unused]] int warpgroups) const {
#if TP_PROFILE
    r_->start(b, cta, extent, warpgroups);
#endif
  }
  TP_HD void finish() const {
#if TP_PROFILE
    r_->finish();
#endif
  }

 private:
#if TP_PROFILE
  profile_recorder* r_ = nullptr;
#endif
};

}  // namespace tilepipe
