// expect: index_map_takes<3>
// max-bytes: 6000
#include <tilepipe/tilepipe.cuh>
using t = tp::tile<tp::block<8, 32>>;
struct k {
  static constexpr int num_threads = 2;
  void operator()(tp::kernel_context& c, tp::gmem<float, 2, t> x, tp::gmem<float, 2, t> y) const {
    auto s = tp::spec<t>([](auto i, auto) { return tp::idx(i, 0); });
    auto out = tp::spec<t>([](auto i, auto, auto) { return tp::idx(i, 0); });  // three indices, two axes
    tp::emit_pipeline_warp_specialized([](auto, auto, auto) {}, tp::grid(4, 2), tp::in_specs(s), tp::out_specs(out),
                                       tp::num_compute_wgs<1>, tp::memory_registers<40>)(c, x, y);
  }
};
int main() {
  auto d = tp::device::open();
  tp::kernel(k{}, {}, tp::out_type<float>(32, 64))(d, tp::tensor<float, 2>(d, {32, 64}));
}
