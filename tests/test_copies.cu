// Copies between refs: sync_copy GMEM -> SMEM, SMEM -> GMEM and GMEM -> GMEM, and the TMA
// copies of whole views (copy_gmem_to_smem / copy_smem_to_gmem of a .at(...) slice), on
// slices at offsets that are not block multiples (TMA's at 16-byte column boundaries;
// one that is not is reported), smaller than a block at the tensor's edge, and column
// slices of SMEM views; every element of the outputs is checked (untouched ones stay the
// launch's NaN poison). tp::dequantize: an e4m3 block in SMEM into bf16 / f16 blocks of the
// wgmma operand layout, every code (NaN, subnormals, +-448) against an independent decoding,
// and the zeroed rows: the same bits on both backends.
#include "test_util.hpp"

#include <cstring>

namespace {

using tile = tp::tile<tp::block<16, 32>>;  // f32
using nan_tile = tp::tile<tp::block<16, 32>, tp::oob_fill<tp::oob::nan>>;
constexpr long long rows = 40, cols = 72;

struct copies_kernel {
  TP_HD void operator()(tp::kernel_context&, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> y,
                        tp::gmem<float, 2, tile, nan_tile> z, tp::smem<float, tile> a, tp::smem<float, tile> b,
                        tp::smem<float, nan_tile> c, tp::barriers<1> bar) const {
    using tp::ds;
    // TMA load of a block-sized slice at an offset that is not a multiple of the block
    // (columns at a 16-byte boundary, as TMA needs); sync_copy of it to y.
    tp::copy_gmem_to_smem(x.at(ds{5, 16}, ds{4, 32}), a, bar[0]);
    tp::barrier_wait(bar[0], 0);
    tp::sync_copy(a, y.at(ds{20, 16}, ds{30, 32}));
    // TMA store of the same block to a slice at the tensor's corner, smaller than the block.
    tp::commit_smem();
    tp::copy_smem_to_gmem(a, y.at(ds{32, 8}, ds{64, 8}));
    tp::wait_smem_to_gmem<0>();
    // sync_copy of an edge slice (8 x 12) into SMEM: the rest of the block is the fill.
    tp::sync_copy(x.at(ds{32, 8}, ds{60, 12}), b);
    tp::sync_copy(x.at(ds{32, 8}, ds{60, 12}), c);
    // sync_copy of a column slice of an SMEM view to GMEM, smaller GMEM view: clipped.
    tp::sync_copy(tp::cols<8>(b, 8), z.at(ds{0, 10}, ds{40, 8}));
    // The whole filled blocks, by TMA, into z.
    tp::commit_smem();
    tp::copy_smem_to_gmem(b, z.at(ds{16, 16}, ds{0, 32}));
    tp::copy_smem_to_gmem(c, z.at(ds{16, 16}, ds{32, 32}));
    tp::wait_smem_to_gmem<0>();
    // GMEM -> GMEM.
    tp::sync_copy(x.at(ds{0, 4}, ds{0, 72}), z.at(ds{36, 4}, ds{0, 72}));
  }
};

std::uint32_t bits(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

}  // namespace

TEST(Copies, SyncAndAsyncCopiesOfSlices) {
  const auto hx = test::random_values<float>(rows * cols);
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {rows, cols}, hx);
  const auto [y, z] =
      tp::kernel(copies_kernel{}, {}, tp::out_type<float>(rows, cols), tp::out_type<float>(rows, cols))(test::dev(), x);
  const auto hy = y.to_host(), hz = z.to_host();
  const std::uint32_t poison = 0xffffffffu, zero = 0, nan = 0x7ff77ff7u;  // TMA's NaN fill (read back on an H100)
  std::vector<std::uint32_t> ey(rows * cols, poison), ez(rows * cols, poison);
  auto xb = [&](long long r, long long c) { return bits(hx[r * cols + c]); };
  // a = x[5:21, 4:36]
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 32; ++j) {
      ey[(20 + i) * cols + 30 + j] = xb(5 + i, 4 + j);
      if (i < 8 && j < 8) ey[(32 + i) * cols + 64 + j] = xb(5 + i, 4 + j);
    }
  // b = x[32:40, 60:72] padded with zeros (c with NaN) to 16 x 32
  auto b_at = [&](int i, int j, std::uint32_t fill) { return i < 8 && j < 12 ? xb(32 + i, 60 + j) : fill; };
  for (int i = 0; i < 10; ++i)
    for (int j = 0; j < 8; ++j) ez[i * cols + 40 + j] = b_at(i, 8 + j, zero);
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 32; ++j) {
      ez[(16 + i) * cols + j] = b_at(i, j, zero);
      ez[(16 + i) * cols + 32 + j] = b_at(i, j, nan);
    }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 72; ++j) ez[(36 + i) * cols + j] = xb(i, j);
  long long wrong_y = 0, wrong_z = 0;
  for (long long e = 0; e < rows * cols; ++e) wrong_y += bits(hy[e]) != ey[e], wrong_z += bits(hz[e]) != ez[e];
  EXPECT_EQ(wrong_y, 0);
  EXPECT_EQ(wrong_z, 0);
}

