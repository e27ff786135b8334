// expect: oob_fill<oob::nan> needs f32, bf16 or f16 elements
// max-bytes: 12000
#include <tilepipe/tilepipe.cuh>
using t = tp::tile<tp::block<8, 64>, tp::oob_fill<tp::oob::nan>>;
struct k {
  void operator()(tp::kernel_context&, tp::gmem<tp::i8, 2, t>) const {}  // NaN has no 8-bit integer
};
int main() {
  auto d = tp::device::open();
  tp::kernel(k{}, {})(d, tp::tensor<tp::i8, 2>(d, {8, 64}));
}
