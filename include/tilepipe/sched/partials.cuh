// Partial sums handed from one CTA to another through global memory (stream-K, split-K,
// split-KV attention, and from one device to the next in a reduce-scatter ring).
//
// A warpgroup stores its f32 accumulator into a slot of a workspace and publishes it with
// a flag; the warpgroup that finishes the tile waits for the flag and adds the slot into
// its own accumulator. A slot's layout is opaque, only these functions read it: each
// thread's elements in the order the fragment visits them (for_each), in 16-byte quads,
// interleaved with the other threads' quads, so that on the GPU every warp store and load
// is 512 contiguous bytes. (The interpreter's one thread holds the tile: row-major.)
#pragma once

#include "../backend/primitives.cuh"
#include "../ops/fragment.cuh"

namespace tilepipe {

/// Where the CTAs of one launch leave partial sums for each other: `slots` slots of
/// `slot_floats` floats (16-byte aligned), each with a flag that is 0 between launches.
struct partials_ref {
  float* data = nullptr;
  unsigned* flags = nullptr;
  int slots = 0;
  long long slot_floats = 0;

  TP_HD bool empty() const { return slots == 0; }
  TP_HD float* slot(int i) const { return data + i * slot_floats; }
  TP_HD unsigned* flag(int i) const { return flags + i; }
  /// Fails unless there are `n` slots of `floats` floats: what a grid that splits needs.
  TP_HD void require(int n, long long floats) const {
    TP_REQUIRE(slots >= n && slot_floats >= floats,
               "stream-K: the partial-sum workspace has %d slots of %lld floats; the grid needs %d of %lld", slots,
               slot_floats, n, floats);
  }
};

namespace detail {
template <class S>
struct alignas(4 * sizeof(S)) partial_quad {  // four of a thread's elements: one 16-byte (f32) or 8-byte store
  S v[4];
};

/// Where a warpgroup's M x N accumulator lies in a slot: quad j of thread t at quad
/// j * threads + t.
template <int M, int N>
struct partial_layout {
  static constexpr int per_thread = sizeof(accumulator<M, N>::v) / sizeof(float);  // elements one thread holds
  static constexpr int threads = M * N / per_thread;                              // threads holding the tile
  static_assert(per_thread % 4 == 0, "tilepipe: partial sums move in quads of 4 floats per thread");
  /// A thread's index among them, from the element it visits first: in the wgmma layout
  /// (ops/fragment.cuh) thread t starts at row 16 (t / 32) + (t % 32) / 4, column 2 (t % 4);
  /// the interpreter's thread at (0, 0).
  static TP_HD TP_FORCEINLINE int thread_of_first(int row, int col) { return 32 * (row / 16) + 4 * (row % 16) + col / 2; }
};
}  // namespace detail

/// Every thread of the warpgroup: writes the accumulator into a slot of M x N elements of S
/// (float, or a 16-bit type: the sums rounded, half the bytes; aligned to 4 elements; in this
/// device's memory or a peer's) in the layout above. Synchronise before another warpgroup
/// reads it (a flag, a semaphore).
template <int M, int N, class S>
TP_HD TP_FORCEINLINE void store_partial(const accumulator<M, N>& acc, S* slot) {
  using layout = detail::partial_layout<M, N>;
  prim::note_gmem_access(slot, sizeof(S) * M * N, true, "tp::store_partial");
  auto* dst = reinterpret_cast<detail::partial_quad<S>*>(slot);
  int e = 0, t = 0;  // the element's place in this thread's visiting order; the thread
  detail::partial_quad<S> q;
  acc.for_each([&](float v, int row, int col) {
    if (e == 0) t = layout::thread_of_first(row, col);
    q.v[e % 4] = from_float<S>(v);
    if (e % 4 == 3) dst[e / 4 * layout::threads + t] = q;
    ++e;
  });
}

/// Every thread of the warpgroup: adds a slot that store_partial wrote to the accumulator.
template <int M, int N, class S>
TP_HD TP_FORCEINLINE void add_partial(accumulator<M, N>& acc, const S* slot) {
  using layout = detail::partial_layout<M, N>;
  prim::note_gmem_access(slot, sizeof(S) * M * N, false, "tp::add_partial");
  const auto* src = reinterpret_cast<const detail::partial_quad<S>*>(slot);
  int e = 0, t = 0;
  detail::partial_quad<S> q;
  acc.for_each([&](float& v, int row, int col) {
    if (e == 0) t = layout::thread_of_first(row, col);
    if (e % 4 == 0) q = src[e / 4 * layout::threads + t];
    v += to_float(q.v[e % 4]);
    ++e;
  });
}

/// Every thread of the warpgroup: writes the accumulator into slot i and sets its flag.
template <int M, int N>
TP_HD TP_FORCEINLINE void publish_partial(const accumulator<M, N>& acc, const partials_ref& ws, int i) {
  store_partial(acc, ws.slot(i));
  prim::warpgroup_sync();  // every thread's stores precede the leader's release
  if (prim::leader()) prim::flag_release(ws.flag(i));
}

/// Every thread of the warpgroup: waits until slot i is published, adds it to the
/// accumulator and clears the flag (each slot is read once per launch).
template <int M, int N>
TP_HD TP_FORCEINLINE void accumulate_partial(accumulator<M, N>& acc, const partials_ref& ws, int i) {
  if (prim::leader()) prim::flag_acquire_reset(ws.flag(i));
  prim::warpgroup_sync();  // the leader's acquire precedes every thread's loads
  add_partial(acc, ws.slot(i));
}

/// Every thread of the warpgroup: counts this warpgroup's arrival on flag i, used as a
/// counter of `total` arrivals, after its partial results were written to the workspace;
/// returns, to every thread, whether it was the last. The last one clears the counter and
/// may read every slot the others wrote before arriving (the last of a tile's split-KV CTAs
/// combines them). Nobody waits, so any CTA order works.
TP_HD TP_FORCEINLINE bool arrive_last(const partials_ref& ws, int i, int total) {
  prim::warpgroup_sync();  // every thread's stores precede the leader's release
  bool last = false;
  if (prim::leader()) last = prim::counter_arrive_last(ws.flag(i), static_cast<unsigned>(total));
  return prim::warpgroup_sync_any(last);  // the leader's acquire precedes every thread's loads
}

}  // namespace tilepipe
