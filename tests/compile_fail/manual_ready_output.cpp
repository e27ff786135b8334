// expect: tp::manual_ready is an input's option: an output block has no ready barrier to wait for
// Only inputs are waited for; an output's slot is the body's to write.
#include <tilepipe/tilepipe.cuh>
namespace tp = tilepipe;
using tile = tp::tile<tp::block<64, 32>>;
struct k {
  void operator()(tp::kernel_context& ctx, tp::gmem<float, 2, tile> y) const {
    auto body = [](auto, auto) {};
    tp::emit_pipeline(body, tp::grid(4), tp::in_specs(),
                      tp::out_specs(tp::spec<tile>([](auto i) { return tp::idx(i, 0); }, tp::manual_ready)))(ctx, y);
  }
};
int main() { tp::kernel(k{}, {}, tp::out_type<float>(256, 32))(tp::device::open(tp::backend::interpret)); }
