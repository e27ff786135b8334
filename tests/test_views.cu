// SMEM views beyond whole blocks of one type: tp::map across element types, layouts and row
// counts (a one-row input broadcast along the rows), swizzled row slices whose first rows
// differ within an 8-row atom, column slices (tp::cols) read and written by map, load,
// store and wgmma, and the errors for slices the hardware cannot address.
#include "test_util.hpp"

#include <string>

namespace {

using x_tile = tp::tile<tp::block<64, 128>, tp::swizzle<128>>;  // bf16: two 64-column panels
using bias_tile = tp::tile<tp::block<8, 128>>;                   // f32, unswizzled
using y_tile = tp::tile<tp::block<64, 128>>;                     // f32, unswizzled
using w_tile = tp::tile<tp::block<64, 64>, tp::swizzle<128>>;    // bf16, one panel

// y = 2 x + bias[3, :]                         (bf16 swizzled in, f32 unswizzled out, 1-row broadcast)
// z[0:16]  = x[3:19]                           (swizzled row slices, first rows 3 apart)
// z[16:32] = x[24:40] + 1                      (first rows 8 apart: the byte-order path)
// z[32:64, 0:64]   = x[32:64, 64:128]          (column slices of whole panels)
// z[32:64, 64:96]  = x[32:64, 8:40]            (a column slice inside a panel)
// z[32:64, 96:128] = 0.5 x[32:64, 96:128]
// w[:, 0:32]  = x[:, 0:32] + 1,  w[:, 32:64] = 3 x[:, 48:80]   (fragments through column slices)
struct views_kernel {
  TP_HD void operator()(tp::kernel_context&, tp::gmem<tp::bf16, 2, x_tile> x, tp::gmem<float, 2, bias_tile> bias,
                        tp::gmem<float, 2, y_tile> y, tp::gmem<tp::bf16, 2, x_tile> z, tp::gmem<tp::bf16, 2, w_tile> w,
                        tp::smem<tp::bf16, x_tile> xs, tp::smem<float, bias_tile> bs, tp::smem<float, y_tile> ys,
                        tp::smem<tp::bf16, x_tile> zs, tp::smem<tp::bf16, w_tile> ws, tp::barriers<2> bar) const {
    tp::copy_gmem_to_smem(x, tp::idx(0, 0), xs, bar[0]);
    tp::copy_gmem_to_smem(bias, tp::idx(0, 0), bs, bar[1]);
    tp::barrier_wait(bar[0], 0);
    tp::barrier_wait(bar[1], 0);

    tp::map([](float v, float b) { return 2.0f * v + b; }, ys, xs, tp::rows<1>(bs, 3));

    tp::map([](float v) { return v; }, tp::rows<16>(zs, 0), tp::rows<16>(xs, 3));
    tp::map([](float v) { return v + 1.0f; }, tp::rows<16>(zs, 16), tp::rows<16>(xs, 24));
    const auto z_low = tp::rows<32>(zs, 32);
    const auto x_low = tp::rows<32>(xs, 32);
    tp::map([](float v) { return v; }, tp::cols<64>(z_low, 0), tp::cols<64>(x_low, 64));
    tp::map([](float v) { return v; }, tp::cols<32>(z_low, 64), tp::cols<32>(x_low, 8));
    tp::map([](float v) { return 0.5f * v; }, tp::cols<32>(z_low, 96), tp::cols<32>(x_low, 96));

    tp::store(tp::cols<32>(ws, 0), tp::load<float>(tp::cols<32>(xs, 0)) + 1.0f);
    tp::store(tp::cols<32>(ws, 32), tp::load<float>(tp::cols<32>(xs, 48)) * 3.0f);

    tp::commit_smem();
    tp::copy_smem_to_gmem(ys, y, tp::idx(0, 0));
    tp::copy_smem_to_gmem(zs, z, tp::idx(0, 0));
    tp::copy_smem_to_gmem(ws, w, tp::idx(0, 0));
    tp::wait_smem_to_gmem<0>();
  }
};

using a_tile = tp::tile<tp::block<64, 128>, tp::swizzle<128>>;   // M x K, two K panels
using b_tile = tp::tile<tp::block<128, 128>, tp::swizzle<128>>;  // K x N, two N panels
using c_tile = tp::tile<tp::block<64, 64>>;

// c = (a * b)[:, 64:128], K split in two column slices of A and two row slices of B, the
// N half taken as a column slice of B. col0_a moves A's second slice (the error case).
struct wgmma_slices_kernel {
  int col0_a = 64;
  TP_HD void operator()(tp::kernel_context&, tp::gmem<tp::bf16, 2, a_tile> a, tp::gmem<tp::bf16, 2, b_tile> b,
                        tp::gmem<float, 2, c_tile> c, tp::smem<tp::bf16, a_tile> as, tp::smem<tp::bf16, b_tile> bs,
                        tp::smem<float, c_tile> cs, tp::barriers<2> bar) const {
    tp::copy_gmem_to_smem(a, tp::idx(0, 0), as, bar[0]);
    tp::copy_gmem_to_smem(b, tp::idx(0, 0), bs, bar[1]);
    tp::barrier_wait(bar[0], 0);
    tp::barrier_wait(bar[1], 0);
    tp::accumulator<64, 64> acc = tp::zeros<float, 64, 64>();
    tp::wgmma(acc, tp::cols<64>(as, 0), tp::cols<64>(tp::rows<64>(bs, 0), 64), false);
    tp::wgmma(acc, tp::cols<64>(as, col0_a), tp::cols<64>(tp::rows<64>(bs, 64), 64));
    tp::wgmma_wait<0>(acc);
    tp::store(cs, acc);
    tp::commit_smem();
    tp::copy_smem_to_gmem(cs, c, tp::idx(0, 0));
    tp::wait_smem_to_gmem<0>();
  }
};

// A column slice that starts inside a 16-byte chunk.
struct misaligned_slice_kernel {
  int start;
  TP_HD void operator()(tp::kernel_context&, tp::gmem<tp::bf16, 2, w_tile>, tp::smem<tp::bf16, w_tile> ws) const {
    tp::map([] { return 0.0f; }, tp::cols<8>(ws, start));
  }
};

float bf(tp::bf16 v) { return tp::to_float(v); }

}  // namespace

