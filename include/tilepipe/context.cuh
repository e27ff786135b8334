// What a kernel body sees of its launch: its position in the grid (axis_index, named or
// numbered, as in Pallas), which warpgroup ("thread") it is, and the CTA's shared memory,
// handed out by a scoped bump allocator that every warpgroup runs identically.
#pragma once

#include "backend/primitives.cuh"
#include "core/config.cuh"
#include "core/error.cuh"
#include "core/profile_format.cuh"
#include "profile.cuh"

namespace tilepipe {

inline constexpr int max_grid_rank = 3;
inline constexpr int max_axis_name = 16;

/// Grid geometry passed to every CTA (a kernel parameter on the GPU).
struct grid_info {
  int rank = 1;
  int extent[max_grid_rank] = {1, 1, 1};
  char names[max_grid_rank][max_axis_name] = {};
  char thread_name[max_axis_name] = {};  // the kernel's name for its warpgroups (Pallas' thread_name)
  int num_warpgroups = 1;
  int device = 0, devices = 1;             // this GPU's index among the launch's devices, and their number
  char device_name[max_axis_name] = {};    // the device axis' name (launch_config::device_axis)
  int cluster[max_grid_rank] = {1, 1, 1};  // a thread-block cluster's CTAs along each axis
  failure_channel failure;  // where failed checks report on the GPU
#if TP_PROFILE
  profile_buffer profile;  // where the profiler's events go (null: nowhere)
#endif

  /// Where the profiler's events go (nowhere without TILEPIPE_PROFILE).
  TP_HD profile_buffer profile_target() const {
#if TP_PROFILE
    return profile;
#else
    return {};
#endif
  }
  /// Binds the launch to a profile buffer; false if this build does not record events.
  bool set_profile_target([[maybe_unused]] profile_buffer b) {
#if TP_PROFILE
    profile = b;
    return true;
#else
    return false;
#endif
  }
};

class kernel_context {
 public:
  TP_HD kernel_context(const grid_info& g, const int (&cta)[max_grid_rank])
      : grid_(&g), smem_(prim::dynamic_smem()), smem_size_(prim::dynamic_smem_size()) {
    for (int a = 0; a < max_grid_rank; ++a) cta_[a] = cta[a];
  }

  /// Index of this CTA along grid axis `axis` (Pallas' lax.axis_index). By name, also the
  /// warpgroup axis when the kernel names it (`static constexpr const char* thread_name`):
  /// axis_index(thread_name) is warpgroup_index(), axis_size(thread_name) num_warpgroups().
  TP_HD int axis_index(int axis) const { return cta_[axis]; }
  TP_HD int axis_index(const char* name) const {
    return names_warpgroups(name) ? thread_index() : names_devices(name) ? device_index() : cta_[axis_of(name)];
  }
  TP_HD int axis_size(int axis) const { return grid_->extent[axis]; }
  TP_HD int axis_size(const char* name) const {
    return names_warpgroups(name) ? num_threads() : names_devices(name) ? device_count() : grid_->extent[axis_of(name)];
  }

  /// Which device (GPU) of a collective launch runs this CTA, and how many there are: the
  /// device axis (Pallas' mesh axis), also by its name, axis_index("device") unless the
  /// launch named it otherwise (launch_config::device_axis). 0 and 1 for a single device.
  TP_HD int device_index() const { return grid_->device; }
  TP_HD int device_count() const { return grid_->devices; }

  /// Which warpgroup runs this code, and how many the CTA has; thread_index() and
  /// num_threads() in Pallas' words, where a warpgroup is a "thread" (plgpu.kernel's
  /// num_threads).
  TP_HD int warpgroup_index() const { return prim::warpgroup_index(); }
  TP_HD int num_warpgroups() const { return grid_->num_warpgroups; }
  TP_HD int thread_index() const { return prim::warpgroup_index(); }
  TP_HD int num_threads() const { return grid_->num_warpgroups; }

  /// Where failed device-side checks report on the GPU (prim::fail).
  TP_HD const failure_channel& failure() const { return grid_->failure; }

  /// Synchronises all warpgroups of the CTA.
  TP_HD void sync_threads() const { prim::named_barrier_sync(prim::cta_barrier_id, warpgroup_size * num_threads()); }

