// Runtime errors: bad tensors, bad launches and budgets are reported with a message that
// names the problem (static errors are covered by tests/compile_fail).
#include "test_util.hpp"

#include <string>

namespace {

using t8x32 = tp::tile<tp::block<8, 32>>;

struct copy_kernel {
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, t8x32> x, tp::gmem<float, 2, t8x32> y) const {
    auto body = [](auto, auto xs, auto ys) { tp::map([](float v) { return v; }, ys, xs); };
    auto s = tp::spec<t8x32>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline(body, tp::grid(static_cast<int>(x.shape[0] / 8)), tp::in_specs(s), tp::out_specs(s),
                      tp::max_concurrent_steps<4>)(k, x, y);
  }
};

/// Expects `f` to throw tilepipe::error whose message contains every fragment.
template <class F>
void expect_error(F&& f, std::initializer_list<const char*> fragments) {
  try {
    f();
  } catch (const tp::error& e) {
    const std::string msg = e.what();
    for (const char* frag : fragments) EXPECT_NE(msg.find(frag), std::string::npos) << "message: " << msg;
    return;
  }
  ADD_FAILURE() << "no tilepipe::error thrown";
}

}  // namespace

TEST(Errors, MisalignedTensor) {
  tp::tensor<float, 2> x(test::dev(), {64, 33}), y(test::dev(), {64, 32});
  auto v = tp::tensor_view<float, 2>::wrap(x.data() + 1, {64, 32}, test::on_gpu());
  v.stride[0] = 33;
  expect_error([&] { tp::kernel(copy_kernel{}, {})(test::dev(), v, y); }, {"not 16-byte aligned"});
}

TEST(Errors, NonContiguousInnerDimension) {
  tp::tensor<float, 2> x(test::dev(), {64, 64}), y(test::dev(), {64, 32});
  auto v = tp::tensor_view<float, 2>::wrap(x.data(), {64, 32}, test::on_gpu());
  v.stride[1] = 2;
  expect_error([&] { tp::kernel(copy_kernel{}, {})(test::dev(), v, y); }, {"innermost dimension must be contiguous", "stride is 2"});
}

TEST(Errors, RowStrideNotMultipleOf16Bytes) {
  tp::tensor<float, 2> x(test::dev(), {64, 30}), y(test::dev(), {64, 32});
  expect_error([&] { tp::kernel(copy_kernel{}, {})(test::dev(), x, y); }, {"stride of dimension 0 is 120 bytes", "multiples of 16"});
}

TEST(Errors, EmptyTensorAndEmptyGrid) {
  tp::tensor<float, 2> x(test::dev(), {0, 32}), y(test::dev(), {64, 32}), z(test::dev(), {64, 32});
  expect_error([&] { tp::kernel(copy_kernel{}, {})(test::dev(), x, y); }, {"dimension 0 has extent 0", "empty tensor"});
  expect_error([&] { tp::kernel(copy_kernel{}, {.grid = {4, 0}})(test::dev(), z, y); }, {"empty grid", "axis 1"});
  expect_error([&] { tp::kernel(copy_kernel{}, {.grid = {1, 1, 1, 1}})(test::dev(), z, y); }, {"4 axes", "1 to 3"});
}

TEST(Errors, ClusterShape) {
  tp::tensor<float, 2> z(test::dev(), {64, 32}), y(test::dev(), {64, 32});
  expect_error([&] { tp::kernel(copy_kernel{}, {.grid = {6}, .cluster = 3})(test::dev(), z, y); },
               {"cluster = 3", "1, 2, 4 or 8 CTAs"});
  expect_error([&] { tp::kernel(copy_kernel{}, {.grid = {3}, .cluster = 2})(test::dev(), z, y); },
               {"axis 0 has 3 CTAs", "multiple of the cluster size 2"});
}

TEST(Errors, SharedMemoryOverBudget) {
  // 4 slots of 1 KiB in and out plus barriers do not fit in 6 KiB.
  tp::tensor<float, 2> x(test::dev(), {64, 32}), y(test::dev(), {64, 32});
  if (test::on_gpu()) GTEST_SKIP() << "on the GPU an over-budget allocation traps; the interpreter reports it";
  expect_error([&] { tp::kernel(copy_kernel{}, {.smem_bytes = 6 * 1024})(test::dev(), x, y); },
               {"shared memory over budget", "needs 4096 bytes", "6144 bytes"});
  expect_error([&] { tp::kernel(copy_kernel{}, {.smem_bytes = 300 * 1024})(test::dev(), x, y); }, {"307200 bytes", "sm_90 allows"});
}

