// expect: a tile's block rank must equal the tensor's rank
#include <tilepipe/tilepipe.cuh>
tp::gmem<float, 2, tp::tile<tp::block<4, 8, 32>>> g;
int main() {}
