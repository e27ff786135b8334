// expect: the compute warpgroups would get fewer registers than the launch gives them
#include <tilepipe/tilepipe.cuh>
using split = tp::register_split<2, 208>;
int main() { return split::compute; }
