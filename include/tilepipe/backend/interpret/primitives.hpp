// The primitive interface (backend/primitives.cuh) in the CPU interpreter: the host pass of
// nvcc and plain C++ compilers include this file. A warpgroup is one host thread
// (interpret::current()); its CTA's state (interpret::cta()) holds the shared memory,
// barriers, pending copies and wgmma groups, the scheduler and the race detector.
#pragma once

#include "../primitives.cuh"  // the declarations defined here
#include "cta.hpp"
#include "grid_runner.hpp"
#include "registers.hpp"
#include "tma.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

namespace tilepipe::prim {

namespace detail {
/// The barrier at a shared-window address of the calling warpgroup's CTA.
inline std::uint64_t* interpret_barrier(smem_barrier b) {
  auto& c = interpret::cta();
  return reinterpret_cast<std::uint64_t*>(c.memory.of(c.layout.rank_of(interpret::current().wg)) + b.addr);
}
}  // namespace detail

// ---- who am I --------------------------------------------------------------------------

TP_HD TP_FORCEINLINE bool leader() { return true; }
TP_HD TP_FORCEINLINE bool leader_warp() { return true; }
TP_HD TP_FORCEINLINE int thread_in_warpgroup() { return 0; }
TP_HD TP_FORCEINLINE int warpgroup_threads() { return 1; }
TP_HD TP_FORCEINLINE int warpgroup_index() { return interpret::cta().layout.local_wg(interpret::current().wg); }
TP_HD TP_FORCEINLINE int uniform_warpgroup_index() { return warpgroup_index(); }
TP_HD TP_FORCEINLINE int cluster_rank() { return interpret::cta().layout.rank_of(interpret::current().wg); }
TP_HD TP_FORCEINLINE int cluster_size() { return interpret::cta().layout.ctas; }

template <class... A>
TP_HD TP_FORCEINLINE void fail(failure_channel, const char* format, A... args) {
  tilepipe::detail::throw_formatted(format, args...);
}

// ---- execution barriers ----------------------------------------------------------------

TP_HD TP_FORCEINLINE void named_barrier_sync(int id, int threads) {
  interpret::cta().named.sync(interpret::current().wg, id, threads);
}
TP_HD TP_FORCEINLINE void named_barrier_arrive(int id, int threads) {
  interpret::cta().named.sync(interpret::current().wg, id, threads, false);
}
TP_HD TP_FORCEINLINE void cluster_sync() { interpret::cta().named.cluster_sync(interpret::current().wg); }
// A warpgroup is one host thread: nothing to synchronise.
TP_HD TP_FORCEINLINE void warpgroup_sync() {}

// ---- flags between CTAs ----------------------------------------------------------------

// A flag orders the CTAs' accesses as a semaphore does, for the cross-device race detector.
TP_HD TP_FORCEINLINE void flag_release(unsigned* flag) {
  auto& c = interpret::cta();
  if (c.peers.memory) c.peers.memory->signal(c.peers.actor, flag);
  std::atomic_ref<unsigned>(*flag).store(1, std::memory_order_release);
}

/// One device's launch: the waiting CTA is frozen while the grid's next CTAs run to
/// completion from inside the wait (only it held the baton). A launch over several simulated
/// devices runs every CTA as threads under one scheduler: the wait gives the baton away.
TP_HD TP_FORCEINLINE void flag_acquire_reset(unsigned* flag) {
  auto& c = interpret::cta();
  auto set = [flag] { return std::atomic_ref<unsigned>(*flag).load(std::memory_order_acquire) != 0; };
  if (c.grid) {
    while (!set())
      if (!c.grid->run_next())
        throw error("tilepipe: waits for a flag that no CTA of the grid sets (every other CTA has run or is waiting): "
                    "on the GPU this would hang");
  } else {
    c.sched.block_until(c.thread_base + interpret::current().wg, set,
                        [] { return std::string("a flag (tp::accumulate_partial) that no CTA of any device left can set"); });
  }
  if (c.peers.memory) c.peers.memory->acquire(c.peers.actor, flag);
  std::atomic_ref<unsigned>(*flag).store(0, std::memory_order_relaxed);
}

TP_HD TP_FORCEINLINE bool counter_arrive_last(unsigned* counter, unsigned total) {
  std::atomic_ref<unsigned> c(*counter);
  const bool last = c.fetch_add(1, std::memory_order_acq_rel) + 1 == total;
  if (last) c.store(0, std::memory_order_relaxed);
  return last;
}
// The warpgroup is one thread: its own value is the answer.
TP_HD TP_FORCEINLINE bool warpgroup_sync_any(bool value) { return value; }

// ---- signals between devices -----------------------------------------------------------

TP_HD TP_FORCEINLINE void signal_add(unsigned* sem, unsigned inc) {
  auto& c = interpret::cta();
  if (c.peers.memory) c.peers.memory->signal(c.peers.actor, sem);
  std::atomic_ref<unsigned>(*sem).fetch_add(inc, std::memory_order_release);
}

/// Other warpgroups, CTAs and devices run while the count is short; when none can, the
/// launch fails with a deadlock report that names this wait.
TP_HD TP_FORCEINLINE void signal_wait(const unsigned* sem, unsigned value) {
  auto& c = interpret::cta();
  const int wg = interpret::current().wg;
  auto count = [sem] { return std::atomic_ref<unsigned>(*const_cast<unsigned*>(sem)).load(std::memory_order_acquire); };
  c.sched.block_until(
      c.thread_base + wg, [&] { return static_cast<int>(count() - value) >= 0; },
      [&] {
        return "a semaphore (tp::semaphore_wait) for the count " + std::to_string(value) + "; it is at " +
               std::to_string(count()) + " (no CTA of any device left can signal it)";
      });
  if (c.peers.memory) c.peers.memory->acquire(c.peers.actor, sem);
}

TP_HD TP_FORCEINLINE void note_gmem_access(const void* p, std::size_t bytes, bool write, const char* what) {
  auto& c = interpret::cta();
  if (c.peers.memory) c.peers.memory->access(c.peers.actor, p, bytes, write, what);
}

// ---- mbarriers -------------------------------------------------------------------------

TP_HD TP_FORCEINLINE void mbarrier_init(std::uint64_t* bar, std::uint32_t count) {
  interpret::cta().barriers.init(bar, count);
}
TP_HD TP_FORCEINLINE void fence_barrier_init() {}
TP_HD TP_FORCEINLINE void mbarrier_inval(std::uint64_t* bar) { interpret::cta().barriers.inval(bar); }

TP_HD TP_FORCEINLINE void mbarrier_name(std::uint64_t* bar, const char* kind, int operand, int slot) {
  std::string name = kind;
  if (operand >= 0) name += " barrier of operand " + std::to_string(operand);
  interpret::cta().barriers.name(bar, name, slot);
}

TP_HD TP_FORCEINLINE smem_barrier barrier_at(std::uint64_t* bar) {
  return {interpret::cta().memory.local_address(interpret::current().wg, bar)};
}

TP_HD TP_FORCEINLINE void mbarrier_arrive(std::uint64_t* bar, std::uint32_t count) {
  interpret::cta().barriers.arrive(interpret::current().wg, bar, count, 0);
}

// One thread stands for the warpgroup's 4 warps.
TP_HD TP_FORCEINLINE void mbarrier_arrive_per_warp(std::uint64_t* bar) {
  interpret::cta().barriers.arrive(interpret::current().wg, bar, 4, 0);
}

TP_HD TP_FORCEINLINE void mbarrier_arrive_per_warp(smem_barrier bar) {
  mbarrier_arrive_per_warp(detail::interpret_barrier(bar));
}

TP_HD TP_FORCEINLINE void mbarrier_arrive_per_warp_cluster(smem_barrier bar, std::uint16_t cta_mask) {
  auto& c = interpret::cta();
  const int wg = interpret::current().wg;
  for (int r = 0; r < 16; ++r)
    if (cta_mask & (1u << r))
      c.barriers.arrive(wg, c.memory.peer(wg, detail::interpret_barrier(bar), r, "remote mbarrier arrive"), 4, 0);
}

TP_HD TP_FORCEINLINE void mbarrier_arrive_expect_tx(std::uint64_t* bar, std::uint32_t bytes) {
  interpret::cta().barriers.arrive(interpret::current().wg, bar, 1, bytes);
}

TP_HD TP_FORCEINLINE void mbarrier_wait(std::uint64_t* bar, std::uint32_t parity, wait_site site) {
  interpret::cta().barriers.wait(interpret::current().wg, bar, parity, {site.slot, site.step});
}

TP_HD TP_FORCEINLINE void mbarrier_wait(smem_barrier bar, std::uint32_t parity, wait_site site) {
  mbarrier_wait(detail::interpret_barrier(bar), parity, site);
}

// ---- fences ----------------------------------------------------------------------------

TP_HD TP_FORCEINLINE void fence_proxy_async() { interpret::cta().fence_proxy_async(interpret::current().wg); }

// ---- TMA -------------------------------------------------------------------------------

namespace detail {
/// A deferred copy of one box into dst, completing on bar.
template <int R>
void interpret_tma_load(const tma_desc& map, void* dst, const int (&coords)[R], std::uint64_t* bar) {
  interpret::check_box_start(map, coords, "TMA load");
  auto& c = interpret::cta();
  const std::uint32_t dst_off = c.memory.offset(dst, interpret::box_bytes(map), "TMA load destination");
  const std::uint32_t bar_off = c.memory.offset(bar, 8, "TMA load barrier");
  c.barriers.at(bar, "TMA load");
  interpret::pending_copy copy;
  copy.barrier = bar_off;
  copy.bytes = interpret::box_bytes(map);
  copy.what = "TMA load";
  int co[max_tma_rank] = {};
  for (int i = 0; i < R; ++i) co[i] = coords[i];
  unsigned char* smem = c.memory.base();
  copy.perform = [&map, co, smem, dst_off] { interpret::tma_load_now(map, co, smem, dst_off); };
  copy.op = c.copies.track_load(interpret::current().wg, map, dst_off, bar_off);
  if (c.peers.memory) c.peers.memory->tma(c.peers.actor, map, co, false);
  c.memory.mark_written(dst_off, static_cast<std::size_t>(copy.bytes));
  interpret::event e{interpret::event::tma_load, 0, interpret::current().wg, dst_off, bar_off, 0, {}};
  for (int i = 0; i < R; ++i) e.coords[i] = coords[i];
  c.log.record(e);
  c.copies.issue_load(std::move(copy));
}
}  // namespace detail

template <int R>
TP_HD TP_FORCEINLINE void tma_load(const tma_desc& map, void* dst, const int (&coords)[R], std::uint64_t* bar) {
  detail::interpret_tma_load(map, dst, coords, bar);
}

template <int R>
TP_HD TP_FORCEINLINE void tma_load_multicast(const tma_desc& map, void* dst, const int (&coords)[R], std::uint64_t* bar,
                                             std::uint16_t cta_mask) {
  auto& c = interpret::cta();
  const int wg = interpret::current().wg;
  if (cta_mask >> c.layout.ctas)
    tilepipe::detail::throw_formatted("multicast TMA load to CTA mask 0x%x in a cluster of %d CTAs", cta_mask,
                                      c.layout.ctas);
  for (int r = 0; r < c.layout.ctas; ++r)
    if (cta_mask & (1u << r))
      detail::interpret_tma_load(map, c.memory.peer(wg, dst, r, "multicast TMA load"), coords,
                                 reinterpret_cast<std::uint64_t*>(c.memory.peer(wg, bar, r, "multicast TMA load")));
}

template <int R>
TP_HD TP_FORCEINLINE void tma_store(const tma_desc& map, const void* src, const int (&coords)[R]) {
  interpret::check_box_start(map, coords, "TMA store");
  auto& c = interpret::cta();
  const std::uint32_t src_off = c.memory.offset(src, interpret::box_bytes(map), "TMA store source");
  interpret::pending_copy copy;
  copy.bytes = interpret::box_bytes(map);
  copy.what = "TMA store";
  int co[max_tma_rank] = {};
  for (int i = 0; i < R; ++i) co[i] = coords[i];
  unsigned char* smem = c.memory.base();
  copy.perform = [&map, co, smem, src_off] { interpret::tma_store_now(map, co, smem, src_off); };
  copy.op = c.copies.track_store(interpret::current().wg, map, src_off);
  if (c.peers.memory) copy.peer_op = c.peers.memory->tma(c.peers.actor, map, co, true);
  interpret::event e{interpret::event::tma_store, 0, interpret::current().wg, src_off, 0, 0, {}};
  for (int i = 0; i < R; ++i) e.coords[i] = coords[i];
  c.log.record(e);
  c.copies.issue_store(interpret::current().wg, std::move(copy));
}

// A store of its group (performed when the group is waited for) whose writes are atomic
// adds, as on the GPU: the CTAs' sums meet in the order the CTAs run.
TP_HD TP_FORCEINLINE void bulk_reduce_add(float* dst, const float* src, std::uint32_t bytes) {
  TP_REQUIRE(reinterpret_cast<std::uintptr_t>(dst) % 16 == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0 &&
                 bytes % 16 == 0,
             "bulk_reduce_add: addresses must be 16-byte aligned and the size a multiple of 16 bytes "
             "(cp.reduce.async.bulk)");
  auto& c = interpret::cta();
  const int wg = interpret::current().wg;
  const std::uint32_t src_off = c.memory.offset(src, bytes, "bulk reduction source");
  interpret::pending_copy copy;
  copy.bytes = bytes;
  copy.what = "bulk reduction";
  unsigned char* smem = c.memory.base();
  copy.perform = [dst, smem, src_off, n = bytes / 4] {
    for (std::uint32_t i = 0; i < n; ++i) {
      float x;
      std::memcpy(&x, smem + src_off + 4 * i, 4);
      std::atomic_ref<float>(dst[i]).fetch_add(x, std::memory_order_relaxed);
    }
  };
  copy.op = c.copies.track_bulk_read(wg, src_off, bytes, "a bulk reduction (cp.reduce.async.bulk)");
  c.log.record({interpret::event::tma_store, 0, wg, src_off, 0, 0, {}});
  c.copies.issue_store(wg, std::move(copy));
}

TP_HD TP_FORCEINLINE void bulk_commit() { interpret::cta().copies.commit_stores(interpret::current().wg); }

// The interpreter performs a store group's reads and writes together: both waits wait for it.
template <int N>
TP_HD TP_FORCEINLINE void bulk_wait() {
  interpret::cta().copies.wait_stores(interpret::current().wg, N);
}

template <int N>
TP_HD TP_FORCEINLINE void bulk_wait_read() {
  interpret::cta().copies.wait_stores(interpret::current().wg, N);
}

// ---- wgmma -----------------------------------------------------------------------------

TP_HD TP_FORCEINLINE std::uint32_t smem_address(const void* p) {
  return interpret::cta().memory.local_address(interpret::current().wg, p);
}
TP_HD TP_FORCEINLINE void wgmma_fence() {}
TP_HD TP_FORCEINLINE void wgmma_commit() { interpret::cta().wgmma.commit(interpret::current().wg); }

template <int N>
TP_HD TP_FORCEINLINE void wgmma_wait() {
  interpret::cta().wgmma.wait(interpret::current().wg, N);
}

namespace detail {
// D(64 x N) (+)= A(64 x K) B(K x N) at the time the group completes, reading the
// operands through their descriptors exactly as the tensor cores do; K is 32 bytes of
// operand (16 for 16-bit types, 32 for fp8). Products of the operands' values are exact in
// f32 and added in f32, k by k.
template <class TA, class TB, int N>
void interpret_wgmma(float* d, int ld, const TA* a_regs, int a_ld, std::uint64_t da, bool a_mn_major,
                     std::uint64_t db, bool b_mn_major, int scale_d) {
  static_assert(sizeof(TA) == sizeof(TB));
  constexpr int K = 32 / static_cast<int>(sizeof(TA));
  auto& c = interpret::cta();
  // Descriptors hold addresses in the issuing CTA's shared window.
  const unsigned char* smem = c.memory.of(c.layout.rank_of(interpret::current().wg));
  const std::uint32_t base = static_cast<std::uint32_t>(smem - c.memory.base());
  // The SMEM granules this instruction reads, for the race detector.
  std::vector<std::uint32_t> granules;
  if (c.detector()) {
    if (!a_regs)
      for (int m = 0; m < 64; ++m)
        for (int k = 0; k < K; ++k)
          granules.push_back((base + wgmma_operand_byte(da, a_mn_major, sizeof(TA), m, k)) / interpret::granule_bytes);
    for (int n = 0; n < N; ++n)
      for (int k = 0; k < K; ++k)
        granules.push_back((base + wgmma_operand_byte(db, b_mn_major, sizeof(TB), n, k)) / interpret::granule_bytes);
    std::sort(granules.begin(), granules.end());
    granules.erase(std::unique(granules.begin(), granules.end()), granules.end());
  }
  c.wgmma.issue(interpret::current().wg, [=] {
    auto elem = [smem]<class T>(T, std::uint64_t desc, bool mn_major, int mn, int k) {
      T v;
      std::memcpy(&v, smem + wgmma_operand_byte(desc, mn_major, sizeof(T), mn, k), sizeof(T));
      return to_float(v);
    };
    for (int m = 0; m < 64; ++m)
      for (int n = 0; n < N; ++n) {
        float acc = scale_d ? d[m * ld + n] : 0.0f;
        for (int k = 0; k < K; ++k) {
          const float a = a_regs ? to_float(a_regs[m * a_ld + k]) : elem(TA{}, da, a_mn_major, m, k);
          acc += a * elem(TB{}, db, b_mn_major, n, k);
        }
        d[m * ld + n] = acc;
      }
  }, granules);
}
}  // namespace detail

/// d is the accumulator's 64 x N block, row stride ld.
template <int N, class T, int TransA, int TransB, class Acc>
TP_HD TP_FORCEINLINE void wgmma_ss(Acc&& d, int ld, std::uint64_t da, std::uint64_t db, int scale_d) {
  detail::interpret_wgmma<T, T, N>(d, ld, static_cast<const T*>(nullptr), 0, da, TransA, db, TransB, scale_d);
}

template <int N, class TA, class TB, class Acc>
TP_HD TP_FORCEINLINE void wgmma_ss_fp8(Acc&& d, int ld, std::uint64_t da, std::uint64_t db, int scale_d) {
  detail::interpret_wgmma<TA, TB, N>(d, ld, static_cast<const TA*>(nullptr), 0, da, false, db, false, scale_d);
}

/// A copy of the 64 x 16 block, converted to T.
template <class T>
struct rs_operand {
  T v[64 * 16];
};
/// a: the whole A tile, row-major, K columns (16-bit or f32 values).
template <int K, class T, class A>
TP_HD TP_FORCEINLINE rs_operand<T> rs_pack(const A& a, int mb, int ks) {
  rs_operand<T> op;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 16; ++c) op.v[r * 16 + c] = from_float<T>(to_float(a[(mb * 64 + r) * K + 16 * ks + c]));
  return op;
}
template <class T>
TP_HD TP_FORCEINLINE void rs_pin(rs_operand<T>&) {}