namespace {

struct named_axis_kernel {
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2> x) const {
    (void)x;
    (void)k.axis_index("rows");
  }
};

using t16x32 = tp::tile<tp::block<16, 32>>;

struct slice_kernel {
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 2, t16x32> x, tp::gmem<float, 2, t16x32> y) const {
    // A 24-row slice of a 64-row tensor, moved in 16-row blocks: the second block crosses the
    // slice's end while staying inside the tensor.
    auto xs = x.at(tp::ds{0, 24}, tp::ds{0, 32});
    auto body = [](auto, auto a, auto b) { tp::map([](float v) { return v; }, b, a); };
    auto s = tp::spec<t16x32>([](auto i) { return tp::idx(i, 0); });
    tp::emit_pipeline(body, tp::grid(2), tp::in_specs(s), tp::out_specs(s))(k, xs, y);
  }
};

}  // namespace

TEST(Errors, UnknownAxisNameAndSliceOverhang) {
  if (test::on_gpu()) GTEST_SKIP() << "device-side checks trap on the GPU; the interpreter reports them";
  tp::tensor<float, 2> x(test::dev(), {64, 32}), y(test::dev(), {64, 32});
  expect_error([&] { tp::kernel(named_axis_kernel{}, {.grid = {2}, .grid_names = {"cols"}})(test::dev(), x); },
               {"no grid axis is named 'rows'"});
  expect_error([&] { tp::kernel(slice_kernel{}, {})(test::dev(), x, y); }, {"crosses the end (24) of a gmem slice"});
  expect_error([&] { tp::kernel(named_axis_kernel{}, {.grid = {2}, .grid_names = {"a", "b"}})(test::dev(), x); },
               {"2 grid names for a grid of 1 axes"});
}

TEST(Errors, ProfilerWithoutTheProfileBuild) {
  // This file is built without TILEPIPE_PROFILE: its kernels record nothing, so binding a
  // profiler to a launch is a mistake to report, not an empty trace.
  tp::tensor<float, 2> x(test::dev(), {64, 32}), y(test::dev(), {64, 32});
  tp::profiler prof(test::dev());
  expect_error([&] { tp::kernel(copy_kernel{}, {.profile = &prof})(test::dev(), x, y); },
               {"launch option profile", "built without TILEPIPE_PROFILE"});
}

// A dimension of extent 1 is never stepped, so frameworks give it any stride (PyTorch's
// DLPack export writes 1 for a decode query [B, 1, H, D]); tensor maps and the kernels'
// checks accept it and use the contiguous stride in its place.
using t1x8x32 = tp::tile<tp::block<tp::squeezed, 8, 32>>;
struct copy3_kernel {
  TP_HD void operator()(tp::kernel_context& k, tp::gmem<float, 3, t1x8x32> x, tp::gmem<float, 3, t1x8x32> y) const {
    auto body = [](auto, auto xs, auto ys) { tp::map([](float v) { return v + 1.0f; }, ys, xs); };
    auto s = tp::spec<t1x8x32>([](auto i) { return tp::idx(0, i, 0); });
    tp::emit_pipeline(body, tp::grid(static_cast<int>(x.shape[1] / 8)), tp::in_specs(s), tp::out_specs(s),
                      tp::max_concurrent_steps<2>)(k, x, y);
  }
};

TEST(Errors, ExtentOneDimensionsTakeAnyStride) {
  const auto hx = test::random_values<float>(16 * 32);
  auto x = tp::tensor<float, 3>::from_host(test::dev(), {1, 16, 32}, hx);
  tp::tensor<float, 3> y(test::dev(), {1, 16, 32});
  y.poison();
  auto xv = x.view();
  xv.stride[0] = 1;  // as a framework may say it
  tp::host::require_tma_rows(xv, "test", "x");
  tp::kernel(copy3_kernel{}, {})(test::dev(), xv, y);
  const auto hy = y.to_host();
  for (std::size_t i = 0; i < hy.size(); ++i) ASSERT_EQ(hy[i], hx[i] + 1.0f) << i;
  // A stride of 1 in a dimension of extent 2 is still wrong.
  auto bad = tp::tensor_view<float, 3>::wrap(x.data(), {1, 2, 32}, test::on_gpu());
  bad.stride[1] = 1;
  expect_error([&] { tp::host::require_tma_rows(bad, "test", "x"); }, {"x's stride 1 in dimension 1"});
}
