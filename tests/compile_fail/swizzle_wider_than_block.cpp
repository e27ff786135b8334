// expect: must be a multiple of the swizzle width
#include <tilepipe/tilepipe.cuh>
using L = tp::tile_layout<tp::tile<tp::block<64, 32>, tp::swizzle<128>>, 2>;
int main() { return L::bytes; }