/// d is the accumulator's 64 x N block (row stride N).
template <int N, class T, int TransB, class Acc>
TP_HD TP_FORCEINLINE void wgmma_rs(Acc&& d, const rs_operand<T>& a, std::uint64_t db, int scale_d) {
  detail::interpret_wgmma<T, T, N>(d, N, a.v, 16, 0, false, db, TransB, scale_d);
}

// ---- shared memory ---------------------------------------------------------------------

TP_HD TP_FORCEINLINE unsigned char* dynamic_smem() { return interpret::cta().memory.of(cluster_rank()); }
TP_HD TP_FORCEINLINE std::uint32_t dynamic_smem_size() {
  return static_cast<std::uint32_t>(interpret::cta().memory.size);
}

TP_HD TP_FORCEINLINE void poison(void* p, std::size_t bytes) {
  interpret::cta().poison(interpret::current().wg, p, bytes);
}

template <int R>
TP_HD TP_FORCEINLINE void note_block(const void* p, const int (&block)[R]) {
  std::string s = "block (";
  for (int d = 0; d < R; ++d) s += (d ? ", " : "") + std::to_string(block[d]);
  interpret::cta().memory.note_contents(p, s + ")");
}

TP_HD TP_FORCEINLINE void note_smem_read(const void* p, std::size_t bytes, const char* what) {
  interpret::cta().note_access(interpret::current().wg, p, bytes, false, what);
}

