// The primitive interface: every device operation the pipelines and ops use, with one
// definition that runs the sm_90 instruction in the device pass and the interpreter's
// simulation on the host. Pipelines and user kernels call only these and never contain a
// backend #if; this file and backend/ are the only places that know which pass is which.
//
// All primitives are called by every thread of a warpgroup unless marked "leader": those
// are issued by the calling thread alone and must be guarded by `if (prim::leader())`.
//
// Some primitives exist only for the interpreter's checks and compile to nothing on the
// GPU: note_smem_read / note_smem_write (generic SMEM accesses the library performs, for
// the race detector), name_smem and mbarrier_name (names in reports), annotate_step.
#pragma once

#include "../core/config.cuh"
#include "../core/dtypes.cuh"
#include "../core/error.cuh"
#include "../core/tma_desc.cuh"
#include "../core/wgmma_desc.cuh"

#if TP_DEVICE_PASS
#include "sm90/cluster.cuh"
#include "sm90/debug_hangs.cuh"
#include "sm90/failure.cuh"
#include "sm90/stmatrix.cuh"
#include "sm90/sync.cuh"
#include "sm90/tma.cuh"
#include "sm90/wgmma.cuh"
#else
#include "interpret/cta.hpp"
#include "interpret/grid_runner.hpp"
#include "interpret/tma.hpp"

#include <atomic>
#endif

