// expect: exceeds the TMA box limit of 256 elements
#include <tilepipe/tilepipe.cuh>
using P = tp::tma_plan<tp::tile<tp::block<2, 300, 64>>, 2>;
int main() { return P::boxes; }
