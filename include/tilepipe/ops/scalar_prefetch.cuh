// Scalar prefetch (Pallas TPU's PrefetchScalarGridSpec): small integer tables in device
// memory, such as the group offsets of a grouped matmul or the block table of a paged KV
// cache, that a kernel copies into shared memory once and then reads wherever it decides
// what to move: in index maps, in bodies, in the extents of pipeline grids and in its tile
// schedule.
//
//     struct my_kernel {
//       tp::scalar_source block_table;  // a kernel parameter: where the table lives and its size
//       TP_HD void operator()(tp::kernel_context& ctx, ...) const {
//         const tp::scalar_table pages = tp::prefetch_scalars(ctx, block_table, "block_table");
//         auto kv_map = [=](auto p) { return tp::idx(pages[p], 0); };  // index map through the table
//         tp::emit_pipeline(body, tp::grid(pages.size()), ...);
//
// Every warpgroup of the CTA calls prefetch_scalars at the same point (it allocates SMEM and
// synchronises the CTA, like ctx.allocate and ctx.sync_threads). After it, a read is a
// shared-memory load, not a global one in the dependence chain of every TMA issue.
//
// An index map that reads a table stays analysable: a table indexed by a grid-axis probe
// returns a probe of the same axes (the block depends on the axes its table entry does), so
// the pipelines size buffers from the lookup as from plain arithmetic.
//
// Reads are checked against the table's extent in the interpreter and in TILEPIPE_DEBUG GPU
// builds (tp::debug_checks): a read outside it fails naming the table and the index.
#pragma once

#include "../context.cuh"
#include "../core/index_map.cuh"

namespace tilepipe {

/// Where a scalar table lives in device memory and how many ints it has: a kernel parameter.
struct scalar_source {
  const int* data = nullptr;
  int size = 0;
};

/// A scalar table in shared memory, as prefetch_scalars returns it: a read-only view, cheap
/// to copy into index maps.
class scalar_table {
 public:
  scalar_table() = default;
  TP_HD scalar_table(const int* smem, int size, const char* name, failure_channel failure)
      : smem_(smem), size_(size), name_(name), failure_(failure) {}

  TP_HD int size() const { return size_; }
  TP_HD int operator[](int i) const {
    if constexpr (debug_checks) {
      if (i < 0 || i >= size_)
        prim::fail(failure_, "scalar table '%s' read at index %d, outside its %d entries", name_, i, size_);
      prim::note_smem_read(smem_ + i, sizeof(int), name_);
    }
    return smem_[i];
  }
  /// In an index map's analysis: the entry depends on the axes its index does (and is not
  /// affine in them: a table is any function).
  template <unsigned Mask, bool Affine>
  TP_HD constexpr axis_probe<Mask, false> operator[](axis_probe<Mask, Affine>) const {
    return {};
  }

 private:
  const int* smem_ = nullptr;
  int size_ = 0;
  const char* name_ = "";
  failure_channel failure_{};
};

/// SMEM for `capacity` ints (>= the table's size), the same for every CTA: a kernel whose
/// tables vary in size reserves their largest (its SMEM budget is a compile-time fact).
TP_HD inline int* allocate_scalars(kernel_context& ctx, int capacity, const char* name) {
  return reinterpret_cast<int*>(ctx.allocate(static_cast<std::uint32_t>(capacity) * sizeof(int), name));
}

/// Fills a table in SMEM (from allocate_scalars) with entry(i) for i < size, the CTA's
/// threads sharing the entries, then synchronises the CTA and returns the table's view:
/// for tables a kernel derives from prefetched ones (a prefix sum of group sizes).
template <class Entry>
TP_HD scalar_table fill_scalars(kernel_context& ctx, int* smem, int size, const char* name, Entry&& entry) {
  // Each thread fills 16-byte chunks of 4 entries: threads never share a chunk (the
  // interpreter's race detector watches 16-byte granules), and a warp writes 512 bytes.
  constexpr int chunk = 4;
  const int me = ctx.thread_index() * prim::warpgroup_threads() + prim::thread_in_warpgroup();
  const int all = ctx.num_threads() * prim::warpgroup_threads();
  for (int first = me * chunk; first < size; first += all * chunk) {
    const int end = first + chunk < size ? first + chunk : size;
    for (int i = first; i < end; ++i) smem[i] = entry(i);
    prim::note_smem_write(smem + first, (end - first) * sizeof(int), name);
  }
  ctx.sync_threads();
  return {smem, size, name, ctx.failure()};
}

/// Copies a table from device memory into SMEM (all threads of the CTA share the copy, then
/// synchronise) and returns its view. `name` (a string literal) names it in reports.
/// `capacity`: the SMEM to reserve, at least src.size ints (0: src.size).
TP_HD inline scalar_table prefetch_scalars(kernel_context& ctx, scalar_source src, const char* name, int capacity = 0) {
  if (capacity == 0) capacity = src.size;
  if (src.size < 0 || src.size > capacity || (src.size > 0 && !src.data))
    prim::fail(ctx.failure(), "scalar table '%s' of %d entries: more than the %d it reserves, negative, or without data",
               name, src.size, capacity);
  int* smem = allocate_scalars(ctx, capacity > 0 ? capacity : 1, name);
  return fill_scalars(ctx, smem, src.size, name, [&](int i) { return src.data[i]; });
}

}  // namespace tilepipe
