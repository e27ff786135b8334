// The in-kernel profiler's recording side (Pallas Mosaic GPU's profile_space, without the
// hand-written scopes): with TILEPIPE_PROFILE defined, the pipelines, the copies and the
// wgmma ops record what they do, per warpgroup, into the buffer of a tp::profiler bound at
// launch (host/profiler.cuh reads it and writes a Perfetto trace). Without TILEPIPE_PROFILE
// every function here is empty and the generated code is that of a build without them.
//
// The warpgroup's leader thread records: it stamps the event with prim::profile_clock and
// writes it (one 16-byte store) at the warpgroup's cursor, which lives in the top bytes of
// the CTA's shared memory (profile_smem_reserve). A full track drops further events and
// counts them: a trace is truncated, never corrupted.
//
// Kernels add their own spans with tp::profile_scope:
//     { tp::profile_scope s("softmax");  ...  }     // a span named "softmax" on this track
#pragma once

#include "backend/primitives.cuh"
#include "core/profile_format.cuh"

namespace tilepipe {

namespace profile_detail {

/// The calling warpgroup's cursor: in the top bytes of its CTA's dynamic shared memory.
TP_HD TP_FORCEINLINE profile_cursor* cursor() {
  return reinterpret_cast<profile_cursor*>(prim::dynamic_smem() + prim::dynamic_smem_size() - profile_smem_reserve) +
         prim::warpgroup_index();
}

/// leader: the next `n` event records of the track, or null (not recording, or full: the
/// event is counted as dropped).
TP_HD TP_FORCEINLINE profile_event* take(int n) {
  profile_cursor* c = cursor();
  profile_event* e = c->next;
  if (e == nullptr) return nullptr;
  if (c->end - e < n) {
    ++c->dropped;
    return nullptr;
  }
  c->next = e + n;
  return e;
}

}  // namespace profile_detail

/// Records one event of the calling warpgroup (its leader writes; the others do nothing).
TP_HD TP_FORCEINLINE void profile_mark([[maybe_unused]] profile_kind kind, [[maybe_unused]] profile_phase phase,
                                       [[maybe_unused]] int operand = -1, [[maybe_unused]] long long step = -1) {
#if TP_PROFILE
  if (!prim::leader()) return;
  if (profile_event* e = profile_detail::take(1))
    *e = {prim::profile_clock(), kind, phase, static_cast<std::int16_t>(operand), static_cast<std::int32_t>(step)};
#endif
}

/// The begin and end of a span.
TP_HD TP_FORCEINLINE void profile_begin(profile_kind kind, int operand = -1, long long step = -1) {
  profile_mark(kind, profile_phase::begin, operand, step);
}
TP_HD TP_FORCEINLINE void profile_end(profile_kind kind, int operand = -1, long long step = -1) {
  profile_mark(kind, profile_phase::end, operand, step);
}

/// Names the calling warpgroup's track (memory, compute i); unnamed tracks are "warpgroup i".
TP_HD TP_FORCEINLINE void profile_set_role([[maybe_unused]] profile_role role, [[maybe_unused]] int index = 0) {
#if TP_PROFILE
  if (!prim::leader()) return;
  if (profile_track_header* h = profile_detail::cursor()->track) {
    h->role = role;
    h->role_index = static_cast<std::int16_t>(index);
  }
#endif
}

/// A user span on the calling warpgroup's track, from construction to destruction; the
/// first profile_name_chars characters of the name are kept.
class profile_scope {
 public:
  TP_HD TP_FORCEINLINE explicit profile_scope([[maybe_unused]] const char* name) {
#if TP_PROFILE
    if (!prim::leader()) return;
    profile_event* e = profile_detail::take(2);
    if (!e) return;
    alignas(16) char text[profile_name_chars] = {};
    for (int i = 0; i < profile_name_chars && name[i]; ++i) text[i] = name[i];
    e[1] = *reinterpret_cast<const profile_event*>(text);
    e[0] = {prim::profile_clock(), profile_kind::scope, profile_phase::begin, -1, -1};
#endif
  }
  TP_HD TP_FORCEINLINE ~profile_scope() { profile_end(profile_kind::scope); }
  profile_scope(const profile_scope&) = delete;
  profile_scope& operator=(const profile_scope&) = delete;
};

namespace profile_detail {

/// Each warpgroup's leader, when its CTA starts: points the cursor at the warpgroup's track
/// (track (linear CTA) * warpgroups + warpgroup) and anchors the clock. CTAs linearise x first.
TP_HD TP_FORCEINLINE void start([[maybe_unused]] const profile_buffer& b, [[maybe_unused]] const int (&cta)[3],
                                [[maybe_unused]] const int (&extent)[3], [[maybe_unused]] int warpgroups) {
#if TP_PROFILE
  if (!prim::leader()) return;
  profile_cursor* c = cursor();
  *c = {};
  if (!b.base) return;
  const int wg = prim::warpgroup_index();
  const long long linear = cta[0] + static_cast<long long>(extent[0]) * (cta[1] + static_cast<long long>(extent[1]) * cta[2]);
  auto* h = reinterpret_cast<profile_track_header*>(b.base + (linear * warpgroups + wg) * profile_track_bytes(b.capacity));
  h->sm = prim::sm_id();
  for (int a = 0; a < 3; ++a) h->cta[a] = cta[a];
  h->warpgroup = static_cast<std::int16_t>(wg);
  h->role = profile_role::warpgroup;
  h->role_index = static_cast<std::int16_t>(wg);
  h->generation = b.generation;
  h->start_global = prim::global_timer();
  h->start_clock = prim::profile_clock();
  c->track = h;
  c->next = reinterpret_cast<profile_event*>(h + 1);
  c->end = c->next + b.capacity;
#endif
}

/// Each warpgroup's leader, when its CTA ends: the event count, the drops, the end anchor.
TP_HD TP_FORCEINLINE void finish() {
#if TP_PROFILE
  if (!prim::leader()) return;
  profile_cursor* c = cursor();
  profile_track_header* h = c->track;
  if (!h) return;
  h->end_clock = prim::profile_clock();
  h->end_global = prim::global_timer();
  h->count = static_cast<std::uint32_t>(c->next - reinterpret_cast<profile_event*>(h + 1));
  h->dropped = c->dropped;
#endif
}

}  // namespace profile_detail
}  // namespace tilepipe
