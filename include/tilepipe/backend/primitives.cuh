// The primitive interface: every device operation that pipelines, ops and kernels use,
// declared here with what it does. Exactly one implementation defines them in each pass:
//   backend/sm90/primitives.cuh       nvcc's device pass: the sm_90a instructions
//   backend/interpret/primitives.hpp  the host pass and plain C++ compilers: the CPU interpreter
// Both define these functions with these signatures in tilepipe::prim, all TP_HD, so that
// the code calling them compiles in both of nvcc's passes while each pass sees one
// definition. The #if at the end is the only place that picks a backend: nothing outside
// backend/ (and core/config.cuh) knows which pass it is compiled in.
//
// Who calls: every thread of the warpgroup, unless marked "leader" (the calling thread
// issues alone: guard with `if (prim::leader())`). The interpreter runs a warpgroup as one
// host thread: the leader. Primitives marked "interpreter" serve its checks
// and reports and compile to nothing on the GPU.
#pragma once

#include "../core/config.cuh"
#include "../core/dtypes.cuh"
#include "../core/error.cuh"
#include "../core/tma_desc.cuh"
#include "../core/wgmma_desc.cuh"

#include <cstddef>
#include <cstdint>

namespace tilepipe::prim {

/// Named-barrier ids tilepipe reserves; kernels may use ids from user_barrier_base to 15.
inline constexpr int cta_barrier_id = 0;
inline constexpr int warpgroup_barrier_base = 1;  // 1 + warpgroup index
inline constexpr int compute_team_barrier_id = 5;  // the compute warpgroups of a warp-specialised pipeline
inline constexpr int register_handoff_barrier_id = 6;  // all warpgroups, where a warp-specialised split gives registers back
inline constexpr int user_barrier_base = 8;

/// A barrier by its shared-window address, computed once (barrier_at) and kept in a
/// register: a pipeline's per-step waits and arrivals use it instead of converting a
/// generic pointer every time.
struct smem_barrier {
  std::uint32_t addr = 0;
  TP_HD smem_barrier operator+(int i) const { return {addr + 8u * static_cast<std::uint32_t>(i)}; }
};

/// Where a barrier wait is, when the caller knows: for the interpreter's reports and the
/// GPU debug mode's hang messages (unused, and free, otherwise).
struct wait_site {
  int slot = -1;
  long long step = -1;
};

/// An element of a register tile as tile_registers::for_each visits it: its row and
/// column (relative to the window visited) and the slot of its row in a row vector.
struct tile_index {
  int row, col, row_slot;
};

// ---- who am I --------------------------------------------------------------------------
/// The warpgroup's issuing thread (lane 0 of its first warp).
TP_HD TP_FORCEINLINE bool leader();
/// The warpgroup's first warp.
TP_HD TP_FORCEINLINE bool leader_warp();
/// This thread's index in its warpgroup and the warpgroup's threads, for loops a warpgroup shares.
TP_HD TP_FORCEINLINE int thread_in_warpgroup();
TP_HD TP_FORCEINLINE int warpgroup_threads();
/// The calling warpgroup's index in its CTA.
TP_HD TP_FORCEINLINE int warpgroup_index();
/// The same, as a value the compiler knows to be equal in all lanes of the warp (on the GPU
/// lane 0's, broadcast; the whole warp must call it converged). Code that branches on it or
/// builds wgmma descriptors from it then stays in uniform registers: without it, every
/// descriptor is built per thread and moved to uniform registers (R2UR) at each use.
TP_HD TP_FORCEINLINE int uniform_warpgroup_index();
/// This CTA's rank in its thread-block cluster, and the cluster's size (1 without clusters).
TP_HD TP_FORCEINLINE int cluster_rank();
TP_HD TP_FORCEINLINE int cluster_size();

/// Fails a runtime check whose message the host must see without a debug build: throws in
/// the interpreter; on the GPU the first failing thread writes the format and arguments (at
/// most one string) to the launch's failure record, which the launch reports, and traps.
template <class... A>
TP_HD TP_FORCEINLINE void fail(failure_channel channel, const char* format, A... args);

// ---- execution barriers ----------------------------------------------------------------
/// bar.sync among `threads` threads (whole warpgroups) on named barrier `id`.
TP_HD TP_FORCEINLINE void named_barrier_sync(int id, int threads);
/// bar.arrive: the calling warpgroup counts towards named barrier `id`'s `threads` without
/// waiting (a producer's signal to warpgroups that bar.sync on it).
TP_HD TP_FORCEINLINE void named_barrier_arrive(int id, int threads);
/// All threads of all CTAs of the cluster: barrier initialisations and SMEM writes before it are visible to
/// every CTA after it.
TP_HD TP_FORCEINLINE void cluster_sync();
/// The 128 threads of the calling warpgroup.
TP_HD TP_FORCEINLINE void warpgroup_sync();

// ---- flags between CTAs ----------------------------------------------------------------
/// leader: sets a global flag to 1, a release at GPU scope: a CTA that sees the 1 (flag_acquire_reset) sees
/// every global write this warpgroup made before the warpgroup_sync that precedes the call.
TP_HD TP_FORCEINLINE void flag_release(unsigned* flag);
/// leader: waits until a flag is 1 (an acquire at GPU scope), then clears it for the next launch. On the GPU
/// the setter must be resident (a CTA of the same persistent grid); the interpreter runs the grid's next CTAs
/// ahead while the flag is clear, and reports a deadlock when none is left.
TP_HD TP_FORCEINLINE void flag_acquire_reset(unsigned* flag);
/// leader: counts one arrival on a global counter (an add with acquire-release at GPU scope)
/// and returns whether it was the `total`-th, which also clears the counter for the next
/// launch. Nobody waits: the last of several CTAs finishes their shared work (split-KV's
/// combine), and sees every global write the others made before the warpgroup_sync that
/// precedes their arrivals.
TP_HD TP_FORCEINLINE bool counter_arrive_last(unsigned* counter, unsigned total);
/// The 128 threads of the calling warpgroup: a warpgroup_sync that returns, to every thread,
/// whether any of them passed true (bar.red.or): a leader's finding for the whole warpgroup.
TP_HD TP_FORCEINLINE bool warpgroup_sync_any(bool value);

// ---- signals between devices -----------------------------------------------------------
/// leader: adds `inc` to a semaphore word in global memory, this device's or a peer's (a
/// pointer into a symmetric buffer, tp::remote): a release at system scope, so a device that
/// sees the sum (signal_wait) sees every global write, ordinary or by TMA, that this thread
/// made, or saw made, before it. TMA stores count only once waited for (bulk_wait<0>).
TP_HD TP_FORCEINLINE void signal_add(unsigned* sem, unsigned inc);
/// leader: waits until this device's semaphore word reaches `value` (compared modulo 2^32,
/// so counts may wrap), an acquire at system scope: afterwards the thread's ordinary and TMA
/// accesses see what the signallers published. The interpreter runs other CTAs and devices
/// meanwhile, and reports a deadlock when none can signal.
TP_HD TP_FORCEINLINE void signal_wait(const unsigned* sem, unsigned value);
/// interpreter: the calling warpgroup reads / writes [p, p + bytes) of global memory with
/// ordinary accesses, as `what`: the race detector checks those inside symmetric buffers
/// against the other devices' accesses.
TP_HD TP_FORCEINLINE void note_gmem_access(const void* p, std::size_t bytes, bool write, const char* what);

// ---- mbarriers -------------------------------------------------------------------------
/// leader: initialises an mbarrier completing a phase after `count` arrivals.
TP_HD TP_FORCEINLINE void mbarrier_init(std::uint64_t* bar, std::uint32_t count);
/// leader: makes initialised barriers visible to TMA and to the other threads.
TP_HD TP_FORCEINLINE void fence_barrier_init();
/// leader: invalidates a barrier whose memory is about to be reused (the interpreter checks that it is idle:
/// no waiter, no pending arrival, transaction or load).
TP_HD TP_FORCEINLINE void mbarrier_inval(std::uint64_t* bar);
/// interpreter: names a barrier in reports, e.g. ("ready", operand 1, slot 2).
TP_HD TP_FORCEINLINE void mbarrier_name(std::uint64_t* bar, const char* kind, int operand, int slot);
/// The shared-window address of a barrier, for the smem_barrier overloads.
TP_HD TP_FORCEINLINE smem_barrier barrier_at(std::uint64_t* bar);
/// leader: `count` arrivals.
TP_HD TP_FORCEINLINE void mbarrier_arrive(std::uint64_t* bar, std::uint32_t count = 1);
/// One arrival per warp, after every lane of the warp got here (so the warp's earlier SMEM reads are ordered
/// before it): a warpgroup arrives 4 times.
TP_HD TP_FORCEINLINE void mbarrier_arrive_per_warp(std::uint64_t* bar);
TP_HD TP_FORCEINLINE void mbarrier_arrive_per_warp(smem_barrier bar);
/// One arrival per warp on the barrier at bar's offset in each CTA of the cluster whose rank's bit is set in
/// cta_mask: releases a slot that those CTAs' multicast loads write.
TP_HD TP_FORCEINLINE void mbarrier_arrive_per_warp_cluster(smem_barrier bar, std::uint16_t cta_mask);
/// leader: expects `bytes` more transaction bytes in this phase and arrives once.
TP_HD TP_FORCEINLINE void mbarrier_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes);
/// Waits until the phase of the given parity has completed (with TILEPIPE_DEBUG_HANGS the GPU gives up after
/// about a second, says where it was, and traps).
TP_HD TP_FORCEINLINE void mbarrier_wait(std::uint64_t* bar, std::uint32_t parity, wait_site site = {});
TP_HD TP_FORCEINLINE void mbarrier_wait(smem_barrier bar, std::uint32_t parity, wait_site site = {});

