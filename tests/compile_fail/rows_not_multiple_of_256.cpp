// expect: taller than 256 rows (the TMA box limit) must be a multiple of 256 rows
#include <tilepipe/tilepipe.cuh>
using P = tp::tma_plan<tp::tile<tp::block<300, 64>>, 2>;
int main() { return P::boxes; }