namespace tilepipe::prim {

/// Named-barrier ids tilepipe reserves; kernels may use ids from user_barrier_base to 15.
inline constexpr int cta_barrier_id = 0;
inline constexpr int warpgroup_barrier_base = 1;  // 1 + warpgroup index
inline constexpr int compute_barrier_id = 5;      // the compute warpgroups of a pipeline
inline constexpr int user_barrier_base = 8;

// ---- who am I ------------------------------------------------------------------------

/// The warpgroup's issuing thread (lane 0 of its first warp).
TP_HD TP_FORCEINLINE bool leader() {
#if TP_DEVICE_PASS
  return threadIdx.x % warpgroup_size == 0;
#else
  return true;
#endif
}

/// The warpgroup's first warp (the interpreter runs a warpgroup as one thread: always).
TP_HD TP_FORCEINLINE bool leader_warp() {
#if TP_DEVICE_PASS
  return threadIdx.x % warpgroup_size < 32;
#else
  return true;
#endif
}

TP_HD TP_FORCEINLINE int warpgroup_index() {
#if TP_DEVICE_PASS
  return static_cast<int>(threadIdx.x / warpgroup_size);
#else
  return interpret::cta().local_wg(interpret::current().wg);
#endif
}

/// This CTA's rank in its thread-block cluster, and the cluster's size (1 without clusters).
TP_HD TP_FORCEINLINE int cluster_rank() {
#if TP_DEVICE_PASS
  return sm90::cluster_rank();
#else
  return interpret::cta().rank_of(interpret::current().wg);
#endif
}

TP_HD TP_FORCEINLINE int cluster_size() {
#if TP_DEVICE_PASS
  return sm90::cluster_size();
#else
  return interpret::cta().cluster_size;
#endif
}

/// Fails a runtime check whose message the host must see without a debug build: throws in
/// the interpreter; on the GPU the first failing thread writes the format and arguments (at
/// most one string) to the launch's failure record, which the launch reports, and traps.
/// No printf, also in debug builds: a call where a warpgroup runs on few registers (the
/// memory warpgroup after setmaxnreg.dec) is an illegal instruction.
template <class... A>
TP_HD TP_FORCEINLINE void fail([[maybe_unused]] failure_channel channel, const char* format, A... args) {
#if TP_DEVICE_PASS
  sm90::fail_recorded(channel, format, args...);
#else
  detail::throw_formatted(format, args...);
#endif
}

// ---- execution barriers ----------------------------------------------------------------

/// bar.sync among `threads` threads (whole warpgroups) on named barrier `id`.
TP_HD TP_FORCEINLINE void named_barrier_sync(int id, int threads) {
#if TP_DEVICE_PASS
  sm90::named_barrier_sync(id, threads);
#else
  interpret::cta().named_barrier_sync(interpret::current().wg, id, threads);
#endif
}

/// All threads of all CTAs of the cluster (barrier.cluster, release / acquire): barrier
/// initialisations and SMEM writes before it are visible to every CTA after it.
TP_HD TP_FORCEINLINE void cluster_sync() {
#if TP_DEVICE_PASS
  sm90::cluster_sync();
#else
  interpret::cta().cluster_sync(interpret::current().wg);
#endif
}

/// Synchronises the 128 threads of the calling warpgroup.
TP_HD TP_FORCEINLINE void warpgroup_sync() {
#if TP_DEVICE_PASS
  sm90::named_barrier_sync(warpgroup_barrier_base + warpgroup_index(), warpgroup_size);
#endif
}

// ---- flags between CTAs ----------------------------------------------------------------

/// leader: sets a flag in global memory to 1, a release at GPU scope: another CTA that
/// sees the 1 (flag_acquire_reset) sees every global write this warpgroup made before the
/// warpgroup_sync that precedes the call.
TP_HD TP_FORCEINLINE void flag_release(unsigned* flag) {
#if TP_DEVICE_PASS
  sm90::flag_release(flag);
#else
  std::atomic_ref<unsigned>(*flag).store(1, std::memory_order_release);
#endif
}

/// leader: waits until a flag is 1 (an acquire at GPU scope), then clears it for the next
/// launch. On the GPU the flag's setter must be resident: a CTA of the same persistent
/// grid. The interpreter runs the grid's next CTAs ahead while the flag is clear, and
/// reports a deadlock when none is left.
TP_HD TP_FORCEINLINE void flag_acquire_reset(unsigned* flag) {
#if TP_DEVICE_PASS && defined(TILEPIPE_DEBUG_HANGS)
  sm90::flag_acquire_reset_bounded(flag);
#elif TP_DEVICE_PASS
  sm90::flag_acquire_reset(flag);
#else
  while (std::atomic_ref<unsigned>(*flag).load(std::memory_order_acquire) == 0) {
    interpret::grid_runner* grid = interpret::cta().grid;
    if (!grid || !grid->run_next())
      throw error("tilepipe: waits for a flag that no CTA of the grid sets (every other CTA has run or is waiting): "
                  "on the GPU this would hang");
  }
  std::atomic_ref<unsigned>(*flag).store(0, std::memory_order_relaxed);
#endif
}

// ---- mbarriers -------------------------------------------------------------------------

/// leader: initialises an mbarrier completing a phase after `count` arrivals.
TP_HD TP_FORCEINLINE void mbarrier_init(std::uint64_t* bar, std::uint32_t count) {
#if TP_DEVICE_PASS
  sm90::mbarrier_init(bar, count);
#else
  interpret::cta().barrier_init(bar, count);
#endif
}

/// leader: makes initialised barriers visible to TMA and to the other threads.
TP_HD TP_FORCEINLINE void fence_barrier_init() {
#if TP_DEVICE_PASS
  sm90::fence_barrier_init();
#endif
}

/// leader: invalidates a barrier whose memory is about to be reused (the interpreter
/// checks that it is idle: no waiter, no pending arrival, transaction or load).
TP_HD TP_FORCEINLINE void mbarrier_inval(std::uint64_t* bar) {
#if TP_DEVICE_PASS
  sm90::mbarrier_inval(bar);
#else
  interpret::cta().barrier_inval(bar);
#endif
}

/// Names a barrier in the interpreter's reports, e.g. ("ready", operand 1, slot 2); no
/// code on the GPU.
TP_HD TP_FORCEINLINE void mbarrier_name([[maybe_unused]] std::uint64_t* bar, [[maybe_unused]] const char* kind,
                                        [[maybe_unused]] int operand, [[maybe_unused]] int slot) {
#if !TP_DEVICE_PASS
  std::string name = kind;
  if (operand >= 0) name += " barrier of operand " + std::to_string(operand);
  interpret::cta().barrier_name(bar, name, slot);
#endif
}

/// leader: one arrival (count arrivals).
TP_HD TP_FORCEINLINE void mbarrier_arrive(std::uint64_t* bar, std::uint32_t count = 1) {
#if TP_DEVICE_PASS
  sm90::mbarrier_arrive(bar, count);
#else
  interpret::cta().barrier_arrive(interpret::current().wg, bar, count, 0);
#endif
}

/// All threads: one arrival per warp, after every lane of the warp got here (so the warp's
/// earlier SMEM reads are ordered before it). A warpgroup thus arrives 4 times.
TP_HD TP_FORCEINLINE void mbarrier_arrive_per_warp(std::uint64_t* bar) {
#if TP_DEVICE_PASS
  __syncwarp();
  if (threadIdx.x % 32 == 0) sm90::mbarrier_arrive(bar, 1);
#else
  interpret::cta().barrier_arrive(interpret::current().wg, bar, 4, 0);
#endif
}

/// A barrier by its shared-window address, computed once (barrier_at) and kept in a
/// register: the per-step waits and arrivals of a pipeline's compute loop use it instead of
/// converting a generic pointer every time.
struct smem_barrier {
  std::uint32_t addr = 0;
  TP_HD smem_barrier operator+(int i) const { return {addr + 8u * static_cast<std::uint32_t>(i)}; }
};

#if !TP_DEVICE_PASS
namespace detail {
inline std::uint64_t* interpret_barrier(smem_barrier b) {
  auto& c = interpret::cta();
  return reinterpret_cast<std::uint64_t*>(c.smem_of(c.rank_of(interpret::current().wg)) + b.addr);
}
}  // namespace detail
#endif

TP_HD TP_FORCEINLINE smem_barrier barrier_at(std::uint64_t* bar) {
#if TP_DEVICE_PASS
  return {sm90::opaque(sm90::smem_address(bar))};
#else
  return {interpret::cta().local_address(interpret::current().wg, bar)};
#endif
}

/// All threads: one arrival per warp (after every lane of the warp got here).
TP_HD TP_FORCEINLINE void mbarrier_arrive_per_warp(smem_barrier bar) {
#if TP_DEVICE_PASS
  __syncwarp();
  if (threadIdx.x % 32 == 0) sm90::mbarrier_arrive(bar.addr);
#else
  mbarrier_arrive_per_warp(detail::interpret_barrier(bar));
#endif
}

/// All threads: one arrival per warp on the barrier at bar's offset in each of the first
/// `ranks` CTAs of the cluster (after every lane of the warp got here): releases a slot
/// that the whole cluster's multicast loads write.
TP_HD TP_FORCEINLINE void mbarrier_arrive_per_warp_cluster(smem_barrier bar, int ranks) {
#if TP_DEVICE_PASS
  __syncwarp();
  if (threadIdx.x % 32 == 0)
    for (int r = 0; r < ranks; ++r) sm90::mbarrier_arrive_remote(bar.addr, r);
#else
  auto& c = interpret::cta();
  const int wg = interpret::current().wg;
  for (int r = 0; r < ranks; ++r)
    c.barrier_arrive(wg, c.peer(wg, detail::interpret_barrier(bar), r, "remote mbarrier arrive"), 4, 0);
#endif
}

/// leader: expects `bytes` more transaction bytes in this phase and arrives once.
TP_HD TP_FORCEINLINE void mbarrier_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
#if TP_DEVICE_PASS
  sm90::mbarrier_arrive_expect_tx(bar, bytes);
#else
  interpret::cta().barrier_arrive(interpret::current().wg, bar, 1, bytes);
#endif
}