// ---- fences ----------------------------------------------------------------------------
/// Orders this thread's ordinary SMEM writes before TMA / wgmma reads (then synchronise).
TP_HD TP_FORCEINLINE void fence_proxy_async();

// ---- TMA -------------------------------------------------------------------------------
/// leader: loads the box at coords (TMA order, innermost first) into dst; completes the box's bytes of
/// transactions on bar.
template <int R>
TP_HD TP_FORCEINLINE void tma_load(const tma_desc& map, void* dst, const int (&coords)[R], std::uint64_t* bar);
/// leader: loads the box at coords into dst's offset in every CTA of the cluster whose bit is set in
/// cta_mask, each completing the box's bytes on the barrier at bar's offset in its own CTA.
template <int R>
TP_HD TP_FORCEINLINE void tma_load_multicast(const tma_desc& map, void* dst, const int (&coords)[R], std::uint64_t* bar,
                                             std::uint16_t cta_mask);
/// leader: stores src to the box at coords; out-of-bounds elements are dropped.
template <int R>
TP_HD TP_FORCEINLINE void tma_store(const tma_desc& map, const void* src, const int (&coords)[R]);
/// leader: closes the current bulk async group (the stores issued since the last commit).
TP_HD TP_FORCEINLINE void bulk_commit();
/// leader: waits until at most N bulk groups are pending (their writes done).
template <int N>
TP_HD TP_FORCEINLINE void bulk_wait();
/// leader: waits until at most N bulk groups still read their shared memory.
template <int N>
TP_HD TP_FORCEINLINE void bulk_wait_read();
/// leader: adds the f32 values of [src, src + bytes) in shared memory to those of [dst, dst +
/// bytes) in global memory, element by element (cp.reduce.async.bulk .add.f32; both 16-byte
/// aligned, bytes a multiple of 16), as part of the current bulk async group: src may be
/// rewritten once bulk_wait_read lets the group go. Each addition is atomic, so the sums of
/// several CTAs meet in whatever order they arrive.
TP_HD TP_FORCEINLINE void bulk_reduce_add(float* dst, const float* src, std::uint32_t bytes);