TP_HD TP_FORCEINLINE void note_smem_write(const void* p, std::size_t bytes, const char* what) {
  interpret::cta().note_access(interpret::current().wg, p, bytes, true, what);
}

TP_HD TP_FORCEINLINE void name_smem(const void* p, std::size_t bytes, const char* what, int index, int slot) {
  interpret::cta().memory.name_region(p, bytes, what, index, slot);
}

TP_HD TP_FORCEINLINE long long annotate_step(long long step) {
  return interpret::cta().set_step(interpret::current().wg, step);
}

TP_HD TP_FORCEINLINE bool no_pipelining() {
#if defined(TILEPIPE_NO_PIPELINING)
  return true;
#else
  return interpret::cta().opts().no_pipelining;
#endif
}

// ---- programmatic dependent launch ------------------------------------------------------

// The interpreter runs launches one after another: the previous grid has always completed.
TP_HD TP_FORCEINLINE void grid_dependency_wait() {}
TP_HD TP_FORCEINLINE void launch_dependents() {}

// ---- profiler clocks -------------------------------------------------------------------

TP_HD TP_FORCEINLINE std::uint64_t profile_clock() { return ++interpret::cta().profile_tick; }
TP_HD TP_FORCEINLINE std::uint64_t global_timer() { return interpret::cta().profile_tick; }
TP_HD TP_FORCEINLINE int sm_id() { return interpret::cta().number() * interpret::cta().layout.ctas + cluster_rank(); }