/// leader: expects `bytes` more transaction bytes in this phase, without arriving.
TP_HD TP_FORCEINLINE void mbarrier_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
#if TP_DEVICE_PASS
  sm90::mbarrier_expect_tx(bar, bytes);
#else
  interpret::cta().barrier_expect_tx(bar, bytes);
#endif
}

/// Where a barrier wait is, when the caller knows: for the interpreter's reports and the
/// GPU debug mode's hang messages (unused, and free, otherwise).
struct wait_site {
  int slot = -1;
  long long step = -1;
};

/// Waits until the phase of the given parity has completed. With TILEPIPE_DEBUG_HANGS the
/// GPU wait gives up after about a second, prints where it was and traps.
TP_HD TP_FORCEINLINE void mbarrier_wait(std::uint64_t* bar, std::uint32_t parity, [[maybe_unused]] wait_site site = {}) {
#if TP_DEVICE_PASS && defined(TILEPIPE_DEBUG_HANGS)
  sm90::mbarrier_wait_bounded(bar, parity, site.slot, site.step);
#elif TP_DEVICE_PASS
  while (!sm90::mbarrier_try_wait(bar, parity)) {
  }
#else
  interpret::cta().barrier_wait(interpret::current().wg, bar, parity, {site.slot, site.step});
#endif
}

