// Several simulated GPUs in one process: a launch on each device of a group is held until
// every device of the group has launched, then all of them run together.
//
// A collective kernel's devices wait for each other's signals (a ring step waits for the
// neighbour's previous step), so they cannot run one after another, and neither can the
// CTAs of one device: a CTA waiting for a peer's step needs that peer's other CTAs to make
// progress. So every warpgroup of every CTA of every device is a host thread under one
// scheduler (scheduler.hpp), which passes a single baton as it does within a CTA: the
// interleaving is deterministic, a semaphore wait gives the baton away, and when no thread
// of any device can run the launch fails with a deadlock report naming each waiter.
// Each CTA keeps its own simulated SMEM, barriers and SMEM race detector; the symmetric
// buffers and their cross-device race detector (peer_memory.hpp) belong to the group.
#pragma once

#include "cta.hpp"
#include "grid_runner.hpp"
#include "peer_memory.hpp"
#include "scheduler.hpp"

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tilepipe::interpret {

/// One device's launch, as the host prepared it: the grid, the interpreter's options, the
/// kernel's name and one warpgroup's body in the CTA at given coordinates (which owns the
/// launch's parameters).
struct device_launch {
  grid_shape shape;
  options opt;
  std::string kernel;
  std::function<void(const std::array<int, 3>& cta)> run_cta;
};

class simulated_devices {
 public:
  explicit simulated_devices(int count) : pending_(static_cast<std::size_t>(count)) {}

  int size() const { return static_cast<int>(pending_.size()); }
  peer_memory& memory() { return memory_; }

  /// Device `device`'s launch; the launch of the last device of the group runs them all.
  void submit(int device, device_launch launch) {
    auto& slot = pending_.at(static_cast<std::size_t>(device));
    if (slot)
      detail::throw_formatted("simulated device %d launches %s while its previous launch (%s) waits for the other "
                              "devices of its group: launch on every device of the group in turn",
                              device, launch.kernel.c_str(), slot->kernel.c_str());
    slot = std::move(launch);
    for (const auto& p : pending_)
      if (!p) return;
    std::vector<device_launch> launches;
    for (auto& p : pending_) launches.push_back(std::move(*p)), p.reset();
    run(launches);
  }

 private:
  struct cta_entry {
    int device;
    std::array<int, 3> first;  // the cluster's first CTA
    std::unique_ptr<cta_state> state;
  };

  void run(std::vector<device_launch>& launches) {
    const int devices = size();
    int threads = 0;
    std::vector<cta_entry> ctas;
    for (int d = 0; d < devices; ++d) {
      const grid_shape& g = launches[d].shape;
      const auto order = cluster_order(g, launches[d].opt);
      for (std::size_t n = 0; n < order.size(); ++n) {
        ctas.push_back({d, order[n], nullptr});
        threads += g.warpgroups * g.cluster_size();
      }
    }
    scheduler sched(threads);
    std::vector<std::string> actor_names;
    std::vector<int> owner;  // the CTA entry of each scheduler thread
    for (std::size_t k = 0; k < ctas.size(); ++k) {
      auto& e = ctas[k];
      const device_launch& l = launches[e.device];
      const std::string name = cluster_name(l.shape, e.first);
      e.state = std::make_unique<cta_state>(l.shape.warpgroups, l.shape.smem_bytes, l.opt, l.kernel, name,
                                            static_cast<int>(k), l.shape.cluster_size(), &sched, static_cast<int>(owner.size()));
      e.state->peers = {&memory_, static_cast<int>(k)};
      actor_names.push_back("device " + std::to_string(e.device) + " CTA " + name);
      owner.insert(owner.end(), static_cast<std::size_t>(l.shape.warpgroups * l.shape.cluster_size()), static_cast<int>(k));
    }
    memory_.begin_launch(actor_names);
    auto thread_name = [&](int j) {
      const cta_entry& e = ctas[static_cast<std::size_t>(owner[static_cast<std::size_t>(j)])];
      return actor_names[static_cast<std::size_t>(owner[static_cast<std::size_t>(j)])] + " warpgroup " +
             std::to_string(j - e.state->thread_base);
    };
    sched.thread_name = thread_name;
    sched.deadlock_context = [&](const std::vector<scheduler::state>& st) {
      std::string s;
      for (std::size_t k = 0; k < ctas.size(); ++k) {
        const cta_state& c = *ctas[k].state;
        const auto first = st.begin() + c.thread_base;
        const std::string part = c.deadlock_context({first, first + c.layout.warpgroups()});
        if (!part.empty()) s += "\n  in " + actor_names[k] + ":" + part;
      }
      return s;
    };
    std::vector<std::thread> pool;
    for (auto& e : ctas) {
      const device_launch& l = launches[e.device];
      cta_state& st = *e.state;
      for (int i = 0; i < st.layout.warpgroups(); ++i)
        pool.emplace_back([&, i] {
          current() = {&st, i};
          const int me = st.thread_base + i;
          try {
            sched.enter(me);
            l.run_cta(l.shape.cta_of_rank(e.first, i / l.shape.warpgroups));
            st.on_warpgroup_exit(i);
          } catch (const cta_aborted&) {
          } catch (const std::exception& ex) {
            std::string what = ex.what();
            if (what.rfind("tilepipe: ", 0) == 0) what.erase(0, 10);
            sched.abort(thread_name(me) + ": " + what);
          }
          sched.finish(me);
          current() = {};
        });
    }
    for (auto& t : pool) t.join();
    if (sched.aborted())
      throw error("tilepipe: kernel " + launches[0].kernel + " on " + std::to_string(devices) +
                  " simulated devices: " + sched.reason());
    for (const auto& e : ctas) e.state->check_exit();
  }

  std::vector<std::optional<device_launch>> pending_;
  peer_memory memory_;
};

}  // namespace tilepipe::interpret
