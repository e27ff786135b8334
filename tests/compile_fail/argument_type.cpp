// expect: argument_is_tensor<float, 2>
// max-bytes: 8000
#include <tilepipe/tilepipe.cuh>
using t = tp::tile<tp::block<8, 32>>;
struct k {
  void operator()(tp::kernel_context&, tp::gmem<tp::bf16, 2, t>, tp::gmem<tp::bf16, 2, t>) const {}
};
int main() {
  auto d = tp::device::open();
  tp::kernel(k{}, {}, tp::out_type<tp::bf16>(32, 64))(d, tp::tensor<float, 2>(d, {32, 64}));  // f32 for a bf16 parameter
}
