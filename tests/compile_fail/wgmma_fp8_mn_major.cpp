// expect: fp8 wgmma reads both operands K-major
#include <tilepipe/tilepipe.cuh>
// B stored (K, N): MN-major, which the fp8 instructions cannot read.
using a_t = tp::tile<tp::block<64, 64>, tp::swizzle<64>>;
using b_t = tp::tile<tp::block<64, 64>, tp::swizzle<64>>;
void f(tp::accumulator<64, 64>& acc, tp::smem<tp::fp8_e4m3, a_t> a, tp::smem<tp::fp8_e4m3, b_t> b) { tp::wgmma(acc, a, b); }
int main() {}
