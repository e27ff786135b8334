// expect: multicast specs need emit_pipeline_warp_specialized
// The non-specialised pipeline has no cluster-wide release of its slots.
#include <tilepipe/tilepipe.cuh>
namespace tp = tilepipe;
using tile = tp::tile<tp::block<64, 32>, tp::swizzle<0>, tp::box_rows<32>>;
struct k {
  void operator()(tp::kernel_context& ctx, tp::gmem<float, 2, tile> x) const {
    auto body = [](auto, auto) {};
    tp::emit_pipeline(body, tp::grid(4), tp::in_specs(tp::spec<tile>([](auto i) { return tp::idx(i, 0); }, tp::multicast<2>)),
                      tp::out_specs())(ctx, x);
  }
};
int main() { tp::kernel(k{}, {.grid = {2}, .cluster = 2})(tp::device::open(tp::backend::interpret), tp::tensor<float, 2>{}); }
