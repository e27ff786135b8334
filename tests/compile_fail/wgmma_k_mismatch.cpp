// expect: wgmma: A's columns and B's rows (K) differ
#include <tilepipe/tilepipe.cuh>
using a_t = tp::tile<tp::block<64, 64>, tp::swizzle<128>>;
using b_t = tp::tile<tp::block<32, 64>, tp::swizzle<128>>;
void f(tp::accumulator<64, 64>& acc, tp::smem<tp::bf16, a_t> a, tp::smem<tp::bf16, b_t> b) { tp::wgmma(acc, a, b); }
int main() {}
