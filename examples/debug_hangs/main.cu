// Kernels that hang on purpose, for the GPU debug mode (CMake -DTILEPIPE_DEBUG_HANGS=ON):
// every barrier wait gives up after about a second, prints which CTA, warpgroup, barrier
// and parity it was waiting for, and traps; the launch then names the kernel. Built only
// with that option. Without a GPU it runs in the interpreter, which reports the same bugs
// as deadlocks with who could still have arrived.
//   debug_hangs --bug none|expect_tx|phase|arrive
// Exit status 0 means "as expected": the correct kernel ran and checked its result, or the
// planted hang was reported instead of hanging. scripts/gpu-debug-hangs runs all four.
#include "../common/example_util.hpp"
#include "producer_consumer_kernel.cuh"

template <pc_bug Bug>
int run(const tp::device& dev) {
  const int blocks = 6;
  const auto hx = example::random_values<float>(32 * blocks * 64);
  auto x = tp::tensor<float, 2>::from_host(dev, {32LL * blocks, 64}, hx);
  const producer_consumer_kernel<Bug> k{blocks};
  std::printf("debug_hangs: planted bug '%s' on %s\n", pc_bug_name(Bug), dev.name().c_str());
  std::fflush(stdout);
  try {
    auto y = tp::kernel(k, k.config(), tp::out_type<float>(32LL * blocks, 64))(dev, x);
    const auto hy = y.to_host();
    example::rel_error err;
    for (std::size_t i = 0; i < hx.size(); ++i) err.add(hy[i], 2.0 * tp::to_float(hx[i]) + 1.0);
    if (Bug == pc_bug::none) return example::report("y", err.value(), 1e-6);
    std::printf("debug_hangs: UNEXPECTED: the kernel with bug '%s' finished instead of hanging\n", pc_bug_name(Bug));
    return 1;
  } catch (const tp::error& e) {
    std::printf("%s\n", e.what());
    if (Bug == pc_bug::none) return 1;
    std::printf("debug_hangs: the hang was reported (expected)\n");
    return 0;
  }
}

int main(int argc, char** argv) {
  const auto dev = tp::device::open();
  const std::string bug = example::flag_str(argc, argv, "--bug", "none");
#if !defined(TILEPIPE_DEBUG_HANGS)
  if (dev.is_gpu() && bug != "none") {
    std::printf("debug_hangs: build with -DTILEPIPE_DEBUG_HANGS=ON, or these kernels hang the GPU\n");
    return 2;
  }
#endif
  if (bug == "none") return run<pc_bug::none>(dev);
  if (bug == "expect_tx") return run<pc_bug::expect_tx_too_large>(dev);
  if (bug == "phase") return run<pc_bug::wrong_phase_producer>(dev);
  if (bug == "arrive") return run<pc_bug::skipped_arrive>(dev);
  std::printf("debug_hangs: --bug none|expect_tx|phase|arrive\n");
  return 2;
}
