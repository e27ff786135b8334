// expect: memory_registers must be a multiple of 8 in 24..256
#include <tilepipe/tilepipe.cuh>
using split = tp::register_split<1, 20>;
int main() { return split::compute; }
