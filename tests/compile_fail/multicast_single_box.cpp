// expect: must consist of a multiple of c TMA boxes
// A multicast<2> block of one column panel and one row box cannot be split between 2 CTAs.
#include <tilepipe/tilepipe.cuh>
namespace tp = tilepipe;
using tile = tp::tile<tp::block<64, 32>>;
struct k {
  static constexpr int num_threads = 3;
  void operator()(tp::kernel_context& ctx, tp::gmem<float, 2, tile> x) const {
    auto body = [](auto, auto) {};
    tp::emit_pipeline_warp_specialized(body, tp::grid(4),
                                       tp::in_specs(tp::spec<tile>([](auto i) { return tp::idx(i, 0); }, tp::multicast<2>)),
                                       tp::out_specs(), tp::num_compute_wgs<2>, tp::memory_registers<40>)(ctx, x);
  }
};
int main() { tp::kernel(k{}, {.grid = {2}, .cluster = 2})(tp::device::open(tp::backend::interpret), tp::tensor<float, 2>{}); }
