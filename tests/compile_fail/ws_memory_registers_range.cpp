// expect: must be in 24..256, the range of setmaxnreg
#include <tilepipe/tilepipe.cuh>
using split = tp::register_split<1, 20>;
int main() { return split::compute; }