TEST(Views, MapAcrossTypesRowsAndColumnSlicesAndFragmentsThroughSlices) {
  const auto hx = test::random_values<tp::bf16>(64 * 128, test::fresh_seed(), -4.0f, 4.0f);
  const auto hb = test::random_values<float>(8 * 128);
  auto x = tp::tensor<tp::bf16, 2>::from_host(test::dev(), {64, 128}, hx);
  auto bias = tp::tensor<float, 2>::from_host(test::dev(), {8, 128}, hb);
  tp::tensor<float, 2> y(test::dev(), {64, 128});
  tp::tensor<tp::bf16, 2> z(test::dev(), {64, 128}), w(test::dev(), {64, 64});
  y.poison(), z.poison(), w.poison();
  tp::kernel(views_kernel{}, {.grid = {1}})(test::dev(), x, bias, y, z, w);
  const auto hy = y.to_host();
  const auto hz = z.to_host(), hw = w.to_host();
  auto X = [&](int r, int c) { return bf(hx[r * 128 + c]); };
  auto round = [](float v) { return bf(tp::from_float<tp::bf16>(v)); };
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 128; ++c) {
      ASSERT_NEAR(hy[r * 128 + c], 2.0 * X(r, c) + hb[3 * 128 + c], 1e-5) << "y " << r << "," << c;
      float want;
      if (r < 16) want = X(r + 3, c);
      else if (r < 32) want = round(X(r + 8, c) + 1.0f);
      else if (c < 64) want = X(r, c + 64);
      else if (c < 96) want = X(r, c - 56);
      else want = 0.5f * X(r, c);
      ASSERT_EQ(bf(hz[r * 128 + c]), want) << "z " << r << "," << c;
    }
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 64; ++c) {
      const float want = c < 32 ? round(X(r, c) + 1.0f) : round(3.0f * X(r, c + 16));
      ASSERT_EQ(bf(hw[r * 64 + c]), want) << "w " << r << "," << c;
    }
}

TEST(Views, WgmmaOnColumnSlices) {
  const auto ha = test::random_values<tp::bf16>(64 * 128), hb = test::random_values<tp::bf16>(128 * 128);
  auto a = tp::tensor<tp::bf16, 2>::from_host(test::dev(), {64, 128}, ha);
  auto b = tp::tensor<tp::bf16, 2>::from_host(test::dev(), {128, 128}, hb);
  tp::tensor<float, 2> c(test::dev(), {64, 64});
  c.poison();
  tp::kernel(wgmma_slices_kernel{}, {.grid = {1}})(test::dev(), a, b, c);
  const auto hc = c.to_host();
  std::vector<double> ref(64 * 64, 0.0);
  for (int i = 0; i < 64; ++i)
    for (int k = 0; k < 128; ++k)
      for (int j = 0; j < 64; ++j) ref[i * 64 + j] += double(bf(ha[i * 128 + k])) * bf(hb[k * 128 + 64 + j]);
  EXPECT_LT(test::rel_error(hc, ref), 1e-5);
}

TEST(Views, SlicesTheHardwareCannotAddressAreReported) {
  if (test::on_gpu()) GTEST_SKIP() << "device-side checks trap on the GPU; the interpreter reports them";
  tp::tensor<tp::bf16, 2> w(test::dev(), {64, 64});
  EXPECT_NE(test::error_of([&] { tp::kernel(misaligned_slice_kernel{4}, {.grid = {1}})(test::dev(), w); })
                .find("column slice [4, 12) of an SMEM view of 64 columns: it must lie inside the view and start at a "
                      "multiple of 8 columns"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { tp::kernel(misaligned_slice_kernel{64}, {.grid = {1}})(test::dev(), w); })
                .find("column slice [64, 72)"),
            std::string::npos);
  EXPECT_EQ(test::error_of([&] { tp::kernel(misaligned_slice_kernel{56}, {.grid = {1}})(test::dev(), w); }), "");

  tp::tensor<tp::bf16, 2> a(test::dev(), {64, 128}), b(test::dev(), {128, 128});
  tp::tensor<float, 2> c(test::dev(), {64, 64});
  const std::string err =
      test::error_of([&] { tp::kernel(wgmma_slices_kernel{32}, {.grid = {1}})(test::dev(), a, b, c); });
  EXPECT_NE(err.find("column slice starting at column 32; slices of wgmma operands start at a multiple of the "
                     "swizzle width (64 columns)"),
            std::string::npos)
      << err;
}