// ---- wgmma -----------------------------------------------------------------------------
/// Shared-window address of a pointer into shared memory (for descriptors).
TP_HD TP_FORCEINLINE std::uint32_t smem_address(const void* p);
/// Orders register accesses to accumulators before the wgmmas that follow.
TP_HD TP_FORCEINLINE void wgmma_fence();
/// Closes the group of wgmmas issued since the last commit.
TP_HD TP_FORCEINLINE void wgmma_commit();
/// Waits until at most N wgmma groups of this warpgroup are in flight.
template <int N>
TP_HD TP_FORCEINLINE void wgmma_wait();
/// One m64nNk16 wgmma, A and B in shared memory: d (a tile_registers::block of an N-column accumulator, row
/// stride ld in the interpreter) (+)= A * B.
template <int N, class T, int TransA, int TransB, class Acc>
TP_HD TP_FORCEINLINE void wgmma_ss(Acc&& d, int ld, std::uint64_t da, std::uint64_t db, int scale_d);
/// One m64nNk32 fp8 wgmma (TA, TB: fp8_e4m3 or fp8_e5m2, independently), A and B K-major in shared
/// memory: d (+)= A * B, the products exact and summed in f32 (on the GPU the tensor core keeps fewer bits
/// of the running sum; ops/wgmma.cuh).
template <int N, class TA, class TB, class Acc>
TP_HD TP_FORCEINLINE void wgmma_ss_fp8(Acc&& d, int ld, std::uint64_t da, std::uint64_t db, int scale_d);
/// The A operand of one register-A wgmma: the 64 x 16 block (mb, ks) of a 16-bit register tile of K
/// columns (its tile_registers storage a), as the instruction takes it. ops/wgmma.cuh packs every block
/// and pins it (rs_pin) before the wgmma fence: operand registers written after the fence make ptxas
/// split the wgmmas and wait for them one by one.
template <class T>
struct rs_operand;
template <int K, class T, class A>
TP_HD TP_FORCEINLINE rs_operand<T> rs_pack(const A& a, int mb, int ks);
template <class T>
TP_HD TP_FORCEINLINE void rs_pin(rs_operand<T>& op);
/// One m64nNk16 wgmma with A in registers: d (+)= a * B.
template <int N, class T, int TransB, class Acc>
TP_HD TP_FORCEINLINE void wgmma_rs(Acc&& d, const rs_operand<T>& a, std::uint64_t db, int scale_d);

