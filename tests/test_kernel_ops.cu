// The ops the attention kernel brought into the library, on their own: warpgroups taking
// turns (tp::turn_order, on bar.sync / bar.arrive) in the order 0, 1, ..., N - 1, 0, ...;
// the interpreter reporting a forgotten start() instead of hanging; and fragments and row
// vectors stored straight to global memory, clipped to the view and writing nothing else
// (16-bit ones in pairs where they can).
#include "test_util.hpp"

namespace {

using counter_tile = tp::tile<tp::block<8, 4>>;

/// Each of N warpgroups takes `turns` turns; in its turn it appends its place to `log`
/// (the position comes from a counter in SMEM that only the warpgroup in its turn touches).
template <int N, bool Start = true>
struct turn_kernel {
  static constexpr int num_threads = N;
  int turns;
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 1> log, tp::smem<float, counter_tile> counter) const {
    const tp::turn_order<N> order{k.thread_index()};
    float* c = counter.ptr(0, 0);
    if (k.cta_leader()) *c = 0.0f;
    k.sync_threads();
    if constexpr (Start) order.start();
    for (int t = 0; t < turns; ++t)
      order.take([&] {
        const int pos = static_cast<int>(*c);
        tp::prim::warpgroup_sync();  // every thread has read the counter
        if (tp::prim::leader()) {
          log.data[pos] = static_cast<float>(order.place);
          *c = static_cast<float>(pos + 1);
        }
        tp::prim::warpgroup_sync();  // the leader's writes precede the warpgroup's arrival
      });
    order.finish();
  }
};

template <int N>
void check_turns(int turns) {
  auto log = tp::tensor<float, 1>::from_host(test::dev(), {N * turns}, std::vector<float>(N * turns, -1.0f));
  tp::kernel(turn_kernel<N>{turns}, {})(test::dev(), log);
  const auto h = log.to_host();
  for (int i = 0; i < N * turns; ++i) ASSERT_EQ(h[i], static_cast<float>(i % N)) << "turn " << i << " of " << N;
}

/// out[r, head, c] = 100 r + c for the view's rows, lse[r] = r + 0.5: a 64 x 32 fragment
/// stored into a view of `rows` rows of one head.
struct store_kernel {
  int rows, head;
  TP_HD void operator()(tp::kernel_context&, tp::gmem<float, 3> out, tp::gmem<float, 1> lse) const {
    const auto f = tp::map(tp::zeros<float, 64, 32>(), [](float, int r, int c) { return 100.0f * r + c; });
    tp::store(tp::plane<0, 2>(out.at(tp::ds{0, rows}, tp::ds{head, 1}, tp::ds{0, 32})), f);
    const auto rv = tp::map(tp::full<tp::row_vector<64>>(0.0f), [](float, int r) { return r + 0.5f; });
    tp::store(lse.at(tp::ds{0, rows}), rv);
  }
};

/// A 64 x 32 fragment of small integers (exact in 16 bits) stored as bf16 into the window of
/// `out` at (r0, c0) with `rows` x `cols` elements and column stride `cstride`: contiguous rows
/// go out two columns per store where the alignment allows, any other window one by one.
struct store_bf16_kernel {
  int r0, c0, rows, cols, cstride;
  TP_HD static float value(int r, int c) { return static_cast<float>((3 * r + c) % 61 - 30); }
  TP_HD void operator()(tp::kernel_context&, tp::gmem<tp::bf16, 2> out) const {
    const auto f = tp::map(tp::zeros<float, 64, 32>(), [](float, int r, int c) { return value(r, c); });
    tp::gmem_ref<tp::bf16, 2> dst;
    dst.data = out.data + r0 * out.stride[0] + c0;
    dst.shape[0] = rows, dst.shape[1] = cols;
    dst.stride[0] = out.stride[0], dst.stride[1] = cstride;
    tp::store(dst, f);
  }
};

}  // namespace

TEST(TurnOrder, WarpgroupsTakeTurnsInOrder) {
  check_turns<2>(5);
  check_turns<3>(4);
}

TEST(TurnOrder, AForgottenStartIsADeadlockReport) {
  if (test::on_gpu()) GTEST_SKIP() << "it would hang the GPU";
  auto log = tp::tensor<float, 1>::from_host(test::dev(), {4}, std::vector<float>(4, -1.0f));
  const std::string e = test::error_of([&] { tp::kernel(turn_kernel<2, false>{2}, {})(test::dev(), log); });
  EXPECT_NE(e.find("named barrier"), std::string::npos) << e;
}

TEST(GmemStores, SixteenBitFragmentsInPairsAndOneByOne) {
  constexpr int R = 70, C = 72;
  struct window {
    int r0, c0, rows, cols, cstride;
  };
  // contiguous and aligned (pairs), an odd last column, an odd first column (unaligned:
  // one by one), a column stride of 2, rows and columns clipped by the view
  for (const window w : {window{0, 0, 64, 32, 1}, window{3, 2, 50, 31, 1}, window{5, 7, 64, 32, 1},
                         window{1, 4, 64, 20, 2}, window{0, 40, 9, 5, 1}}) {
    auto out = tp::tensor<tp::bf16, 2>::from_host(test::dev(), {R, C}, std::vector<tp::bf16>(R * C, tp::bf16(NAN)));
    tp::kernel(store_bf16_kernel{w.r0, w.c0, w.rows, w.cols, w.cstride}, {})(test::dev(), out);
    const auto h = out.to_host();
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) {
        const float x = tp::to_float(h[r * C + c]);
        const int fr = r - w.r0, fc = (c - w.c0) / w.cstride;
        const bool inside = fr >= 0 && fr < w.rows && c >= w.c0 && (c - w.c0) % w.cstride == 0 && fc < w.cols;
        if (inside) ASSERT_EQ(x, store_bf16_kernel::value(fr, fc)) << "window at column " << w.c0 << " at " << r << ", " << c;
        else ASSERT_TRUE(std::isnan(x)) << "written outside the window at column " << w.c0 << ": " << r << ", " << c;
      }
  }
}

TEST(GmemStores, FragmentsAndRowVectorsAreClippedToTheView) {
  const int heads = 3, rows = 50, head = 1;
  auto out = tp::tensor<float, 3>::from_host(test::dev(), {64, heads, 32}, std::vector<float>(64 * heads * 32, NAN));
  auto lse = tp::tensor<float, 1>::from_host(test::dev(), {64}, std::vector<float>(64, NAN));
  tp::kernel(store_kernel{rows, head}, {})(test::dev(), out, lse);
  const auto h = out.to_host(), l = lse.to_host();
  for (int r = 0; r < 64; ++r) {
    for (int hh = 0; hh < heads; ++hh)
      for (int c = 0; c < 32; ++c) {
        const float x = h[(r * heads + hh) * 32 + c];
        if (r < rows && hh == head) ASSERT_EQ(x, 100.0f * r + c) << r << " " << c;
        else ASSERT_TRUE(std::isnan(x)) << "written outside the view at row " << r << ", head " << hh;
      }
    if (r < rows) ASSERT_EQ(l[r], r + 0.5f);
    else ASSERT_TRUE(std::isnan(l[r])) << "row vector written past the view at " << r;
  }
}
