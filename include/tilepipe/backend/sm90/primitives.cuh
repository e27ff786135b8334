// The primitive interface (backend/primitives.cuh) on sm_90a: nvcc's device pass includes
// this file, and only it. Each primitive is one of the wrappers in this folder (CCCL
// cuda::ptx where CCCL has the instruction, inline PTX where not); register tiles are held
// in the layout wgmma writes its accumulators in.
#pragma once

#include "../primitives.cuh"  // the declarations defined here
#include "cluster.cuh"
#include "convert.cuh"
#include "debug_hangs.cuh"
#include "failure.cuh"
#include "grid_dependency.cuh"
#include "registers.cuh"
#include "signals.cuh"
#include "sync.cuh"
#include "timers.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

#include <cstdio>

namespace tilepipe::prim {

// ---- who am I --------------------------------------------------------------------------

TP_HD TP_FORCEINLINE bool leader() { return threadIdx.x % warpgroup_size == 0; }
TP_HD TP_FORCEINLINE bool leader_warp() { return threadIdx.x % warpgroup_size < 32; }
TP_HD TP_FORCEINLINE int thread_in_warpgroup() { return static_cast<int>(threadIdx.x % warpgroup_size); }
TP_HD TP_FORCEINLINE int warpgroup_threads() { return warpgroup_size; }
TP_HD TP_FORCEINLINE int warpgroup_index() { return static_cast<int>(threadIdx.x / warpgroup_size); }
TP_HD TP_FORCEINLINE int uniform_warpgroup_index() { return __shfl_sync(0xffffffffu, warpgroup_index(), 0); }
TP_HD TP_FORCEINLINE int cluster_rank() { return sm90::cluster_rank(); }
TP_HD TP_FORCEINLINE int cluster_size() { return sm90::cluster_size(); }

// No printf, also in debug builds: a call where a warpgroup runs on few registers (the
// memory warpgroup after setmaxnreg.dec) is an illegal instruction. The record carries the
// message to the host.
template <class... A>
TP_HD TP_FORCEINLINE void fail(failure_channel channel, const char* format, A... args) {
  sm90::fail_recorded(channel, format, args...);
}

// ---- execution barriers ----------------------------------------------------------------

TP_HD TP_FORCEINLINE void named_barrier_sync(int id, int threads) { sm90::named_barrier_sync(id, threads); }
TP_HD TP_FORCEINLINE void named_barrier_arrive(int id, int threads) { sm90::named_barrier_arrive(id, threads); }
TP_HD TP_FORCEINLINE void cluster_sync() { sm90::cluster_sync(); }
TP_HD TP_FORCEINLINE void warpgroup_sync() {
  sm90::named_barrier_sync(warpgroup_barrier_base + warpgroup_index(), warpgroup_size);
}

// ---- flags between CTAs ----------------------------------------------------------------

TP_HD TP_FORCEINLINE void flag_release(unsigned* flag) { sm90::flag_release(flag); }

TP_HD TP_FORCEINLINE void flag_acquire_reset(unsigned* flag) {
#if defined(TILEPIPE_DEBUG_HANGS)
  sm90::flag_acquire_reset_bounded(flag);
#else
  sm90::flag_acquire_reset(flag);
#endif
}

TP_HD TP_FORCEINLINE bool counter_arrive_last(unsigned* counter, unsigned total) {
  return sm90::counter_arrive_last(counter, total);
}
TP_HD TP_FORCEINLINE bool warpgroup_sync_any(bool value) {
  return sm90::named_barrier_sync_or(warpgroup_barrier_base + warpgroup_index(), warpgroup_size, value);
}

// ---- signals between devices -----------------------------------------------------------

TP_HD TP_FORCEINLINE void signal_add(unsigned* sem, unsigned inc) { sm90::signal_add(sem, inc); }
TP_HD TP_FORCEINLINE void signal_wait(const unsigned* sem, unsigned value) { sm90::signal_wait(sem, value); }
TP_HD TP_FORCEINLINE void note_gmem_access(const void*, std::size_t, bool, const char*) {}

// ---- mbarriers -------------------------------------------------------------------------

TP_HD TP_FORCEINLINE void mbarrier_init(std::uint64_t* bar, std::uint32_t count) { sm90::mbarrier_init(bar, count); }
TP_HD TP_FORCEINLINE void fence_barrier_init() { sm90::fence_barrier_init(); }
TP_HD TP_FORCEINLINE void mbarrier_inval(std::uint64_t* bar) { sm90::mbarrier_inval(bar); }
TP_HD TP_FORCEINLINE void mbarrier_name(std::uint64_t*, const char*, int, int) {}

TP_HD TP_FORCEINLINE smem_barrier barrier_at(std::uint64_t* bar) { return {sm90::opaque(sm90::smem_address(bar))}; }

TP_HD TP_FORCEINLINE void mbarrier_arrive(std::uint64_t* bar, std::uint32_t count) { sm90::mbarrier_arrive(bar, count); }

TP_HD TP_FORCEINLINE void mbarrier_arrive_per_warp(std::uint64_t* bar) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) sm90::mbarrier_arrive(bar, 1);
}