// ---- register tiles --------------------------------------------------------------------
/// How a warpgroup holds an M x N register tile (M a multiple of 64, N of 8; ops/fragment.cuh):
///   storage<T>                 this thread's elements
///   block(v, b)                rows 64 b .. 64 b + 63 as wgmma_ss / wgmma_rs take the accumulator
///   for_each<R0, C0, Rs, Cs>(f, v...)
///                              f(element of each v..., tile_index) for every element this thread holds
///                              in that window, of several storages in lockstep
///   for_each_pair(f, v)        f(x, y, tile_index of x) for every pair of elements this thread holds in
///                              columns c, c + 1 of one row (c even): the whole tile, pair by pair
///   reduce_rows(v, init, f, out)
///                              out[s]: f folded over every column of the row of slot s, from init,
///                              across the threads that share the row
///   reduce_rows_in_thread(v, init, f, out)
///                              the same over the columns this thread holds only (the whole row in the
///                              interpreter); row_registers::combine folds such partial results across
///                              the threads that share a row
///   first_column()             the column of this thread's first element: an element's column minus it
///                              is a compile-time constant of the unrolled for_each on the GPU (0 in the
///                              interpreter)
///   pin(v)                     keeps the compiler from moving accesses of v across a wgmma wait
///   has_matrix_store, matrix_store<R0, C0, U>(dst, v)
///                              whether the backend writes 16-bit 8 x 8 matrices in one instruction; that
///                              store of the window at (R0, C0), of dst's shape, into the SMEM view dst
///   store_packed(p, v), load_packed(p, v)
///                              the tile to / from M x N consecutive elements at p in an order of the
///                              backend's choosing, the same for both (on the GPU each thread's registers
///                              four at a time, interleaved over the threads: 16-byte accesses, neither
///                              bank conflicts nor uncoalesced ones)
template <int M, int N>
struct tile_registers;
/// How a warpgroup holds one value per row of an M-row tile: `slots` values per thread, row(s) the
/// row of slot s; combine(v, f) folds each slot with f across the threads that share its row.
template <int M>
struct row_registers;