/// mbarrier_wait on a barrier given by its shared-window address.
TP_HD TP_FORCEINLINE void mbarrier_wait(smem_barrier bar, std::uint32_t parity, [[maybe_unused]] wait_site site = {}) {
#if TP_DEVICE_PASS && defined(TILEPIPE_DEBUG_HANGS)
  sm90::mbarrier_wait_bounded(static_cast<std::uint64_t*>(__cvta_shared_to_generic(bar.addr)), parity, site.slot, site.step);
#elif TP_DEVICE_PASS
  while (!sm90::mbarrier_try_wait(bar.addr, parity)) {
  }
#else
  mbarrier_wait(detail::interpret_barrier(bar), parity, site);
#endif
}

// ---- fences ----------------------------------------------------------------------------

/// Orders this thread's ordinary SMEM writes before TMA / wgmma reads (then synchronise).
TP_HD TP_FORCEINLINE void fence_proxy_async() {
#if TP_DEVICE_PASS
  sm90::fence_proxy_async_smem();
#else
  interpret::cta().fence_proxy_async(interpret::current().wg);
#endif
}

// ---- TMA -------------------------------------------------------------------------------

#if !TP_DEVICE_PASS
namespace detail {
/// The interpreter's TMA load: a deferred copy of one box into dst, completing on bar.
template <int R>
void interpret_tma_load(const tma_desc& map, void* dst, const int (&coords)[R], std::uint64_t* bar) {
  auto& c = interpret::cta();
  const std::uint32_t dst_off = c.smem_offset(dst, interpret::box_bytes(map), "TMA load destination");
  const std::uint32_t bar_off = c.smem_offset(bar, 8, "TMA load barrier");
  c.barrier(bar, "TMA load");
  interpret::pending_copy copy;
  copy.barrier = bar_off;
  copy.bytes = interpret::box_bytes(map);
  copy.what = "TMA load";
  int co[max_tma_rank] = {};
  for (int i = 0; i < R; ++i) co[i] = coords[i];
  unsigned char* smem = c.smem();
  copy.perform = [&map, co, smem, dst_off] { interpret::tma_load_now(map, co, smem, dst_off); };
  copy.op = c.track_load(interpret::current().wg, map, dst_off, bar_off);
  c.mark_written(dst_off, copy.bytes);
  interpret::event e{interpret::event::tma_load, 0, interpret::current().wg, dst_off, bar_off, 0, {}};
  for (int i = 0; i < R; ++i) e.coords[i] = coords[i];
  c.record(e);
  c.issue_load(std::move(copy));
}
}  // namespace detail
#endif

/// leader: loads the box at coords (TMA order, innermost first) into dst; completes
/// box bytes of transactions on bar.
template <int R>
TP_HD TP_FORCEINLINE void tma_load(const tma_desc& map, void* dst, const int (&coords)[R], std::uint64_t* bar) {
#if TP_DEVICE_PASS
  sm90::tma_load(dst, &map.map, coords, bar);
#else
  detail::interpret_tma_load(map, dst, coords, bar);
#endif
}

/// leader: loads the box at coords into dst's offset in every CTA of the cluster whose bit
/// is set in cta_mask; each completes the box's bytes on the barrier at bar's offset in
/// its own CTA.
template <int R>
TP_HD TP_FORCEINLINE void tma_load_multicast(const tma_desc& map, void* dst, const int (&coords)[R], std::uint64_t* bar,
                                             std::uint16_t cta_mask) {
#if TP_DEVICE_PASS
  sm90::tma_load_multicast(dst, &map.map, coords, bar, cta_mask);
#else
  auto& c = interpret::cta();
  const int wg = interpret::current().wg;
  if (cta_mask >> c.cluster_size)
    tilepipe::detail::throw_formatted("multicast TMA load to CTA mask 0x%x in a cluster of %d CTAs", cta_mask,
                                      c.cluster_size);
  for (int r = 0; r < c.cluster_size; ++r)
    if (cta_mask & (1u << r))
      detail::interpret_tma_load(map, c.peer(wg, dst, r, "multicast TMA load"), coords,
                                 reinterpret_cast<std::uint64_t*>(c.peer(wg, bar, r, "multicast TMA load")));
#endif
}

