// expect: a tp::symmetric<T, R, ...> kernel parameter binds to a tp::symmetric_tensor<T, R> launch argument
// max-bytes: 8000
#include <tilepipe/tilepipe.cuh>
using t = tp::tile<tp::block<8, 32>>;
struct k {
  void operator()(tp::kernel_context&, tp::symmetric<tp::bf16, 2, t>) const {}
};
int main() {
  auto d = tp::device::open();
  tp::kernel(k{}, {})(d, tp::tensor<tp::bf16, 2>(d, {32, 64}));  // a plain tensor for a symmetric parameter
}