// ---- shared memory ---------------------------------------------------------------------
/// The CTA's dynamic shared memory: start and size in bytes.
TP_HD TP_FORCEINLINE unsigned char* dynamic_smem();
TP_HD TP_FORCEINLINE std::uint32_t dynamic_smem_size();
/// interpreter: fills memory a kernel must write before reading with NaN (an output block read before it was
/// written is reported by library ops, and shows in the results of raw accesses); a write by the calling
/// warpgroup for the race detector.
TP_HD TP_FORCEINLINE void poison(void* p, std::size_t bytes);
/// interpreter: which block of an output the buffer at p holds from now on, for reports.
template <int R>
TP_HD TP_FORCEINLINE void note_block(const void* p, const int (&block)[R]);
/// interpreter: the calling warpgroup reads / writes [p, p + bytes) of shared memory with ordinary accesses,
/// as `what` (e.g. "tp::map"): every library op that does calls these, for the race detector.
TP_HD TP_FORCEINLINE void note_smem_read(const void* p, std::size_t bytes, const char* what);
TP_HD TP_FORCEINLINE void note_smem_write(const void* p, std::size_t bytes, const char* what);
/// interpreter: names [p, p + bytes) in reports, e.g. ("pipeline input", 1, slot 2).
TP_HD TP_FORCEINLINE void name_smem(const void* p, std::size_t bytes, const char* what, int index = -1, int slot = -1);
/// interpreter: the pipeline step the calling warpgroup runs (-1: none), for reports; returns the previous
/// one (restore it when a nested pipeline ends).
TP_HD TP_FORCEINLINE long long annotate_step(long long step);
/// True when pipelines make every copy synchronous (bisecting pipelining bugs): TILEPIPE_NO_PIPELINING, or
/// the interpreter's launch option no_pipelining.
TP_HD TP_FORCEINLINE bool no_pipelining();

// ---- programmatic dependent launch ------------------------------------------------------
/// Waits until the grids this launch depends on (the previous kernel in the stream, for a
/// launch with launch_config::dependent_launch) have completed and their writes are
/// visible (griddepcontrol.wait). Everything before it may overlap that kernel's end.
TP_HD TP_FORCEINLINE void grid_dependency_wait();
/// Lets the next kernel in the stream start now, if it was launched as a dependent launch
/// (griddepcontrol.launch_dependents); it still waits for this grid's writes in its
/// grid_dependency_wait.
TP_HD TP_FORCEINLINE void launch_dependents();

// ---- profiler clocks -------------------------------------------------------------------
/// The clock events are stamped with: the SM's cycle counter on the GPU; in the
/// interpreter a logical clock of the CTA that advances by one at every call.
TP_HD TP_FORCEINLINE std::uint64_t profile_clock();
/// Nanoseconds on a clock shared by all SMs (%globaltimer); the interpreter's logical clock.
TP_HD TP_FORCEINLINE std::uint64_t global_timer();
/// The SM the CTA runs on; in the interpreter, the CTA's place in the order CTAs ran.
TP_HD TP_FORCEINLINE int sm_id();

// ---- registers and math ----------------------------------------------------------------
/// Raises / lowers the calling warpgroup's register budget to Regs per thread (setmaxnreg).
template <int Regs>
TP_HD TP_FORCEINLINE void setmaxnreg_inc();
template <int Regs>
TP_HD TP_FORCEINLINE void setmaxnreg_dec();
/// 2 to the power x, as fast as the backend computes it.
TP_HD TP_FORCEINLINE float exp2(float x);
/// Eight e4m3 values (the bytes of `packed`, the first in the lowest) as eight T (bf16 or
/// f16), two to a 32-bit word, the first in the lowest half: exact (every e4m3 value is a T
/// value), the NaN codes 0x7f / 0xff giving T's canonical NaN 0x7fff. The same bits on both
/// backends.
template <class T>
TP_HD TP_FORCEINLINE uint4 e4m3x8_to(uint2 packed);

}  // namespace tilepipe::prim

#if TP_DEVICE_PASS
#include "sm90/primitives.cuh"
#else
#include "interpret/primitives.hpp"
#endif
