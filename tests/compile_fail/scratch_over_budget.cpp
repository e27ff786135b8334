// expect: shared memory over budget
#include <tilepipe/tilepipe.cuh>
struct k {
  void operator()(tp::kernel_context&, tp::gmem<float, 2> x, tp::smem<float, tp::tile<tp::block<256, 256>>> big) const {}
};
int main() { tp::kernel(k{}, {})(tp::device::open(), tp::tensor<float, 2>(tp::device::open(), {8, 32})); }
