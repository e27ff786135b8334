// expect: pallas_call: dimension_semantics names a different number of axes than the grid has
// max-bytes: 12000
#include <tilepipe/tilepipe.cuh>
using t = tp::tile<tp::block<8, 32>>;
struct body {
  void operator()(tp::kernel_context&, tp::index<2>, auto, auto) const {}
};
int main() {
  tp::pallas_call(body{}, tp::grid(4, 2), tp::in_specs(tp::spec<t>(tp::axes_map<0, 1>{})),
                  tp::out_specs(tp::spec<t>(tp::axes_map<0, 1>{})), tp::out_shape(tp::out_type<float>(32, 64)),
                  tp::dimension_semantics<tp::parallel>);  // one axis named, the grid has two
}