TP_HD TP_FORCEINLINE void mbarrier_arrive_per_warp(smem_barrier bar) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) sm90::mbarrier_arrive(bar.addr);
}

TP_HD TP_FORCEINLINE void mbarrier_arrive_per_warp_cluster(smem_barrier bar, std::uint16_t cta_mask) {
  __syncwarp();
  if (threadIdx.x % 32 == 0)
    for (unsigned m = cta_mask; m != 0; m &= m - 1) sm90::mbarrier_arrive_remote(bar.addr, __ffs(m) - 1);
}

TP_HD TP_FORCEINLINE void mbarrier_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
  sm90::mbarrier_arrive_expect_tx(bar, bytes);
}

TP_HD TP_FORCEINLINE void mbarrier_wait(std::uint64_t* bar, std::uint32_t parity, [[maybe_unused]] wait_site site) {
#if defined(TILEPIPE_DEBUG_HANGS)
  sm90::mbarrier_wait_bounded(bar, parity, site.slot, site.step);
#else
  while (!sm90::mbarrier_try_wait(bar, parity)) {
  }
#endif
}

TP_HD TP_FORCEINLINE void mbarrier_wait(smem_barrier bar, std::uint32_t parity, [[maybe_unused]] wait_site site) {
#if defined(TILEPIPE_DEBUG_HANGS)
  sm90::mbarrier_wait_bounded(static_cast<std::uint64_t*>(__cvta_shared_to_generic(bar.addr)), parity, site.slot,
                              site.step);
#else
  while (!sm90::mbarrier_try_wait(bar.addr, parity)) {
  }
#endif
}

// ---- fences ----------------------------------------------------------------------------

TP_HD TP_FORCEINLINE void fence_proxy_async() { sm90::fence_proxy_async_smem(); }

// ---- TMA -------------------------------------------------------------------------------

template <int R>
TP_HD TP_FORCEINLINE void tma_load(const tma_desc& map, void* dst, const int (&coords)[R], std::uint64_t* bar) {
  sm90::tma_load(dst, &map.map, coords, bar);
}

template <int R>
TP_HD TP_FORCEINLINE void tma_load_multicast(const tma_desc& map, void* dst, const int (&coords)[R], std::uint64_t* bar,
                                             std::uint16_t cta_mask) {
  sm90::tma_load_multicast(dst, &map.map, coords, bar, cta_mask);
}

template <int R>
TP_HD TP_FORCEINLINE void tma_store(const tma_desc& map, const void* src, const int (&coords)[R]) {
  sm90::tma_store(&map.map, coords, src);
}

TP_HD TP_FORCEINLINE void bulk_reduce_add(float* dst, const float* src, std::uint32_t bytes) {
  sm90::bulk_reduce_add(dst, src, bytes);
}

TP_HD TP_FORCEINLINE void bulk_commit() { sm90::bulk_commit(); }

template <int N>
TP_HD TP_FORCEINLINE void bulk_wait() {
  sm90::bulk_wait<N>();
}

template <int N>
TP_HD TP_FORCEINLINE void bulk_wait_read() {
  sm90::bulk_wait_read<N>();
}

// ---- wgmma -----------------------------------------------------------------------------

TP_HD TP_FORCEINLINE std::uint32_t smem_address(const void* p) { return sm90::smem_address(p); }
TP_HD TP_FORCEINLINE void wgmma_fence() { sm90::wgmma_fence(); }
TP_HD TP_FORCEINLINE void wgmma_commit() { sm90::wgmma_commit(); }

template <int N>
TP_HD TP_FORCEINLINE void wgmma_wait() {
  sm90::wgmma_wait<N>();
}

/// d is this thread's N/2 accumulator registers of the 64-row block.
template <int N, class T, int TransA, int TransB, class Acc>
TP_HD TP_FORCEINLINE void wgmma_ss(Acc&& d, int, std::uint64_t da, std::uint64_t db, int scale_d) {
  sm90::wgmma_op<N, std::is_same_v<T, bf16>>::template ss<TransA, TransB>(d, da, db, scale_d);
}

template <int N, class TA, class TB, class Acc>
TP_HD TP_FORCEINLINE void wgmma_ss_fp8(Acc&& d, int, std::uint64_t da, std::uint64_t db, int scale_d) {
  sm90::wgmma_fp8_op<N>::template ss<std::is_same_v<TA, fp8_e5m2>, std::is_same_v<TB, fp8_e5m2>>(d, da, db, scale_d);
}

template <class T>
struct rs_operand {
  std::uint32_t r[4];
};

