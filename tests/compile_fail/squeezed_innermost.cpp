// expect: the innermost block dimension cannot be squeezed
#include <tilepipe/tilepipe.cuh>
using t = tp::tile<tp::block<64, tp::squeezed>>;
int main() { return t::swizzle_bytes; }
