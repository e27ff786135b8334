// What a kernel body sees of its launch: its position in the grid (axis_index, named or
// numbered, as in Pallas), which warpgroup ("thread") it is, and the CTA's shared memory,
// handed out by a scoped bump allocator that every warpgroup runs identically.
#pragma once

#include "backend/primitives.cuh"
#include "core/config.cuh"
#include "core/error.cuh"
#include "core/profile_format.cuh"

namespace tilepipe {

inline constexpr int max_grid_rank = 3;
inline constexpr int max_axis_name = 16;

/// Grid geometry passed to every CTA (a kernel parameter on the GPU).
struct grid_info {
  int rank = 1;
  int extent[max_grid_rank] = {1, 1, 1};
  char names[max_grid_rank][max_axis_name] = {};
  int num_warpgroups = 1;
  failure_channel failure;  // where failed checks report on the GPU
#if TP_PROFILE
  profile_buffer profile;  // where the profiler's events go (null: nowhere)
#endif

  /// The launch's profile buffer (none without TILEPIPE_PROFILE).
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
      : grid_(&g), smem_(prim::dynamic_smem()), smem_size_(prim::dynamic_smem_size() - profile_smem_reserve) {
    for (int a = 0; a < max_grid_rank; ++a) cta_[a] = cta[a];
  }

  /// Index of this CTA along grid axis `axis` (Pallas' lax.axis_index).
  TP_HD int axis_index(int axis) const { return cta_[axis]; }
  TP_HD int axis_index(const char* name) const { return cta_[axis_of(name)]; }
  TP_HD int axis_size(int axis) const { return grid_->extent[axis]; }
  TP_HD int axis_size(const char* name) const { return grid_->extent[axis_of(name)]; }

  /// Which warpgroup ("thread" in Pallas' sense) runs this code, and how many there are.
  TP_HD int thread_index() const { return prim::warpgroup_index(); }
  TP_HD int num_threads() const { return grid_->num_warpgroups; }

  /// Where failed device-side checks report on the GPU (prim::fail).
  TP_HD const failure_channel& failure() const { return grid_->failure; }

  /// Synchronises all warpgroups of the CTA.
  TP_HD void sync_threads() const { prim::named_barrier_sync(prim::cta_barrier_id, warpgroup_size * num_threads()); }

  /// This CTA's rank in its thread-block cluster (launch option `cluster`), the cluster's
  /// size, and a barrier over all threads of the cluster. A kernel whose CTAs arrive on
  /// each other's barriers or write each other's SMEM (multicast specs) ends with
  /// cluster_sync(), so that no CTA exits while a peer still reaches into it.
  TP_HD int cluster_rank() const { return prim::cluster_rank(); }
  TP_HD int cluster_size() const { return prim::cluster_size(); }
  TP_HD void cluster_sync() const { prim::cluster_sync(); }

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
  TP_HD View alloc_per_thread() {
    constexpr std::uint32_t stride = (View::bytes + smem_alignment - 1) / smem_alignment * smem_alignment;
    unsigned char* p = allocate(stride * num_threads(), "per-thread SMEM view");
    for (int w = 0; w < num_threads(); ++w) prim::name_smem(p + stride * w, View::bytes, "per-thread SMEM view of warpgroup", w);
    return View{reinterpret_cast<typename View::value_type*>(p + stride * thread_index()), 0};
  }

  /// Restores the allocator when a scope (a pipeline) ends.
  TP_HD std::uint32_t smem_mark() const { return smem_top_; }
  TP_HD void smem_release(std::uint32_t mark) { smem_top_ = mark; }

 private:
  TP_HD int axis_of(const char* name) const {
    for (int a = 0; a < grid_->rank; ++a) {
      int i = 0;
      while (i < max_axis_name && name[i] != 0 && name[i] == grid_->names[a][i]) ++i;
      if (i < max_axis_name && name[i] == 0 && grid_->names[a][i] == 0) return a;
    }
    prim::fail(grid_->failure, "no grid axis is named '%s'", name);
    return 0;
  }

  const grid_info* grid_;
  unsigned char* smem_;
  std::uint32_t smem_size_;
  std::uint32_t smem_top_ = 0;
  int cta_[max_grid_rank] = {};
};

}  // namespace tilepipe
