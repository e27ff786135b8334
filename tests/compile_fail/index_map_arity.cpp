// expect: an index map takes one grid index per axis of the pipeline's grid
// max-bytes: 12000
#include <tilepipe/tilepipe.cuh>
using t = tp::tile<tp::block<8, 32>>;
struct k {
  void operator()(tp::kernel_context& c, tp::gmem<float, 2, t> x, tp::gmem<float, 2, t> y) const {
    auto s = tp::spec<t>([](auto i) { return tp::idx(i, 0); });  // one index, but the grid has two axes
    tp::emit_pipeline([](auto, auto, auto) {}, tp::grid(4, 2), tp::in_specs(s), tp::out_specs(s))(c, x, y);
  }
};
int main() {
  auto d = tp::device::open();
  tp::kernel(k{}, {}, tp::out_type<float>(32, 64))(d, tp::tensor<float, 2>(d, {32, 64}));
}
