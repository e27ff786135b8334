// The simulated mbarrier: arrival count, transaction bytes and phase, plus what the
// protocol checks and the reports need to know about its history (who arrived, who waits
// for which phase, which TMA loads completed in the current phase, what its phases
// published for the race detector).
#pragma once

#include "vector_clock.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace tilepipe::interpret {

/// Where a barrier wait is, when the caller knows (the pipeline passes its slot and step).
struct wait_where {
  int slot = -1;
  long long step = -1;
};

struct barrier_waiter {
  int wg = 0;
  std::uint32_t phase = 0;  // index of the phase it waits for (0 = the first phase)
  std::uint32_t parity = 0;
  wait_where where;
};

struct barrier_state {
  std::string name = "barrier";
  int slot = -1;
  std::uint32_t count = 0;      // arrivals per phase
  std::uint32_t arrived = 0;    // arrivals in the current phase
  long long tx = 0;             // expected minus delivered bytes in the current phase
  std::uint32_t completed = 0;  // phases completed so far

  // Race detection: the barrier is an actor whose clock counts its completed phases.
  int actor = -1;
  vector_clock phase_clock;       // what the arrivals of the current phase published
  vector_clock completed_clock;   // what the last completed phase published
  std::uint32_t observed = 0;     // the last phase (1-based) a wait returned for
  std::vector<std::uint32_t> delivered;  // TMA loads (detector ids) delivered in this phase
  bool loads_delivered = false;          // any TMA load delivered bytes in this phase
  std::uint32_t last_load_phase = 0;     // the last phase (1-based) TMA loads completed in

  // Protocol checks and deadlock reports.
  unsigned arrivers_now = 0;   // bit w: warpgroup w arrived in the current phase
  unsigned arrivers_ever = 0;  // bit w: warpgroup w arrived in an earlier phase
  long long delivered_bytes = 0;  // transaction bytes delivered in the current phase
  std::vector<barrier_waiter> waiters;  // blocked waits
  std::vector<std::uint32_t> seen;      // per warpgroup: phases completed when its last wait returned

  std::uint32_t seen_by(int wg) const { return wg < static_cast<int>(seen.size()) ? seen[static_cast<std::size_t>(wg)] : 0; }
  void mark_seen(int wg) {
    if (wg >= static_cast<int>(seen.size())) seen.resize(static_cast<std::size_t>(wg) + 1, 0);
    seen[static_cast<std::size_t>(wg)] = completed;
  }

  /// "'pipeline ready barrier of operand 0' slot 1".
  std::string label() const {
    std::string s = "'" + name + "'";
    if (slot >= 0) s += " slot " + std::to_string(slot);
    return s;
  }

  std::string describe() const {
    return label() + " (phases completed " + std::to_string(completed) + ", arrivals " + std::to_string(arrived) + "/" +
           std::to_string(count) + ", transaction bytes outstanding " + std::to_string(tx) + ")";
  }
};

/// "warpgroups 0 and 2" / "warpgroup 1" / "no warpgroup" for a bit set.
inline std::string warpgroup_list(unsigned bits) {
  std::vector<int> w;
  for (int i = 0; i < 32; ++i)
    if (bits & (1u << i)) w.push_back(i);
  if (w.empty()) return "no warpgroup";
  std::string s = w.size() == 1 ? "warpgroup " : "warpgroups ";
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (i) s += i + 1 == w.size() ? " and " : ", ";
    s += std::to_string(w[i]);
  }
  return s;
}

}  // namespace tilepipe::interpret
