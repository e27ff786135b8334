// expect: a gathered block's rows are a tp::element dimension: box_source returns the row where each box starts
// A blocked row dimension would count box_source's rows in blocks, not rows.
#include <tilepipe/tilepipe.cuh>
namespace tp = tilepipe;
using tile = tp::tile<tp::block<64, 32>, tp::box_rows<16>>;
struct k {
  void operator()(tp::kernel_context& ctx, tp::gmem<float, 2, tile> x) const {
    auto body = [](auto, auto) {};
    auto source = [](tp::index<2> b, int row) { return tp::idx(b[0] + row, 0); };
    tp::emit_pipeline(body, tp::grid(4),
                      tp::in_specs(tp::gathered_spec<tile>([](auto i) { return tp::idx(i, 0); }, source)))(ctx, x);
  }
};
int main() { tp::kernel(k{}, {})(tp::device::open(tp::backend::interpret), tp::tensor<float, 2>(tp::device::open(tp::backend::interpret), {256, 32})); }
