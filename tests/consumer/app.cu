// y = x + 1 through tp::emit_pipeline: the kernel of the consumer project (CMakeLists.txt here).
// Runs on the GPU when there is one, else in the CPU interpreter; checks itself (exit code 0).
#include <tilepipe/tilepipe.cuh>

#include <cstdio>
#include <random>
#include <vector>

using block_tile = tp::tile<tp::block<32, 64>>;

struct add_one {
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<tp::bf16, 2, block_tile> x,
                        tp::gmem<tp::bf16, 2, block_tile> y) const {
    const int rows = static_cast<int>((x.shape[0] + 31) / 32), cols = static_cast<int>((x.shape[1] + 63) / 64);
    auto body = [](auto, auto x_smem, auto y_smem) { tp::map([](float v) { return v + 1.0f; }, y_smem, x_smem); };
    auto spec = tp::spec<block_tile>([](auto i, auto j) { return tp::idx(i, j); });
    tp::emit_pipeline(body, tp::grid(rows, cols), tp::in_specs(spec), tp::out_specs(spec))(k, x, y);
  }
};

int main() {
  const auto dev = tp::device::open();
  const long long rows = 100, cols = 200;  // edge blocks in both dimensions
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> value(-200, 200);  // x + 1 is exact in bf16
  std::vector<tp::bf16> hx(rows * cols);
  for (auto& v : hx) v = tp::from_float<tp::bf16>(static_cast<float>(value(rng)));
  try {
    const auto x = tp::tensor<tp::bf16, 2>::from_host(dev, {rows, cols}, hx);
    const auto y = tp::kernel(add_one{}, {.grid = {1}}, tp::out_type<tp::bf16>(rows, cols))(dev, x);
    const auto hy = y.to_host();
    long long wrong = 0;
    for (long long i = 0; i < rows * cols; ++i) wrong += tp::to_float(hy[i]) != tp::to_float(hx[i]) + 1.0f;
    std::printf("y = x + 1 on %s: %lld of %lld elements wrong\n", dev.name().c_str(), wrong, rows * cols);
    return wrong == 0 ? 0 : 1;
  } catch (const tp::error& e) {
    std::printf("%s\n", e.what());
    return 2;
  }
}