namespace {
struct mismatched_copy_kernel {
  TP_HD void operator()(tp::kernel_context&, tp::gmem<float, 2, tile> x, tp::gmem<float, 2, tile> y) const {
    tp::sync_copy(x.at(tp::ds{0, 4}, tp::ds{0, 8}), y.at(tp::ds{0, 4}, tp::ds{0, 12}));
  }
};
struct unaligned_view_kernel {  // column 7 of f32: 28 bytes into the row
  TP_HD void operator()(tp::kernel_context&, tp::gmem<float, 2, tile> x, tp::smem<float, tile> a, tp::barriers<1> bar) const {
    tp::copy_gmem_to_smem(x.at(tp::ds{5, 16}, tp::ds{7, 32}), a, bar[0]);
    tp::barrier_wait(bar[0], 0);
  }
};
struct oversized_view_kernel {
  TP_HD void operator()(tp::kernel_context&, tp::gmem<float, 2, tile> x, tp::smem<float, tile> a, tp::barriers<1> bar) const {
    tp::copy_gmem_to_smem(x.at(tp::ds{0, 20}, tp::ds{0, 32}), a, bar[0]);  // 20 rows, the block has 16
    tp::barrier_wait(bar[0], 0);
  }
};
}  // namespace

TEST(Copies, MisfitViewsAreReported) {
  if (test::on_gpu()) GTEST_SKIP() << "device-side checks trap on the GPU";
  auto x = tp::tensor<float, 2>::from_host(test::dev(), {rows, cols}, test::random_values<float>(rows * cols));
  std::string e = test::error_of([&] { tp::kernel(mismatched_copy_kernel{}, {}, tp::out_type<float>(rows, cols))(test::dev(), x); });
  EXPECT_NE(e.find("sync_copy: dimension 1 has extent 8 in the source, 12 in the destination"), std::string::npos) << e;
  e = test::error_of([&] { tp::kernel(unaligned_view_kernel{}, {})(test::dev(), x); });
  EXPECT_NE(e.find("copy_gmem_to_smem of a whole gmem view: it starts at column 7 of its tensor, 28 bytes into a row"),
            std::string::npos)
      << e;
  e = test::error_of([&] { tp::kernel(oversized_view_kernel{}, {})(test::dev(), x); });
  EXPECT_NE(e.find("copy_gmem_to_smem of a whole gmem view: dimension 0 has extent 20, more than the block's 16"),
            std::string::npos)
      << e;
}

namespace {

using fp8_tile = tp::tile<tp::block<32, 64>>;                    // unswizzled e4m3 (a KV slot)
using wide_tile = tp::tile<tp::block<32, 64>, tp::swizzle<128>>;  // a wgmma operand

template <class T>
struct dequantize_kernel {
  int zero_from = 32;
  TP_HD void operator()(tp::kernel_context&, tp::gmem<tp::fp8_e4m3, 2, fp8_tile> x, tp::gmem<T, 2, wide_tile> y,
                        tp::smem<tp::fp8_e4m3, fp8_tile> a, tp::smem<T, wide_tile> b, tp::barriers<1> bar) const {
    tp::copy_gmem_to_smem(x, a, bar[0]);
    tp::barrier_wait(bar[0], 0);
    tp::dequantize(a, b, zero_from);
    tp::commit_smem();
    tp::copy_smem_to_gmem(b, y);
    tp::wait_smem_to_gmem<0>();
  }
};

/// The bits of e4m3 code c as T, decoded from its fields: sign, 4 exponent bits (bias 7),
/// 3 mantissa bits, subnormals at exponent 0, NaN at 0x7f / 0xff (T's canonical NaN).
template <class T>
std::uint16_t e4m3_bits_as(unsigned c) {
  if ((c & 0x7f) == 0x7f) return 0x7fff;
  const int e = (c >> 3) & 15, m = c & 7;
  const double magnitude = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  const T t = tp::from_float<T>(static_cast<float>(c & 0x80 ? -magnitude : magnitude));
  std::uint16_t b;
  std::memcpy(&b, &t, 2);
  return b;
}

template <class T>
void check_dequantize(int zero_from) {
  SCOPED_TRACE(::testing::Message() << tp::dtype_traits<T>::name << ", rows from " << zero_from << " zeroed");
  std::vector<unsigned> codes(32 * 64);
  for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<unsigned>(i % 256);  // every code 8 times
  std::shuffle(codes.begin(), codes.end(), std::mt19937(static_cast<unsigned>(test::fresh_seed())));
  std::vector<tp::fp8_e4m3> hx(codes.size());
  for (std::size_t i = 0; i < codes.size(); ++i) hx[i].__x = static_cast<unsigned char>(codes[i]);
  auto x = tp::tensor<tp::fp8_e4m3, 2>::from_host(test::dev(), {32, 64}, hx);
  const auto y = tp::kernel(dequantize_kernel<T>{zero_from}, {}, tp::out_type<T>(32, 64))(test::dev(), x);
  const auto hy = y.to_host();
  int bad = 0;
  for (int i = 0; i < 32 * 64; ++i) {
    std::uint16_t got;
    std::memcpy(&got, &hy[i], 2);
    const std::uint16_t want = i / 64 < zero_from ? e4m3_bits_as<T>(codes[i]) : 0;
    if (got != want && bad++ < 5)
      ADD_FAILURE() << "element " << i << " (code 0x" << std::hex << codes[i] << "): 0x" << got << ", want 0x" << want;
  }
}

}  // namespace

TEST(Copies, DequantizeEveryE4m3CodeExactly) {
  for (int zero_from : {32, 13, 0}) {
    check_dequantize<tp::bf16>(zero_from);
    check_dequantize<tp::f16>(zero_from);
  }
}
