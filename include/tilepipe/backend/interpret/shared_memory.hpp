// The shared memory of a simulated cluster: each CTA's bytes with the real layout and
// budget (one CTA after another, `stride` apart), addresses as a CTA's shared window sees
// them and the peer CTA's copy of one (mapa), the names of its regions for reports, and
// the bytes poisoned as a fresh output block and not written since.
#pragma once

#include "../../core/error.cuh"
#include "cluster_layout.hpp"
#include "smem_regions.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace tilepipe::interpret {

class shared_memory {
 public:
  shared_memory(std::size_t bytes_per_cta, cluster_layout cluster)
      : size(bytes_per_cta),
        stride(round_up(bytes_per_cta ? bytes_per_cta : 1024, 1024)),
        total((cluster.ctas - 1) * stride + bytes_per_cta),
        cluster_(cluster),
        bytes_(static_cast<unsigned char*>(std::aligned_alloc(1024, cluster.ctas * stride))),
        exited_(cluster.ctas, 0) {
    std::memset(bytes_, 0xFF, cluster.ctas * stride);  // poison: NaN in every float format
  }
  ~shared_memory() { std::free(bytes_); }
  shared_memory(const shared_memory&) = delete;
  shared_memory& operator=(const shared_memory&) = delete;

  const std::size_t size;    // per CTA
  const std::size_t stride;  // from one CTA's shared memory to the next's
  const std::size_t total;   // from the first CTA's first byte to the last CTA's last

  /// The shared memory of all CTAs; offsets are relative to it.
  unsigned char* base() const { return bytes_; }
  /// The shared memory of the CTA of cluster rank `rank`.
  unsigned char* of(int rank) const { return bytes_ + rank * stride; }

  std::uint32_t offset(const void* p, std::size_t bytes, const char* what) const {
    const auto* c = static_cast<const unsigned char*>(p);
    if (c < bytes_ || c + bytes > bytes_ + total)
      detail::throw_formatted("%s: address is not inside this CTA's %zu bytes of shared memory", what, size);
    return static_cast<std::uint32_t>(c - bytes_);
  }

  /// The shared-window address of p as warpgroup wg's CTA sees it (what the GPU puts in
  /// wgmma descriptors): the offset from that CTA's shared memory.
  std::uint32_t local_address(int wg, const void* p) const {
    const std::uint32_t off = offset(p, 0, "shared address");
    const std::uint32_t first = static_cast<std::uint32_t>(cluster_.rank_of(wg) * stride);
    if (off < first || off > first + size)
      detail::throw_formatted("warpgroup %d uses an address in the shared memory of another CTA of its cluster", wg);
    return off - first;
  }

  /// The same SMEM location as p (in warpgroup wg's CTA) in the CTA of rank `rank` (mapa).
  unsigned char* peer(int wg, const void* p, int rank, const char* what) const {
    if (rank < 0 || rank >= cluster_.ctas)
      detail::throw_formatted("%s: CTA rank %d is outside the cluster of %d CTAs", what, rank, cluster_.ctas);
    if (exited_[rank] == cluster_.wgs_per_cta && rank != cluster_.rank_of(wg))
      detail::throw_formatted("%s: CTA rank %d of the cluster has exited; a CTA must not exit while others still "
                              "arrive on its barriers or write its shared memory (end with a cluster sync)",
                              what, rank);
    return of(rank) + local_address(wg, p);
  }
  /// Warpgroup wg returned from the kernel: its CTA's memory is gone once all of them did.
  void warpgroup_exited(int wg) { ++exited_[cluster_.rank_of(wg)]; }

  // ---- names, for reports ------------------------------------------------------------
  void name_region(const void* p, std::size_t bytes, const char* what, int index, int slot) {
    regions_.name(offset(p, bytes, "naming shared memory"), static_cast<std::uint32_t>(bytes), what, index, slot);
  }
  /// Names what the region starting at p holds now (an output block).
  void note_contents(const void* p, std::string contents) {
    regions_.note_contents(offset(p, 0, "naming shared memory"), std::move(contents));
  }
  std::string describe(std::uint32_t lo, std::uint32_t hi) const { return regions_.describe(lo, hi); }

  // ---- poisoned output blocks --------------------------------------------------------
  /// Fills [off, off + bytes) with NaN and remembers that nothing wrote it yet: a
  /// pipeline's output slot at the start of a block's run.
  void poison(std::uint32_t off, std::size_t bytes) {
    std::memset(bytes_ + off, 0xFF, bytes);
    std::fill(unwritten_.begin() + off, unwritten_.begin() + off + bytes, true);
  }
  void mark_written(std::uint32_t off, std::size_t bytes) {
    std::fill(unwritten_.begin() + off, unwritten_.begin() + off + bytes, false);
  }
  /// Fails on a read of bytes poisoned as a fresh output block and not written since, by
  /// warpgroup wg at pipeline step `step`.
  void check_written(int wg, std::uint32_t begin, std::uint32_t end, const char* what, long long step) const {
    std::uint32_t lo = begin;
    while (lo < end && !unwritten_[lo]) ++lo;
    if (lo == end) return;
    std::uint32_t hi = lo;
    while (hi < end && unwritten_[hi]) ++hi;
    detail::throw_formatted(
        "uninitialised read [output block read before written]: warpgroup %d reads (%s) %s%s before anything wrote "
        "it. A pipeline does not load its outputs: an output block starts uninitialised at the first step of its run "
        "(TPU semantics), so the body must write it there first (e.g. initialise an accumulator when the reduction "
        "index is 0) before reading it",
        wg, what, describe(lo, hi).c_str(), step >= 0 ? (" at pipeline step " + std::to_string(step)).c_str() : "");
  }

 private:
  static std::size_t round_up(std::size_t x, std::size_t a) { return (x + a - 1) / a * a; }

  cluster_layout cluster_;
  unsigned char* bytes_;
  std::vector<int> exited_;  // warpgroups returned, per CTA rank
  smem_regions regions_;
  std::vector<bool> unwritten_ = std::vector<bool>(total, false);  // poisoned output bytes not written since
};

}  // namespace tilepipe::interpret
