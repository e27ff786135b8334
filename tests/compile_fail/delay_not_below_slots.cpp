// expect: delay_release must be smaller than the operand's slot count
#include <tilepipe/tilepipe.cuh>
using t = tp::tile<tp::block<8, 32>>;
struct k {
  void operator()(tp::kernel_context& c, tp::gmem<float, 2, t> x) const {
    tp::emit_pipeline([](auto, auto) {}, tp::grid(4), tp::in_specs(tp::spec<t>([](auto i) { return tp::idx(i, 0); }, tp::delay_release<2>)),
                      tp::max_concurrent_steps<2>)(c, x);
  }
};
int main() { tp::kernel(k{}, {})(tp::device::open(), tp::tensor<float, 2>(tp::device::open(), {8, 32})); }
