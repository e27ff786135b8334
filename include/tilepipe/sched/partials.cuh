// Partial sums handed from one CTA to another through global memory (stream-K, split-K).
//
// A warpgroup stores its f32 accumulator into a slot of a workspace and publishes it with
// a flag; the warpgroup that finishes the tile waits for the flag and adds the slot into
// its own accumulator. A slot's layout is opaque, only these functions read it: on the GPU
// each thread writes its registers interleaved with the other threads' (every warp store is
// 512 contiguous bytes), in the interpreter the tile is row-major.
#pragma once

#include "../backend/primitives.cuh"
#include "../ops/fragment.cuh"

#include <cstring>

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
};

/// Every thread of the warpgroup: writes the accumulator into slot i and sets its flag.
template <int M, int N>
TP_HD TP_FORCEINLINE void publish_partial(const accumulator<M, N>& acc, const partials_ref& ws, int i) {
  float* dst = ws.slot(i);
#if TP_DEVICE_PASS
  const int t = static_cast<int>(threadIdx.x % warpgroup_size);
  float4* out = reinterpret_cast<float4*>(dst);
#pragma unroll
  for (int b = 0; b < acc.blocks; ++b)
#pragma unroll
    for (int q = 0; q < acc.per_block / 4; ++q)
      __stcg(out + (b * (acc.per_block / 4) + q) * warpgroup_size + t,
             make_float4(acc.v[b][4 * q], acc.v[b][4 * q + 1], acc.v[b][4 * q + 2], acc.v[b][4 * q + 3]));
#else
  std::memcpy(dst, acc.v, sizeof acc.v);
#endif
  prim::warpgroup_sync();  // every thread's stores precede the leader's release
  if (prim::leader()) prim::flag_release(ws.flag(i));
}

/// Every thread of the warpgroup: waits until slot i is published, adds it to the
/// accumulator and clears the flag (each slot is read once per launch).
template <int M, int N>
TP_HD TP_FORCEINLINE void accumulate_partial(accumulator<M, N>& acc, const partials_ref& ws, int i) {
  if (prim::leader()) prim::flag_acquire_reset(ws.flag(i));
  prim::warpgroup_sync();  // the leader's acquire precedes every thread's loads
  const float* src = ws.slot(i);
#if TP_DEVICE_PASS
  const int t = static_cast<int>(threadIdx.x % warpgroup_size);
  const float4* in = reinterpret_cast<const float4*>(src);
#pragma unroll
  for (int b = 0; b < acc.blocks; ++b)
#pragma unroll
    for (int q = 0; q < acc.per_block / 4; ++q) {
      const float4 p = __ldcg(in + (b * (acc.per_block / 4) + q) * warpgroup_size + t);
      acc.v[b][4 * q] += p.x, acc.v[b][4 * q + 1] += p.y, acc.v[b][4 * q + 2] += p.z, acc.v[b][4 * q + 3] += p.w;
    }
#else
  for (int e = 0; e < M * N; ++e) acc.v[e] += src[e];
#endif
}

}  // namespace tilepipe
