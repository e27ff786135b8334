// What a deadlock report says about a simulated cluster's mbarriers when no warpgroup can
// run: who could still arrive on the barriers the blocked warpgroups wait for, and the
// likely bug (a cycle of waits, a skipped arrive, a wrong initial phase, expect_tx
// announcing more bytes than the loads deliver, loads pending on barriers nobody waits for).
#pragma once

#include "mbarrier_table.hpp"
#include "scheduler.hpp"

#include <string>
#include <vector>

namespace tilepipe::interpret {

/// st holds the state of the cluster's warpgroups.
inline std::string deadlock_report(const mbarrier_table& barriers, const std::vector<scheduler::state>& st) {
  unsigned returned = 0;
  for (std::size_t w = 0; w < st.size(); ++w)
    if (st[w] == scheduler::state::finished) returned |= 1u << w;
  std::string s;
  for (const auto& [off, b] : barriers.barriers()) {
    if (b.waiters.empty()) continue;
    s += "\n  mbarrier " + b.label() + ": ";
    if (b.arrived < b.count) {
      s += "needs " + std::to_string(b.count - b.arrived) + " more arrival(s) to complete phase " +
           std::to_string(b.completed) + " (arrived in this phase: " + warpgroup_list(b.arrivers_now) +
           "; in earlier phases: " + warpgroup_list(b.arrivers_ever) + ")";
      const unsigned blocked = b.arrivers_ever & ~returned & ~b.arrivers_now;
      if (blocked && !(b.arrivers_ever & ~b.arrivers_now & returned))
        s += "\n    the warpgroups that arrive on it are blocked themselves: " + warpgroup_list(blocked) +
             " (a cycle of waits: each side waits for the other to go first)";
      const unsigned skipped = b.arrivers_ever & returned & ~b.arrivers_now;
      if (skipped)
        s += "\n    " + warpgroup_list(skipped) +
             " arrived on it in earlier phases but returned from the kernel without arriving for this one: "
             "[skipped arrive] an early exit that skips an arrive?";
      const bool fresh = b.completed == 0 && b.arrivers_ever == 0 && b.arrivers_now == 0;
      for (const auto& w : b.waiters) {
        const bool passed_free = barriers.passed_before_first_phase(w.wg, off);
        if (fresh && w.parity == 0 && !passed_free) {
          s += "\n    no phase of it has completed and nobody has arrived on it, so warpgroup " + std::to_string(w.wg) +
               "'s wait for parity 0 waits for its very first phase; if this barrier starts out 'free' (a "
               "consumed / empty barrier), its first wait is for parity 1: [wrong initial phase?]";
        } else if (w.phase >= 1 && b.seen_by(w.wg) == 0 && !passed_free) {
          s += "\n    warpgroup " + std::to_string(w.wg) + " waits for phase " + std::to_string(w.phase) +
               " but never observed the phase(s) before it: its first wait on this barrier is for parity " +
               std::to_string(w.parity) + "; the first wait for a barrier that TMA loads or other warpgroups "
               "complete is for parity 0: [wrong initial phase?]";
        }
      }
    } else if (b.tx > 0) {
      s += "all " + std::to_string(b.count) + " arrivals are in, but " + std::to_string(b.tx) +
           " transaction bytes are still expected and no TMA load is pending on it (" +
           std::to_string(b.delivered_bytes) +
           " bytes were delivered in this phase): [expect_tx mismatch] expect_tx announced more bytes than the "
           "loads on it deliver";
    }
  }
  if (!barriers.loads().empty()) {
    std::string on;
    for (const auto& c : barriers.loads()) {
      const std::string l = barriers.barriers().count(c.barrier) ? barriers.label(c.barrier) : "?";
      if (on.find(l) == std::string::npos) on += (on.empty() ? "" : ", ") + l;
    }
    s += "\n  " + std::to_string(barriers.loads().size()) + " TMA load(s) pending on barriers nobody waits for: " + on;
  }
  for (const auto& [off, b] : barriers.barriers())
    if (b.waiters.empty() && (b.arrived != 0 || b.tx != 0))
      s += "\n  mbarrier " + b.describe() + " is part-way through a phase";
  return s;
}

}  // namespace tilepipe::interpret
