// Running an interpreted launch's grid: one cluster of CTAs at a time (a CTA is a cluster
// of one), each warpgroup of each CTA of the cluster a host thread (run_grid); and the
// CTAs that have not run yet, so that a CTA waiting for another CTA's flag can run them
// ahead of their turn (grid_runner).
//
// On the GPU a persistent kernel's CTAs are all resident, and one may wait for a flag
// another sets (stream-K partial sums). Here the waiting warpgroup's CTA is frozen while it
// waits (only it held the baton), so running the next CTAs to completion from inside the
// wait is safe; when none is left and the flag is still clear, no CTA of the grid sets it
// and the GPU would hang.
#pragma once

#include "cta.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tilepipe::interpret {

class grid_runner {
 public:
  grid_runner(std::size_t count, std::function<void(std::size_t)> run) : count_(count), run_(std::move(run)) {}

  /// Runs the next CTA that has not run; false when every CTA ran or is running.
  bool run_next() {
    if (next_ >= count_) return false;
    run_(next_++);
    return true;
  }

 private:
  std::size_t count_;
  std::size_t next_ = 0;
  std::function<void(std::size_t)> run_;
};

/// An interpreted launch's grid: extents (x, y, z), the axes the launch named (for CTA
/// names in reports), a cluster's CTAs along each axis, warpgroups per CTA and shared
/// memory per CTA.
struct grid_shape {
  std::array<int, 3> extent = {1, 1, 1};
  int rank = 1;
  std::array<int, 3> cluster = {1, 1, 1};
  int warpgroups = 1;
  std::size_t smem_bytes = 0;

  int cluster_size() const { return cluster[0] * cluster[1] * cluster[2]; }
  /// The CTA of cluster rank `rank` in the cluster whose first CTA is `first`: axis 0
  /// fastest (CUDA's %cluster_ctarank).
  std::array<int, 3> cta_of_rank(const std::array<int, 3>& first, int rank) const {
    return {first[0] + rank % cluster[0], first[1] + rank / cluster[0] % cluster[1],
            first[2] + rank / (cluster[0] * cluster[1])};
  }
};

/// The first CTA of each cluster of the grid, in the order they run: in order, or shuffled
/// (opt.shuffle_ctas).
inline std::vector<std::array<int, 3>> cluster_order(const grid_shape& g, const options& opt) {
  std::vector<std::array<int, 3>> order;
  for (int z = 0; z < g.extent[2]; z += g.cluster[2])
    for (int y = 0; y < g.extent[1]; y += g.cluster[1])
      for (int x = 0; x < g.extent[0]; x += g.cluster[0]) order.push_back({x, y, z});
  if (opt.shuffle_ctas) {
    std::mt19937_64 rng(opt.seed);
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order;
}

/// A cluster's name in reports: "(2, 0)", or "(2..3, 0)" for a cluster of two along x.
inline std::string cluster_name(const grid_shape& g, const std::array<int, 3>& c) {
  std::string name = "(";
  for (int a = 0; a < g.rank; ++a)
    name += (a ? ", " : "") + std::to_string(c[a]) + (g.cluster[a] > 1 ? ".." + std::to_string(c[a] + g.cluster[a] - 1) : "");
  return name + ")";
}

/// Runs every CTA of the grid: run_cta(cta) is one warpgroup's body, in the CTA at
/// coordinates cta. CTAs run in order, or shuffled (opt.shuffle_ctas); a failure in any
/// warpgroup ends the launch with an error naming the kernel and the CTA.
inline void run_grid(const grid_shape& g, const options& opt, const std::string& kernel,
                     const std::function<void(const std::array<int, 3>& cta)>& run_cta) {
  const int nt = g.warpgroups, cl = g.cluster_size();
  const std::vector<std::array<int, 3>> order = cluster_order(g, opt);
  // Runs CTA `number` of `order`; a CTA that waits for another's flag runs the next ones
  // ahead through `grid`.
  grid_runner grid(order.size(), [&](std::size_t number) {
    const auto& c = order[number];
    const std::string cta_name = cluster_name(g, c);
    cta_state st(nt, g.smem_bytes, opt, kernel, cta_name, static_cast<int>(number), cl);
    st.grid = &grid;
    std::vector<std::thread> threads;
    for (int i = 0; i < nt * cl; ++i)
      threads.emplace_back([&, i] {
        current() = {&st, i};
        try {
          st.sched.enter(i);
          run_cta(g.cta_of_rank(c, i / nt));
          st.on_warpgroup_exit(i);
        } catch (const cta_aborted&) {
        } catch (const std::exception& e) {
          std::string what = e.what();
          if (what.rfind("tilepipe: ", 0) == 0) what.erase(0, 10);  // the launch's message says it once
          st.sched.abort(std::string("warpgroup ") + std::to_string(i) + ": " + what);
        }
        st.sched.finish(i);
        current() = {};
      });
    for (auto& t : threads) t.join();
    if (st.sched.aborted()) throw error("tilepipe: kernel " + kernel + ", CTA " + cta_name + ": " + st.sched.reason());
    st.check_exit();
  });
  while (grid.run_next()) {
  }
}

}  // namespace tilepipe::interpret
