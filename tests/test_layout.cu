// SMEM layouts against the PTX ISA's definition of the swizzle modes, and TMA plans.
#include "test_util.hpp"

namespace {

// The PTX ISA describes swizzling as a permutation of 16-byte chunks: in a row of
// S bytes (S/16 chunks), chunk c of row r goes to chunk c ^ (r % (S/16)), where rows are
// S bytes long and the pattern repeats every 8 rows of 128 B (S=128), 4x... expressed
// per 128-byte line: line L holds rows; the XOR operand is (L / (128/S)) % (S/16).
int ptx_swizzled_offset(int byte, int s) {
  if (s == 0) return byte;
  const int line = byte / 128;                    // 128-byte line index
  const int chunk = (byte % 128) / 16;            // 16-byte chunk within the line
  const int mask = s / 16 - 1;                    // chunks that take part in the permutation
  const int row = line % 8;                       // the pattern spans 8 lines
  const int swizzled = (chunk & ~mask) | ((chunk ^ row) & mask);
  return line * 128 + swizzled * 16 + byte % 16;
}

template <class Tile, int E>
void check_layout_against_ptx() {
  using L = tp::tile_layout<Tile, E>;
  for (int r = 0; r < L::rows; ++r)
    for (int c = 0; c < L::cols; ++c) {
      const int plain = (c / L::panel) * L::panel_bytes + r * L::row_bytes + (c % L::panel) * E;
      ASSERT_EQ(L::offset(r, c), ptx_swizzled_offset(plain, L::swizzle)) << "r=" << r << " c=" << c;
    }
}

}  // namespace

TEST(Layout, SwizzleMatchesPtxDefinition) {
  check_layout_against_ptx<tp::tile<tp::block<64, 64>, tp::swizzle<128>>, 2>();
  check_layout_against_ptx<tp::tile<tp::block<64, 128>, tp::swizzle<128>>, 2>();
  check_layout_against_ptx<tp::tile<tp::block<32, 32>, tp::swizzle<64>>, 2>();
  check_layout_against_ptx<tp::tile<tp::block<16, 64>, tp::swizzle<32>>, 2>();
  check_layout_against_ptx<tp::tile<tp::block<16, 32>, tp::swizzle<128>>, 4>();
  check_layout_against_ptx<tp::tile<tp::block<24, 40>>, 2>();
}

TEST(Layout, OffsetsArePermutation) {
  using L = tp::tile_layout<tp::tile<tp::block<64, 128>, tp::swizzle<64>>, 2>;
  std::vector<int> seen(L::bytes / 2, 0);
  for (int r = 0; r < L::rows; ++r)
    for (int c = 0; c < L::cols; ++c) ++seen[L::offset(r, c) / 2];
  for (int v : seen) ASSERT_EQ(v, 1);
}

TEST(Layout, TmaPlanSplitsPanelsAndRows) {
  using P = tp::tma_plan<tp::tile<tp::block<128, 256>, tp::swizzle<128>>, 2>;
  static_assert(P::boxes == 4 && P::box(0) == 64 && P::box(1) == 128);
  static_assert(P::box_col(3) == 192 && P::box_smem(3) == 3 * 128 * 128);
  using Q = tp::tma_plan<tp::tile<tp::block<512, 64>>, 4>;
  static_assert(Q::boxes == 2 && Q::box(1) == 256 && Q::box_row(1) == 256 && Q::box_smem(1) == 256 * 256);
  using R = tp::tma_plan<tp::tile<tp::block<tp::squeezed, 8, 64>, tp::swizzle<128>>, 2>;
  static_assert(R::boxes == 1 && R::box(0) == 64 && R::box(1) == 8 && R::box(2) == 1);
  SUCCEED();
}

// The tile's L2 promotion reaches the tensor map (default 256 bytes: what every TMA load had
// before the option).
TEST(Layout, L2PromotionIsTheTilesChoice) {
  std::vector<float> data(64 * 64);
  const auto view = tp::tensor_view<float, 2>::wrap(data.data(), {64, 64}, false);
  using plain = tp::tile<tp::block<32, 32>>;
  using promoted_128 = tp::tile<tp::block<32, 32>, tp::l2_promotion<128>, tp::swizzle<128>>;
  using unpromoted = tp::tile<tp::block<32, 32>, tp::l2_promotion<0>>;
  EXPECT_EQ(tp::host::make_tensor_map<plain>(view, false, "plain").l2_promotion, 256);
  EXPECT_EQ(tp::host::make_tensor_map<promoted_128>(view, false, "promoted").l2_promotion, 128);
  EXPECT_EQ(tp::host::make_tensor_map<unpromoted>(view, false, "unpromoted").l2_promotion, 0);
  static_assert(promoted_128::swizzle_bytes == 128, "the other transforms still apply");
}
