// expect: taller than its TMA box (256 rows, or box_rows<R>) must be a multiple of the box height
#include <tilepipe/tilepipe.cuh>
using P = tp::tma_plan<tp::tile<tp::block<300, 64>>, 2>;
int main() { return P::boxes; }
