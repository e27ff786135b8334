// expect: the index map returns a different number of indices than the operand has dimensions
#include <tilepipe/tilepipe.cuh>
using t = tp::tile<tp::block<8, 32>>;
struct k {
  void operator()(tp::kernel_context& c, tp::gmem<float, 2, t> x) const {
    tp::emit_pipeline([](auto, auto) {}, tp::grid(4), tp::in_specs(tp::spec<t>([](auto i) { return tp::idx(i); })))(c, x);
  }
};
int main() { tp::kernel(k{}, {})(tp::device::open(), tp::tensor<float, 2>(tp::device::open(), {8, 32})); }
