// expect: tp::gathered_spec is an input's: an output block is stored as one block
// A gathered spec among the outputs.
#include <tilepipe/tilepipe.cuh>
namespace tp = tilepipe;
using tile = tp::tile<tp::block<tp::element(64), 32>, tp::box_rows<16>>;
struct k {
  void operator()(tp::kernel_context& ctx, tp::gmem<float, 2, tile> y) const {
    auto body = [](auto, auto) {};
    auto source = [](tp::index<2> b, int row) { return tp::idx(b[0] + row, 0); };
    tp::emit_pipeline(body, tp::grid(4), tp::in_specs(),
                      tp::out_specs(tp::gathered_spec<tile>([](auto i) { return tp::idx(64 * i, 0); }, source)))(ctx, y);
  }
};
int main() { tp::kernel(k{}, {}, tp::out_type<float>(256, 32))(tp::device::open(tp::backend::interpret)); }
