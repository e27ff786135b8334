// expect: put scalars in the kernel struct's members
#include <tilepipe/tilepipe.cuh>
struct k {
  void operator()(tp::kernel_context&, tp::gmem<float, 2> x, int n) const {}
};
int main() { tp::kernel(k{}, {})(tp::device::open(), tp::tensor<float, 2>(tp::device::open(), {8, 32})); }
