// expect: register budget does not add up
#include <tilepipe/tilepipe.cuh>
using split = tp::register_split<2, 160>;
int main() { return split::compute; }