/// leader: stores src to the box at coords; out-of-bounds elements are dropped.
template <int R>
TP_HD TP_FORCEINLINE void tma_store(const tma_desc& map, const void* src, const int (&coords)[R]) {
#if TP_DEVICE_PASS
  sm90::tma_store(&map.map, coords, src);
#else
  auto& c = interpret::cta();
  const std::uint32_t src_off = c.smem_offset(src, interpret::box_bytes(map), "TMA store source");
  interpret::pending_copy copy;
  copy.bytes = interpret::box_bytes(map);
  copy.what = "TMA store";
  int co[max_tma_rank] = {};
  for (int i = 0; i < R; ++i) co[i] = coords[i];
  unsigned char* smem = c.smem();
  copy.perform = [&map, co, smem, src_off] { interpret::tma_store_now(map, co, smem, src_off); };
  copy.op = c.track_store(interpret::current().wg, map, src_off);
  interpret::event e{interpret::event::tma_store, 0, interpret::current().wg, src_off, 0, 0, {}};
  for (int i = 0; i < R; ++i) e.coords[i] = coords[i];
  c.record(e);
  c.issue_store(interpret::current().wg, std::move(copy));
#endif
}

/// leader: closes the current bulk async group (the stores issued since the last commit).
TP_HD TP_FORCEINLINE void bulk_commit() {
#if TP_DEVICE_PASS
  sm90::bulk_commit();
#else
  interpret::cta().commit_stores(interpret::current().wg);
#endif
}

/// leader: waits until at most N bulk groups are pending (their writes done).
template <int N>
TP_HD TP_FORCEINLINE void bulk_wait() {
#if TP_DEVICE_PASS
  sm90::bulk_wait<N>();
#else
  interpret::cta().wait_stores(interpret::current().wg, N);
#endif
}

/// leader: waits until at most N bulk groups still read their shared memory.
template <int N>
TP_HD TP_FORCEINLINE void bulk_wait_read() {
#if TP_DEVICE_PASS
  sm90::bulk_wait_read<N>();
#else
  interpret::cta().wait_stores(interpret::current().wg, N);
#endif
}

// ---- wgmma -----------------------------------------------------------------------------

/// Shared-window address of a pointer into shared memory (for descriptors).
TP_HD TP_FORCEINLINE std::uint32_t smem_address(const void* p) {
#if TP_DEVICE_PASS
  return sm90::smem_address(p);
#else
  return interpret::cta().local_address(interpret::current().wg, p);
#endif
}

#if TP_DEVICE_PASS
/// All threads of a warp: four 8 x 8 16-bit matrices from registers to SMEM (stmatrix.x4).
/// GPU only: the interpreter's fragments are row-major and ops store them element-wise.
TP_DEVICE TP_FORCEINLINE void stmatrix_x4(std::uint32_t row_address, std::uint32_t r0, std::uint32_t r1, std::uint32_t r2,
                                          std::uint32_t r3) {
  sm90::stmatrix_x4(row_address, r0, r1, r2, r3);
}
#endif

TP_HD TP_FORCEINLINE void wgmma_fence() {
#if TP_DEVICE_PASS
  sm90::wgmma_fence();
#endif
}

TP_HD TP_FORCEINLINE void wgmma_commit() {
#if TP_DEVICE_PASS
  sm90::wgmma_commit();
#else
  interpret::cta().commit_wgmma(interpret::current().wg);
#endif
}

/// Waits until at most N wgmma groups of this warpgroup are in flight.
template <int N>
TP_HD TP_FORCEINLINE void wgmma_wait() {
#if TP_DEVICE_PASS
  sm90::wgmma_wait<N>();
#else
  interpret::cta().wait_wgmma(interpret::current().wg, N);
#endif
}

