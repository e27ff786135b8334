// expect: wgmma operands are bf16, f16, fp8_e4m3 or fp8_e5m2
#include <tilepipe/tilepipe.cuh>
using a_t = tp::tile<tp::block<64, 32>, tp::swizzle<128>>;
void f(tp::accumulator<64, 64>& acc, tp::smem<float, a_t> a, tp::smem<float, tp::tile<tp::block<32, 64>, tp::swizzle<128>>> b) { tp::wgmma(acc, a, b); }
int main() {}
