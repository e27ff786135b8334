// expect: multicast<c, axis>: axis is a grid axis (0, 1 or 2), or -1 for the whole cluster
// A block shared along a cluster axis names one of the launch grid's three axes.
#include <tilepipe/tilepipe.cuh>
namespace tp = tilepipe;
using tile = tp::tile<tp::block<64, 32>, tp::swizzle<0>, tp::box_rows<32>>;
auto s = tp::spec<tile>([](auto i) { return tp::idx(i, 0); }, tp::multicast<2, 3>);
int main() {}