  /// The team: the warpgroups that make collective library calls (emit_pipeline,
  /// run_scoped) together. It is the whole CTA, except on the compute side of a
  /// warp-specialised pipeline (its body and compute_context), where the memory warpgroup
  /// is busy moving data: there it is the compute warpgroups, so that a body can run a
  /// nested pipeline. A team is consecutive warpgroups but for one left out (the memory
  /// warpgroup may sit anywhere); it synchronises on its own named barrier.
  struct team {
    int warpgroups = 0;  // 0: the whole CTA
    int leader = 0;      // the warpgroup whose leader thread issues for the team
    int barrier = prim::cta_barrier_id;
  };
  /// True in exactly one thread of the team: the one that issues the team's copies.
  TP_HD bool team_leader() const { return prim::leader() && thread_index() == team_.leader; }
  /// The team's threads, its named barrier, and a sync on it.
  TP_HD int team_threads() const { return warpgroup_size * (team_.warpgroups ? team_.warpgroups : num_threads()); }
  TP_HD int team_barrier() const { return team_.barrier; }
  TP_HD void team_sync() const { prim::named_barrier_sync(team_.barrier, team_threads()); }
  /// Whether the team is the whole CTA.
  TP_HD bool team_is_cta() const { return team_.warpgroups == 0; }
  /// Makes `t` the team until leave_team(the returned previous team).
  TP_HD team enter_team(team t) {
    const team outer = team_;
    team_ = t;
    return outer;
  }
  TP_HD void leave_team(team outer) { team_ = outer; }

  /// This CTA's rank in its thread-block cluster (launch option `cluster`), the cluster's
  /// size, and a barrier over all threads of the cluster. A kernel whose CTAs arrive on
  /// each other's barriers or write each other's SMEM (multicast specs) ends with
  /// cluster_sync(), so that no CTA exits while a peer still reaches into it.
  TP_HD int cluster_rank() const { return prim::cluster_rank(); }
  TP_HD int cluster_size() const { return prim::cluster_size(); }
  TP_HD void cluster_sync() const { prim::cluster_sync(); }
  /// The cluster's CTAs along grid axis `axis` (launch options cluster_shape, or cluster
  /// along cluster_axis), and this CTA's position among them. Ranks count the cluster's
  /// CTAs with axis 0 fastest: rank = i0 + n0 (i1 + n1 i2) (CUDA's %cluster_ctarank).
  TP_HD int cluster_extent(int axis) const { return grid_->cluster[axis]; }
  TP_HD int cluster_index(int axis) const { return cta_[axis] % grid_->cluster[axis]; }
  /// The cluster ranks of the CTAs that differ from this one only along grid axis `axis`
  /// (this one included), as a mask: the CTAs a block shared along that axis goes to.
  TP_HD std::uint16_t cluster_mask_along(int axis) const {
    int stride = 1;
    for (int a = 0; a < axis; ++a) stride *= grid_->cluster[a];
    const int first = cluster_rank() - cluster_index(axis) * stride;
    unsigned mask = 0;
    for (int i = 0; i < grid_->cluster[axis]; ++i) mask |= 1u << (first + i * stride);
    return static_cast<std::uint16_t>(mask);
  }

  /// True in exactly one thread of the CTA: the one that issues CTA-wide copies.
  TP_HD bool cta_leader() const { return prim::leader() && thread_index() == 0; }

  /// Allocates `bytes` of shared memory, 1024-byte aligned. Every warpgroup must make the
  /// same allocations in the same order (they then agree on the addresses).
  TP_HD unsigned char* allocate(std::uint32_t bytes, const char* what) {
    const std::uint32_t start = (smem_top_ + static_cast<std::uint32_t>(smem_alignment) - 1) &
                                ~static_cast<std::uint32_t>(smem_alignment - 1);
    if (start + bytes > smem_size_)
      prim::fail(grid_->failure,
                 "shared memory over budget: %s needs %u bytes at offset %u, but the kernel has %u bytes of "
                 "dynamic shared memory (launch option smem_bytes; the device allows %u)",
                 what, bytes, start, smem_size_, static_cast<unsigned>(smem_capacity));
    smem_top_ = start + bytes;
    prim::name_smem(smem_ + start, bytes, what);  // for the interpreter's reports
    return smem_ + start;
  }

  /// Allocates an SMEM view (tp::smem<T, tile>) for the whole CTA.
  template <class View>
  TP_HD View alloc() {
    return View{reinterpret_cast<typename View::value_type*>(allocate(View::bytes, "kernel SMEM view")), 0};
  }

  /// Allocates one SMEM view per warpgroup and returns the calling warpgroup's.
  template <class View>
  TP_HD View alloc_per_warpgroup() {
    constexpr std::uint32_t stride = (View::bytes + smem_alignment - 1) / smem_alignment * smem_alignment;
    unsigned char* p = allocate(stride * num_threads(), "per-warpgroup SMEM view");
    for (int w = 0; w < num_threads(); ++w)
      prim::name_smem(p + stride * w, View::bytes, "per-warpgroup SMEM view of warpgroup", w);
    return View{reinterpret_cast<typename View::value_type*>(p + stride * thread_index()), 0};
  }
  template <class View>
  [[deprecated("use alloc_per_warpgroup")]] TP_HD View alloc_per_thread() {
    return alloc_per_warpgroup<View>();
  }