#if !TP_DEVICE_PASS
namespace detail {
// D(64 x N) (+)= A(64 x 16) B(16 x N) at the time the group completes, reading the
// operands through their descriptors exactly as the tensor cores do.
template <class T, int N>
void interpret_wgmma(float* d, int ld, const T* a_regs, int a_ld, std::uint64_t da, bool a_mn_major,
                     std::uint64_t db, bool b_mn_major, int scale_d) {
  auto& c = interpret::cta();
  // Descriptors hold addresses in the issuing CTA's shared window.
  const unsigned char* smem = c.smem_of(c.rank_of(interpret::current().wg));
  const std::uint32_t base = static_cast<std::uint32_t>(smem - c.smem());
  // The SMEM granules this instruction reads, for the race detector.
  std::vector<std::uint32_t> granules;
  if (c.detector()) {
    if (!a_regs)
      for (int m = 0; m < 64; ++m)
        for (int k = 0; k < 16; ++k)
          granules.push_back((base + wgmma_operand_byte(da, a_mn_major, sizeof(T), m, k)) / interpret::granule_bytes);
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < 16; ++k)
        granules.push_back((base + wgmma_operand_byte(db, b_mn_major, sizeof(T), n, k)) / interpret::granule_bytes);
    std::sort(granules.begin(), granules.end());
    granules.erase(std::unique(granules.begin(), granules.end()), granules.end());
  }
  c.issue_wgmma(interpret::current().wg, [=] {
    auto elem = [smem](std::uint64_t desc, bool mn_major, int mn, int k) {
      T v;
      std::memcpy(&v, smem + wgmma_operand_byte(desc, mn_major, sizeof(T), mn, k), sizeof(T));
      return to_float(v);
    };
    for (int m = 0; m < 64; ++m)
      for (int n = 0; n < N; ++n) {
        float acc = scale_d ? d[m * ld + n] : 0.0f;
        for (int k = 0; k < 16; ++k) {
          const float a = a_regs ? to_float(a_regs[m * a_ld + k]) : elem(da, a_mn_major, m, k);
          acc += a * elem(db, b_mn_major, n, k);
        }
        d[m * ld + n] = acc;
      }
  }, granules);
}
}  // namespace detail
#endif

/// One m64nNk16 wgmma with A and B in shared memory. `d` is the accumulator block: on the
/// GPU this thread's N/2 registers, in the interpreter the 64 x N rows (row stride ld).
template <int N, class T, int TransA, int TransB, class Acc>
TP_HD TP_FORCEINLINE void wgmma_ss(Acc&& d, [[maybe_unused]] int ld, std::uint64_t da, std::uint64_t db, int scale_d) {
#if TP_DEVICE_PASS
  sm90::wgmma_op<N, std::is_same_v<T, bf16>>::template ss<TransA, TransB>(d, da, db, scale_d);
#else
  detail::interpret_wgmma<T, N>(d, ld, static_cast<const T*>(nullptr), 0, da, TransA, db, TransB, scale_d);
#endif
}

/// One m64nNk16 wgmma with A in registers. `a` is, on the GPU, this thread's 4 packed
/// registers; in the interpreter the 64 x 16 A block (row stride a_ld).
template <int N, class T, int TransB, class Acc, class A>
TP_HD TP_FORCEINLINE void wgmma_rs(Acc&& d, [[maybe_unused]] int ld, A&& a, [[maybe_unused]] int a_ld, std::uint64_t db,
                                   int scale_d) {
#if TP_DEVICE_PASS
  sm90::wgmma_op<N, std::is_same_v<T, bf16>>::template rs<TransB>(d, a, db, scale_d);
#else
  detail::interpret_wgmma<T, N>(d, ld, a, a_ld, 0, false, db, TransB, scale_d);
#endif
}

// ---- shared memory ---------------------------------------------------------------------

/// The CTA's dynamic shared memory: start and size in bytes.
TP_HD TP_FORCEINLINE unsigned char* dynamic_smem() {
#if TP_DEVICE_PASS
  extern __shared__ __align__(1024) unsigned char tp_dynamic_smem[];
  return tp_dynamic_smem;
#else
  return interpret::cta().smem_of(cluster_rank());
#endif
}

