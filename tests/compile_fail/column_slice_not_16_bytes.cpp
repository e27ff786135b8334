// expect: a column slice spans whole 16-byte chunks of a row
#include <tilepipe/tilepipe.cuh>
using view = tp::smem<tp::bf16, tp::tile<tp::block<64, 64>>>;
int main() { return tp::cols<4>(view{}, 0).col0; }