  /// Restores the allocator when a scope (a pipeline) ends.
  TP_HD std::uint32_t smem_mark() const { return smem_top_; }
  TP_HD void smem_release(std::uint32_t mark) { smem_top_ = mark; }

  /// The calling warpgroup's profiler track (profile.cuh; nothing without TILEPIPE_PROFILE).
  TP_HD profile_recorder_ref profiler() const {
#if TP_PROFILE
    return profile_recorder_ref(recorder_);
#else
    return {};
#endif
  }

  // The profiler's methods before they moved behind profiler() (CHANGELOG.md).
  [[deprecated("use profiler().mark")]] TP_HD void profile(profile_kind kind, profile_phase phase, int operand = -1,
                                                          long long step = -1) const {
    profiler().mark(kind, phase, operand, step);
  }
  [[deprecated("use profiler().begin")]] TP_HD void profile_begin(profile_kind kind, int operand = -1,
                                                                 long long step = -1) const {
    profiler().begin(kind, operand, step);
  }
  [[deprecated("use profiler().end")]] TP_HD void profile_end(profile_kind kind, int operand = -1,
                                                             long long step = -1) const {
    profiler().end(kind, operand, step);
  }
  [[deprecated("use profiler().clock")]] TP_HD std::uint64_t profile_clock(profile_kind kind) const {
    return profiler().clock(kind);
  }
  [[deprecated("use profiler().span")]] TP_HD void profile_span(profile_kind kind, std::uint64_t begin, int operand = -1,
                                                               long long step = -1) const {
    profiler().span(kind, begin, operand, step);
  }
  template <class Wait>
  [[deprecated("use profiler().wait")]] TP_HD void profile_wait(profile_kind kind, int operand, long long step,
                                                               Wait&& wait) const {
    profiler().wait(kind, operand, step, wait);
  }
  [[deprecated("use profiler().set_role")]] TP_HD void profile_set_role(profile_role role, int index = 0) const {
    profiler().set_role(role, index);
  }
  [[deprecated("use profiler().begin_scope")]] TP_HD void profile_begin_scope(const char* name) const {
    profiler().begin_scope(name);
  }
  [[deprecated("use profiler().start")]] TP_HD void profile_start() const {
    profiler().start(grid_->profile_target(), cta_, grid_->extent, grid_->num_warpgroups);
  }
  [[deprecated("use profiler().finish")]] TP_HD void profile_finish() const { profiler().finish(); }

 private:
  /// Whether `name` equals a stored (NUL-terminated, max_axis_name) name.
  TP_HD static bool is_named(const char* name, const char (&stored)[max_axis_name]) {
    int i = 0;
    while (i < max_axis_name && name[i] != 0 && name[i] == stored[i]) ++i;
    return i < max_axis_name && name[i] == 0 && stored[i] == 0;
  }
  TP_HD bool names_warpgroups(const char* name) const {
    return grid_->thread_name[0] != 0 && is_named(name, grid_->thread_name);
  }
  TP_HD bool names_devices(const char* name) const { return grid_->device_name[0] != 0 && is_named(name, grid_->device_name); }
  TP_HD int axis_of(const char* name) const {
    for (int a = 0; a < grid_->rank; ++a)
      if (is_named(name, grid_->names[a])) return a;
    prim::fail(grid_->failure, "no grid axis is named '%s'", name);
    return 0;
  }

  const grid_info* grid_;
  unsigned char* smem_;
  std::uint32_t smem_size_;
  std::uint32_t smem_top_ = 0;
  team team_;
  int cta_[max_grid_rank] = {};
#if TP_PROFILE
  mutable profile_recorder recorder_;  // registers: every event would otherwise wait for a load
#endif
};

/// A span of the calling warpgroup on its profiler track, from construction to destruction,
/// named by the first profile_name_chars characters of `name` (nothing without TILEPIPE_PROFILE):
///     { tp::profile_scope s(ctx, "softmax");  ... }
class profile_scope {
 public:
  TP_HD profile_scope(const kernel_context& k, const char* name) : profile_scope(k.profiler(), name) {}
  /// On a track taken from kernel_context::profiler(), for closures: one that captures the
  /// context by reference changes the generated code also without TILEPIPE_PROFILE, where
  /// the track is empty and capturing it by value changes nothing.
  TP_HD profile_scope(profile_recorder_ref track, const char* name) : profiler_(track) { profiler_.begin_scope(name); }
  TP_HD ~profile_scope() { profiler_.end(profile_kind::scope); }
  profile_scope(const profile_scope&) = delete;
  profile_scope& operator=(const profile_scope&) = delete;

 private:
  profile_recorder_ref profiler_;
};

}  // namespace tilepipe