TP_HD TP_FORCEINLINE std::uint32_t dynamic_smem_size() {
#if TP_DEVICE_PASS
  return sm90::dynamic_smem_size();
#else
  return static_cast<std::uint32_t>(interpret::cta().smem_size);
#endif
}

/// Fills memory a kernel must write before reading with NaN (interpreter only): an output
/// block read before it was written is reported (by library ops) and shows up in the
/// results (by raw element access). The race detector sees it as a write by the calling
/// warpgroup.
TP_HD TP_FORCEINLINE void poison([[maybe_unused]] void* p, [[maybe_unused]] std::size_t bytes) {
#if !TP_DEVICE_PASS
  interpret::cta().poison(interpret::current().wg, p, bytes);
#endif
}

/// Says which block of an output the buffer at p holds from now on, for the interpreter's
/// reports; no code on the GPU.
template <int R>
TP_HD TP_FORCEINLINE void note_block([[maybe_unused]] const void* p, [[maybe_unused]] const int (&block)[R]) {
#if !TP_DEVICE_PASS
  std::string s = "block (";
  for (int d = 0; d < R; ++d) s += (d ? ", " : "") + std::to_string(block[d]);
  interpret::cta().note_contents(p, s + ")");
#endif
}

// ---- interpreter-only annotations (no code on the GPU) ---------------------------------

/// The calling warpgroup reads [p, p + bytes) of shared memory with ordinary loads, as
/// `what` (e.g. "tp::map"). For the race detector; every library op that touches SMEM
/// through generic loads or stores calls these.
TP_HD TP_FORCEINLINE void note_smem_read([[maybe_unused]] const void* p, [[maybe_unused]] std::size_t bytes,
                                         [[maybe_unused]] const char* what) {
#if !TP_DEVICE_PASS
  interpret::cta().note_access(interpret::current().wg, p, bytes, false, what);
#endif
}

/// The calling warpgroup writes [p, p + bytes) of shared memory with ordinary stores.
TP_HD TP_FORCEINLINE void note_smem_write([[maybe_unused]] const void* p, [[maybe_unused]] std::size_t bytes,
                                          [[maybe_unused]] const char* what) {
#if !TP_DEVICE_PASS
  interpret::cta().note_access(interpret::current().wg, p, bytes, true, what);
#endif
}

/// Names [p, p + bytes) in the interpreter's reports, e.g. ("pipeline input", 1, slot 2).
TP_HD TP_FORCEINLINE void name_smem([[maybe_unused]] const void* p, [[maybe_unused]] std::size_t bytes,
                                    [[maybe_unused]] const char* what, [[maybe_unused]] int index = -1,
                                    [[maybe_unused]] int slot = -1) {
#if !TP_DEVICE_PASS
  interpret::cta().name_region(p, bytes, what, index, slot);
#endif
}

/// Tells the interpreter which pipeline step the calling warpgroup runs (-1: none), for
/// reports; returns the previous one (restore it when a nested pipeline ends).
TP_HD TP_FORCEINLINE long long annotate_step([[maybe_unused]] long long step) {
#if TP_DEVICE_PASS
  return -1;
#else
  return interpret::cta().set_step(interpret::current().wg, step);
#endif
}

/// True when pipelines must make every copy synchronous (debugging: a bug that goes away
/// with it is a pipelining bug). Compile-time on the GPU (TILEPIPE_NO_PIPELINING), also a
/// launch option in the interpreter (options::no_pipelining).
TP_HD TP_FORCEINLINE bool no_pipelining() {
#if defined(TILEPIPE_NO_PIPELINING)
  return true;
#elif TP_DEVICE_PASS
  return false;
#else
  return interpret::cta().opts().no_pipelining;
#endif
}

// ---- registers -------------------------------------------------------------------------

template <int Regs>
TP_HD TP_FORCEINLINE void setmaxnreg_inc() {
#if TP_DEVICE_PASS
  sm90::setmaxnreg_inc<Regs>();
#endif
}

template <int Regs>
TP_HD TP_FORCEINLINE void setmaxnreg_dec() {
#if TP_DEVICE_PASS
  sm90::setmaxnreg_dec<Regs>();
#endif
}

}  // namespace tilepipe::prim
