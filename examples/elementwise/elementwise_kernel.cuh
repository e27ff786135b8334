// y = a * x + b over a large 2-D tensor: each CTA pipelines over its share of the blocks.
#pragma once

#include <tilepipe/tilepipe.cuh>

namespace tp = tilepipe;

template <class T, int BR, int BC, int InSlots, int OutSlots>
struct axpb_kernel {
  using block_tile = tp::tile<tp::block<BR, BC>>;

  float a, b;
  int col_blocks, blocks_per_cta, total_blocks;

  TP_HD void operator()(tp::kernel_context& ctx, tp::gmem<T, 2, block_tile> x, tp::gmem<T, 2, block_tile> y) const {
    const int first = ctx.axis_index(0) * blocks_per_cta;
    const int count = tp::min(blocks_per_cta, total_blocks - first);
    const int cb = col_blocks;
    auto block_of = [=](auto i) { return tp::idx((first + i) / cb, (first + i) % cb); };
    const float a_ = a, b_ = b;
    auto body = [=](auto, auto x_smem, auto y_smem) { tp::map([=](float v) { return a_ * v + b_; }, y_smem, x_smem); };
    auto pipe = tp::emit_pipeline(body, tp::grid(count < 0 ? 0 : count),
                                  tp::in_specs(tp::spec<block_tile>(block_of, tp::buffered<InSlots>)),
                                  tp::out_specs(tp::spec<block_tile>(block_of, tp::buffered<OutSlots>)));
    static_assert(decltype(pipe)::template smem_bytes<decltype(x), decltype(y)> <= smem_bytes);
    pipe(ctx, x, y);
  }

  /// Dynamic SMEM per CTA, no more than the pipeline needs (its slots and barriers, checked
  /// above), so that several CTAs fit on an SM.
  static constexpr std::size_t smem_bytes = (InSlots + OutSlots) * BR * BC * sizeof(T) + 1024 * InSlots;

  /// The kernel for a rows x cols tensor spread over (at most) `ctas` CTAs.
  static axpb_kernel make(long long rows, long long cols, float a, float b, int ctas) {
    const int cb = static_cast<int>((cols + BC - 1) / BC);
    const int total = static_cast<int>((rows + BR - 1) / BR) * cb;
    ctas = ctas < total ? ctas : total;
    return {a, b, cb, (total + ctas - 1) / ctas, total};
  }
  tp::launch_config config() const {
    return {.grid = {(total_blocks + blocks_per_cta - 1) / blocks_per_cta}, .smem_bytes = smem_bytes};
  }
};
