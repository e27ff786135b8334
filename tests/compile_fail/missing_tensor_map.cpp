// expect: has no tensor map for the spec's tile
#include <tilepipe/tilepipe.cuh>
using t = tp::tile<tp::block<8, 32>>;
using other = tp::tile<tp::block<16, 32>>;
struct k {
  void operator()(tp::kernel_context& c, tp::gmem<float, 2, other> x) const {
    tp::emit_pipeline([](auto, auto) {}, tp::grid(4), tp::in_specs(tp::spec<t>([](auto i) { return tp::idx(i, 0); })))(c, x);
  }
};
int main() { tp::kernel(k{}, {})(tp::device::open(), tp::tensor<float, 2>(tp::device::open(), {8, 32})); }
