// Row softmax of a bf16 tensor with two pipelines per row block: online statistics (running
// max and sum over the column blocks), then the outputs. Any column count works: rows are
// stored with a stride padded to 16 bytes, as TMA requires, and the kernel sees a
// rows x cols tensor_view of them (the padding is never written). Runs on the GPU when there is one, else in the CPU
// interpreter; checks itself against a float64 reference and prints what it ran on and
// the bandwidth (bytes of x read once and y written once, per second).
//   softmax [--rows R] [--cols C]
#include "../common/example_util.hpp"
#include "softmax_kernel.cuh"

int main(int argc, char** argv) {
  using T = tp::bf16;
  using kernel = softmax_kernel<1, 128, 4, 2>;
  const auto dev = tp::device::open();
  const bool gpu = dev.is_gpu();
  const long long rows = example::flag(argc, argv, "--rows", gpu ? 32768 : 200);
  const long long cols = example::flag(argc, argv, "--cols", gpu ? 4096 : 1000);
  // TMA needs row strides of a multiple of 16 bytes: pad each row to 8 bf16 elements.
  const long long stride = (cols + 7) / 8 * 8;
  try {
    const auto values = example::random_values<T>(rows * cols);
    std::vector<T> hx(rows * stride, tp::from_float<T>(0.0f));
    for (long long r = 0; r < rows; ++r)
      for (long long c = 0; c < cols; ++c) hx[r * stride + c] = values[r * cols + c];
    auto x_rows = tp::tensor<T, 2>::from_host(dev, {rows, stride}, hx);
    tp::tensor<T, 2> y_rows(dev, {rows, stride});
    y_rows.poison();
    auto x = tp::tensor_view<T, 2>::wrap(x_rows.data(), {rows, cols}, gpu);
    auto y = x;
    x.stride = y.stride = {stride, 1};
    y.data = y_rows.data();

    const auto kern = kernel::make(rows, cols);
    const auto launch = tp::kernel(kern, kern.config());
    launch(dev, x, y);
    const auto hy = y_rows.to_host();

    example::rel_error err;
    for (long long r = 0; r < rows; ++r) {
      const T* xr = &hx[r * stride];
      double m = -INFINITY, l = 0;
      for (long long c = 0; c < cols; ++c) m = std::max(m, double(tp::to_float(xr[c])));
      for (long long c = 0; c < cols; ++c) l += std::exp(double(tp::to_float(xr[c])) - m);
      for (long long c = 0; c < cols; ++c)
        err.add(tp::to_float(hy[r * stride + c]), std::exp(double(tp::to_float(xr[c])) - m) / l);
    }

    const auto t = tp::time_runs(dev, [&] { launch(dev, x, y); }, gpu ? 3 : 0, gpu ? 20 : 1);
    const double bytes = 2.0 * rows * cols * sizeof(T);
    std::printf("softmax, bf16 %lld x %lld on %s: %.3f ms, %.3f TB/s\n", rows, cols, dev.name().c_str(), t.median_ms,
                bytes / (t.median_ms * 1e-3) / 1e12);
    return example::report("y", err.value(), 1e-2);
  } catch (const tp::error& e) {
    std::printf("%s\n", e.what());
    return 2;
  }
}
