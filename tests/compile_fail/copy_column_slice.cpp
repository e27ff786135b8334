// expect: copy whole, untransposed blocks (the TMA box covers the full tile), not row or column slices
#include <tilepipe/tilepipe.cuh>
using t = tp::tile<tp::block<64, 64>>;
void f(tp::gmem<float, 2, t> g) { tp::copy_smem_to_gmem(tp::cols<32>(tp::smem<float, t>{}, 0), g, tp::idx(0, 0)); }
int main() {}
