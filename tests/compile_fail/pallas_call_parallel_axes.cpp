// expect: pallas_call: at most 3 parallel axes
// max-bytes: 12000
#include <tilepipe/tilepipe.cuh>
using t = tp::tile<tp::block<8, 32>>;
struct body {
  void operator()(tp::kernel_context&, tp::index<4>, auto, auto) const {}
};
int main() {
  tp::pallas_call(body{}, tp::grid(2, 2, 2, 2), tp::in_specs(tp::spec<t>(tp::axes_map<0, 1>{})),
                  tp::out_specs(tp::spec<t>(tp::axes_map<0, 1>{})), tp::out_shape(tp::out_type<float>(32, 64)));
}
