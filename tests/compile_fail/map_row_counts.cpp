// expect: every input has the output's number of rows, or one row (broadcast along the rows)
#include <tilepipe/tilepipe.cuh>
using view = tp::smem<float, tp::tile<tp::block<64, 64>>>;
int main() { tp::map([](float x) { return x; }, view{}, tp::rows<32>(view{}, 0)); }
