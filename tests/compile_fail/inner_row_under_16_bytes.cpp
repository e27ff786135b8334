// expect: TMA moves rows of a multiple of 16 bytes
#include <tilepipe/tilepipe.cuh>
using L = tp::tile_layout<tp::tile<tp::block<64, 4>>, 2>;
int main() { return L::bytes; }