/// This thread's 8 A values of k-block ks are registers 8 ks .. 8 ks + 7 of block mb,
/// packed in pairs into the 4 registers wgmma takes (from f32: one cvt per pair).
template <int K, class T, class A>
TP_HD TP_FORCEINLINE rs_operand<T> rs_pack(const A& a, int mb, int ks) {
  rs_operand<T> op;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const auto lo = a[mb][8 * ks + 2 * r], hi = a[mb][8 * ks + 2 * r + 1];
    if constexpr (std::is_same_v<std::remove_cv_t<decltype(lo)>, float>) {
      op.r[r] = sm90::pack_pair<T>(lo, hi);
    } else {
      std::uint16_t l, h;
      memcpy(&l, &lo, 2);
      memcpy(&h, &hi, 2);
      op.r[r] = static_cast<std::uint32_t>(l) | (static_cast<std::uint32_t>(h) << 16);
    }
  }
  return op;
}

template <class T>
TP_HD TP_FORCEINLINE void rs_pin(rs_operand<T>& op) {
#pragma unroll
  for (int r = 0; r < 4; ++r) sm90::fence_register(op.r[r]);
}

template <int N, class T, int TransB, class Acc>
TP_HD TP_FORCEINLINE void wgmma_rs(Acc&& d, const rs_operand<T>& a, std::uint64_t db, int scale_d) {
  sm90::wgmma_op<N, std::is_same_v<T, bf16>>::template rs<TransB>(d, a.r, db, scale_d);
}

// ---- shared memory ---------------------------------------------------------------------

TP_HD TP_FORCEINLINE unsigned char* dynamic_smem() {
  extern __shared__ __align__(1024) unsigned char tp_dynamic_smem[];
  return tp_dynamic_smem;
}

TP_HD TP_FORCEINLINE std::uint32_t dynamic_smem_size() { return sm90::dynamic_smem_size(); }

// The interpreter's checks and reports: no code on the GPU.
TP_HD TP_FORCEINLINE void poison(void*, std::size_t) {}
template <int R>
TP_HD TP_FORCEINLINE void note_block(const void*, const int (&)[R]) {}
TP_HD TP_FORCEINLINE void note_smem_read(const void*, std::size_t, const char*) {}
TP_HD TP_FORCEINLINE void note_smem_write(const void*, std::size_t, const char*) {}
TP_HD TP_FORCEINLINE void name_smem(const void*, std::size_t, const char*, int, int) {}
TP_HD TP_FORCEINLINE long long annotate_step(long long) { return -1; }

TP_HD TP_FORCEINLINE bool no_pipelining() {
#if defined(TILEPIPE_NO_PIPELINING)
  return true;
#else
  return false;
#endif
}

// ---- programmatic dependent launch ------------------------------------------------------

TP_HD TP_FORCEINLINE void grid_dependency_wait() { sm90::griddepcontrol_wait(); }
TP_HD TP_FORCEINLINE void launch_dependents() { sm90::griddepcontrol_launch_dependents(); }

// ---- profiler clocks -------------------------------------------------------------------

TP_HD TP_FORCEINLINE std::uint64_t profile_clock() { return sm90::clock64(); }
TP_HD TP_FORCEINLINE std::uint64_t global_timer() { return sm90::globaltimer(); }
TP_HD TP_FORCEINLINE int sm_id() { return sm90::smid(); }

// ---- registers and math ----------------------------------------------------------------

template <int Regs>
TP_HD TP_FORCEINLINE void setmaxnreg_inc() {
  sm90::setmaxnreg_inc<Regs>();
}

template <int Regs>
TP_HD TP_FORCEINLINE void setmaxnreg_dec() {
  sm90::setmaxnreg_dec<Regs>();
}

/// One MUFU.EX2 (relative error about 2^-22; subnormal results flush to 0, exp2(-inf) = 0).
TP_HD TP_FORCEINLINE float exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <class T>
TP_HD TP_FORCEINLINE uint4 e4m3x8_to(uint2 packed) {
  static_assert(wgmma_operand_type<T>, "tilepipe: e4m3 values convert to bf16 or f16");
  std::uint32_t out[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const std::uint32_t word = i < 2 ? packed.x : packed.y;
    const std::uint32_t f16x2 = sm90::cvt_f16x2_e4m3x2(static_cast<std::uint16_t>(word >> (16 * (i % 2))));
    if constexpr (std::is_same_v<T, f16>)
      out[i] = f16x2;
    else
      out[i] = sm90::cvt_bf16x2_f32(sm90::cvt_f32_f16(static_cast<std::uint16_t>(f16x2)),
                                    sm90::cvt_f32_f16(static_cast<std::uint16_t>(f16x2 >> 16)));
  }
  return {out[0], out[1], out[2], out[3]};
}

}  // namespace tilepipe::prim
