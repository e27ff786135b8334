// expect: an index map takes one grid index per axis of the pipeline's grid
// max-bytes: 12000
#include <tilepipe/tilepipe.cuh>
using t = tp::tile<tp::block<8, 32>>;
struct body {
  void operator()(tp::kernel_context&, tp::index<3>, auto, auto) const {}
};
struct two_indices {  // the grid has three axes
  constexpr auto operator()(auto i, auto j) const { return tp::idx(i, j); }
};
int main() {
  auto d = tp::device::open();
  tp::tensor<float, 2> x(d, {32, 64});
  tp::pallas_call(body{}, tp::grid(4, 2, 3), tp::in_specs(tp::spec<t>(two_indices{})),
                  tp::out_specs(tp::spec<t>(tp::axes_map<0, 1>{})), tp::out_shape(tp::out_type<float>(32, 64)))(d, x);
}
