// Several simulated devices in one process (tp::device_group::simulated): the device axis,
// symmetric buffers reached with tp::remote, semaphores between devices, the cross-device
// race detector on planted bugs, and the collective matmuls (kernels/collective_matmul.cuh)
// on 2, 3 and 4 devices with uneven shards against a float64 reference.
#include "planted.hpp"

#include <tilepipe/kernels/collective_matmul.cuh>

namespace {

using tp::bf16;
using tp::ds;
using tp::idx;

using block_tile = tp::tile<tp::block<64, 64>, tp::swizzle<128>>;

enum class plant { none, no_wait, read_before_send, signal_before_store_done, wait_too_long };

/// Each device sends its x to its right neighbour's inbox by TMA and signals it; then it
/// waits for its own inbox and copies it to out. out also records the device axis.
template <plant Bug>
struct pass_right {
  TP_HD void operator()(tp::kernel_context& ctx, tp::gmem<bf16, 2, block_tile> x, tp::gmem<bf16, 2, block_tile> out,
                        tp::symmetric<bf16, 2, block_tile> inbox, tp::symmetric<tp::u32, 1> sems,
                        tp::smem<bf16, block_tile> buf, tp::barriers<2> bar) const {
    const int d = ctx.axis_index("device"), right = (d + 1) % ctx.axis_size("device");
    const bool reads_early = Bug == plant::read_before_send && d == 0;  // before anybody wrote its inbox
    if (reads_early) {
      tp::copy_gmem_to_smem(inbox.local, idx(0, 0), buf, bar[1]);
      tp::barrier_wait(bar[1], 0);
    }
    tp::copy_gmem_to_smem(x, idx(0, 0), buf, bar[0]);
    tp::barrier_wait(bar[0], 0);
    tp::copy_smem_to_gmem(buf, tp::remote(inbox, right), idx(0, 0));
    if constexpr (Bug == plant::signal_before_store_done) {
      tp::semaphore_signal(sems, 0, right);
      tp::wait_smem_to_gmem<0>();
    } else {
      tp::wait_smem_to_gmem<0>();
      tp::semaphore_signal(sems, 0, right);
    }
    if (reads_early) return;
    if constexpr (Bug != plant::no_wait) tp::semaphore_wait(sems, 0, Bug == plant::wait_too_long ? 2 : 1);
    tp::copy_gmem_to_smem(inbox.local, idx(0, 0), buf, bar[1]);
    tp::barrier_wait(bar[1], 0);
    tp::copy_smem_to_gmem(buf, out, idx(0, 0));
    tp::wait_smem_to_gmem<0>();
    if (tp::prim::leader()) {  // the device axis, in out's last row: index and count, by number and by name
      out.data[63 * 64 + 0] = tp::from_float<bf16>(static_cast<float>(ctx.device_index()));
      out.data[63 * 64 + 1] = tp::from_float<bf16>(static_cast<float>(ctx.device_count()));
    }
  }
};

/// Runs pass_right<Bug> on `devices` simulated devices; returns the error ("" if none) and
/// checks the results of a clean run.
template <plant Bug>
std::string run_pass_right(int devices) {
  auto group = tp::device_group::simulated(devices, test::interpreter());
  tp::symmetric_tensor<bf16, 2> inbox(group, {64, 64}, "inbox");
  tp::symmetric_tensor<tp::u32, 1> sems(group, {1}, "semaphores");
  std::vector<tp::tensor<bf16, 2>> x, out;
  std::vector<std::vector<bf16>> sent;
  for (const tp::device& dev : group.local()) {
    sent.push_back(test::random_values<bf16>(64 * 64));
    x.push_back(tp::tensor<bf16, 2>::from_host(dev, {64, 64}, sent.back()));
    out.emplace_back(dev, std::array<long long, 2>{64, 64});
  }
  try {
    for (const tp::device& dev : group.local())
      tp::kernel(pass_right<Bug>{}, {.smem_bytes = 32768})(dev, x[dev.index()], out[dev.index()], inbox, sems);
  } catch (const tp::error& e) {
    return e.what();
  }
  for (int d = 0; d < devices; ++d) {
    const auto got = out[d].to_host();
    const auto& want = sent[(d + devices - 1) % devices];
    for (int i = 0; i < 63 * 64; ++i) EXPECT_EQ(tp::to_float(got[i]), tp::to_float(want[i])) << "device " << d << " element " << i;
    EXPECT_EQ(tp::to_float(got[63 * 64]), d);
    EXPECT_EQ(tp::to_float(got[63 * 64 + 1]), devices);
  }
  return "";
}

TEST(SimulatedDevices, RemoteTmaAndSignals) {
  for (int devices : {2, 3, 4}) EXPECT_EQ(run_pass_right<plant::none>(devices), "") << devices << " devices";
}

TEST(SimulatedDevices, PlantedReadWithoutWaitIsARace) {
  const std::string e = run_pass_right<plant::no_wait>(3);
  EXPECT_NE(e.find("race [cross-device: missing signal wait]: device 1 CTA (0) reads data that device 0 CTA (0) wrote"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("buffer:  inbox on device 1"), std::string::npos) << e;
}

TEST(SimulatedDevices, PlantedRemoteWriteRacingALocalReadIsARace) {
  const std::string e = run_pass_right<plant::read_before_send>(3);
  EXPECT_NE(e.find("race [cross-device: remote write races a read]: device 2 CTA (0) writes data that device 0 CTA (0) "
                   "reads"),
            std::string::npos)
      << e;
}

TEST(SimulatedDevices, PlantedSignalBeforeDataIsARace) {
  const std::string e = run_pass_right<plant::signal_before_store_done>(2);
  EXPECT_NE(e.find("race [cross-device: signal before data]"), std::string::npos) << e;
}

TEST(SimulatedDevices, PlantedWaitForASignalNobodySendsIsADeadlock) {
  const std::string e = run_pass_right<plant::wait_too_long>(2);
  EXPECT_NE(e.find("deadlock"), std::string::npos) << e;
  EXPECT_NE(e.find("a semaphore (tp::semaphore_wait) for the count 2; it is at 1"), std::string::npos) << e;
  EXPECT_NE(e.find("device 1 CTA (0) warpgroup 0 waits on"), std::string::npos) << e;
}

// ---- the collective matmuls ------------------------------------------------------------

/// The interpreter's copy modes and CTA orders vary with the device count: 2 at the wait,
/// 3 shuffled (and the CTAs of each device in a random order), 4 eager.
tp::device prototype(int devices) {
  const test::copy_mode mode = devices == 2   ? test::copy_mode::at_wait
                               : devices == 3 ? test::copy_mode::shuffled
                                              : test::copy_mode::eager;
  tp::device d = test::interpreter(mode, test::fresh_seed());
  d.interpreter.shuffle_ctas = devices == 3;
  return d;
}

std::vector<double> to_double(const std::vector<bf16>& v) {
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) r[i] = tp::to_float(v[i]);
  return r;
}

/// a[M, K] . b[K, N] in float64, rows [r0, r1) of the product.
std::vector<double> matmul_rows(const std::vector<double>& a, const std::vector<double>& b, long long K, long long N,
                                long long r0, long long r1) {
  std::vector<double> c(static_cast<std::size_t>((r1 - r0) * N), 0.0);
  for (long long i = r0; i < r1; ++i)
    for (long long k = 0; k < K; ++k)
      for (long long j = 0; j < N; ++j) c[(i - r0) * N + j] += a[i * K + k] * b[k * N + j];
  return c;
}

/// A fresh random rows x cols input on dev; its values in `host`.
tp::tensor<bf16, 2> random_input(const tp::device& dev, long long rows, long long cols, std::vector<bf16>& host) {
  host = test::random_values<bf16>(static_cast<std::size_t>(rows * cols));
  return tp::tensor<bf16, 2>::from_host(dev, {rows, cols}, host);
}

/// A rows x cols output on dev, NaN until the kernel writes it.
tp::tensor<bf16, 2> poisoned_output(const tp::device& dev, long long rows, long long cols) {
  tp::tensor<bf16, 2> t(dev, {rows, cols});
  t.poison();
  return t;
}

long long total_rows(const std::vector<long long>& shards) {
  long long m = 0;
  for (long long r : shards) m += r;
  return m;
}

/// Runs `ag` (made for `shards`, K and N on `group`) `launches` times on fresh random inputs,
/// each launch into outputs poisoned anew, and checks every device's c against float64 (a
/// later launch waits for the counts of its own).
void check_all_gather(const tp::device_group& group, tp::all_gather_matmul<bf16>& ag, const std::vector<long long>& shards,
                      long long K, long long N, int launches) {
  const int D = static_cast<int>(shards.size());
  const long long M = total_rows(shards);
  std::vector<bf16> a_all, ad;  // the gathered A, for the reference
  std::vector<tp::tensor<bf16, 2>> a, b, c;
  std::vector<std::vector<bf16>> b_host(static_cast<std::size_t>(D));  // each device's column slice of a layer
  for (const tp::device& dev : group.local()) {
    a.push_back(random_input(dev, shards[dev.index()], K, ad));
    a_all.insert(a_all.end(), ad.begin(), ad.end());
    b.push_back(random_input(dev, K, N, b_host[dev.index()]));
  }
  std::vector<std::vector<double>> ref;
  for (int d = 0; d < D; ++d) ref.push_back(matmul_rows(to_double(a_all), to_double(b_host[static_cast<std::size_t>(d)]), K, N, 0, M));
  for (int launch = 0; launch < launches; ++launch) {
    c.clear();
    for (const tp::device& dev : group.local()) c.push_back(poisoned_output(dev, M, N));
    for (const tp::device& dev : group.local()) ag(dev, a[dev.index()], b[dev.index()], c[dev.index()]);
    for (int d = 0; d < D; ++d)
      EXPECT_LT(test::rel_error(c[d].to_host(), ref[d]), 1e-2) << D << " devices, device " << d << ", launch " << launch;
  }
}

TEST(CollectiveMatmul, AllGatherMatmulUnevenShards) {
  const long long K = 136, N = 320;  // a partial K step and a partial column of tiles
  for (const std::vector<long long>& shards : {std::vector<long long>{130, 64}, {17, 200, 96}, {64, 1, 150, 129}}) {
    const int D = static_cast<int>(shards.size());
    auto group = tp::device_group::simulated(D, prototype(D));
    tp::all_gather_matmul<bf16> ag(group, shards, K, N);
    check_all_gather(group, ag, shards, K, N, D == 2 ? 2 : 1);
  }
}

// The last wave split by stream-K (a split tile's partial sums handed between CTAs by flags
// while the devices wait for each other's row blocks; in the second case one tile's 3 steps
// over 3 CTAs: a start, a middle and an end), and refused on a device whose split would reach
// into an earlier step (device 1 of the last case: its last step has 2 tiles, the split 3);
// launched twice, so the flags must be clear again after a launch.
TEST(CollectiveMatmul, AllGatherMatmulStreamK) {
  const long long K = 136, N = 320;  // 3 k-steps, 2 columns of tiles
  struct split_case {
    std::vector<long long> shards;
    int ctas;
    std::vector<bool> splits;  // per device
  };
  for (const split_case& sc : {split_case{{130, 64}, 4, {true, true}}, split_case{{64, 64}, 3, {true, true}},
                               split_case{{17, 200, 96}, 3, {true, true, true}},
                               split_case{{64, 1, 150, 129}, 5, {true, true, true, true}},
                               split_case{{64, 300}, 5, {true, false}}}) {
    const int D = static_cast<int>(sc.shards.size());
    auto group = tp::device_group::simulated(D, prototype(D));
    tp::all_gather_matmul<bf16> ag(group, sc.shards, K, N, sc.ctas, /*stream_k_min_steps=*/0);
    for (int d = 0; d < D; ++d) EXPECT_EQ(ag.splits_last_wave(d), sc.splits[d]) << D << " devices, device " << d;
    check_all_gather(group, ag, sc.shards, K, N, 2);
  }
}

TEST(CollectiveMatmul, MatmulReduceScatterUnevenShards) {
  const long long K = 72, N = 264;  // each device's slice of K
  for (const std::vector<long long>& shards : {std::vector<long long>{100, 160}, {8, 130, 64}, {129, 40, 1, 70}}) {
    const int D = static_cast<int>(shards.size());
    auto group = tp::device_group::simulated(D, prototype(D));
    tp::matmul_reduce_scatter<bf16> rs(group, shards, K, N);
    const long long M = total_rows(shards);
    std::vector<std::vector<double>> a_host, b_host;
    std::vector<tp::tensor<bf16, 2>> a, b, c;
    std::vector<bf16> ad, bd;
    for (const tp::device& dev : group.local()) {
      a.push_back(random_input(dev, M, K, ad));
      b.push_back(random_input(dev, K, N, bd));
      a_host.push_back(to_double(ad)), b_host.push_back(to_double(bd));
      c.push_back(poisoned_output(dev, shards[dev.index()], N));
    }
    for (const tp::device& dev : group.local()) rs(dev, a[dev.index()], b[dev.index()], c[dev.index()]);
    long long r0 = 0;
    for (int d = 0; d < D; ++d) {
      std::vector<double> ref(static_cast<std::size_t>(shards[d] * N), 0.0);
      for (int src = 0; src < D; ++src) {
        const auto part = matmul_rows(a_host[src], b_host[src], K, N, r0, r0 + shards[d]);
        for (std::size_t i = 0; i < ref.size(); ++i) ref[i] += part[i];
      }
      EXPECT_LT(test::rel_error(c[d].to_host(), ref), 1e-2) << D << " devices, device " << d;
      r0 += shards[d];
    }
  }
}

TEST(CollectiveMatmul, BadShapesAreReported) {
  auto group = tp::device_group::simulated(2, test::interpreter());
  try {
    tp::all_gather_matmul<bf16> ag(group, {64, 64, 64}, 64, 64);
    FAIL() << "three shards for two devices were accepted";
  } catch (const tp::error& e) {
    EXPECT_NE(std::string(e.what()).find("all_gather_matmul: 3 shard sizes for a group of 2 devices"), std::string::npos)
        << e.what();
  }
  tp::all_gather_matmul<bf16> ag(group, {64, 32}, 64, 64);
  tp::tensor<bf16, 2> a(group.local()[0], {32, 64}), b(group.local()[0], {64, 64}), c(group.local()[0], {96, 64});
  try {
    ag(group.local()[0], a, b, c);
    FAIL() << "a shard of the wrong size was accepted";
  } catch (const tp::error& e) {
    EXPECT_NE(std::string(e.what()).find("device 0's a is 32 x 64, expected 64 x 64"), std::string::npos) << e.what();
  }
}

}  // namespace