// ---- registers and math ----------------------------------------------------------------

// The CTA's register pool, as setmaxnreg moves registers between warpgroups (register_pool.hpp).
template <int Regs>
TP_HD TP_FORCEINLINE void setmaxnreg_inc() {
  interpret::cta().registers.set(interpret::current().wg, Regs, true);
}
template <int Regs>
TP_HD TP_FORCEINLINE void setmaxnreg_dec() {
  interpret::cta().registers.set(interpret::current().wg, Regs, false);
}

TP_HD TP_FORCEINLINE float exp2(float x) { return std::exp2(x); }

// Through float, the host's exact decoding (cuda_fp8.h's software path) and T's rounding,
// which for these values rounds nothing.
template <class T>
TP_HD TP_FORCEINLINE uint4 e4m3x8_to(uint2 packed) {
  static_assert(wgmma_operand_type<T>, "tilepipe: e4m3 values convert to bf16 or f16");
  std::uint16_t out[8];
  for (int e = 0; e < 8; ++e) {
    fp8_e4m3 x;
    x.__x = static_cast<unsigned char>(((e < 4 ? packed.x : packed.y) >> (8 * (e % 4))) & 0xffu);
    const T t = from_float<T>(to_float(x));
    std::memcpy(&out[e], &t, sizeof(t));
  }
  uint4 r;
  std::memcpy(&r, out, sizeof(r));
  return r;
}

}  // namespace tilepipe::prim
