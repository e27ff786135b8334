// expect: memory_thread_idx is out of range
#include <tilepipe/tilepipe.cuh>
using t = tp::tile<tp::block<8, 32>>;
void f(tp::kernel_context& k, tp::gmem<float, 2, t> x) {
  auto s = tp::spec<t>([](auto i) { return tp::idx(i, 0); });
  tp::emit_pipeline_warp_specialized([](auto, auto) {}, tp::grid(4), tp::in_specs(s), tp::out_specs(), tp::num_compute_wgs<2>,
                                     tp::memory_registers<40>, tp::memory_thread_idx<3>)(k, x);
}
int main() {}
