// Vector clocks for the race detector's happens-before relation.
//
// Actors are the CTA's warpgroups (actors 0 .. n-1) and its mbarriers (one actor per
// initialisation, numbered after the warpgroups): a barrier's clock counts the phases it
// completed, so a TMA load that completed in phase k is "done" at epoch (barrier, k) and
// every warpgroup that waited for that phase has that epoch in its clock.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tilepipe::interpret {

/// One actor's logical time: an access at epoch (actor, clock) happens before everything
/// whose vector clock has entry `actor` >= clock.
struct epoch {
  int actor = -1;
  std::uint32_t clock = 0;
};

class vector_clock {
 public:
  std::uint32_t operator[](int actor) const {
    return actor < static_cast<int>(c_.size()) ? c_[static_cast<std::size_t>(actor)] : 0;
  }

  bool covers(const epoch& e) const { return e.actor >= 0 && (*this)[e.actor] >= e.clock; }

  void set(int actor, std::uint32_t v) {
    grow(actor);
    c_[static_cast<std::size_t>(actor)] = v;
  }
  void tick(int actor) { set(actor, (*this)[actor] + 1); }

  /// Pointwise maximum: afterwards this clock knows everything `o` knows.
  void join(const vector_clock& o) {
    if (o.c_.size() > c_.size()) c_.resize(o.c_.size(), 0);
    for (std::size_t i = 0; i < o.c_.size(); ++i) c_[i] = std::max(c_[i], o.c_[i]);
  }

  void clear() { c_.clear(); }

 private:
  void grow(int actor) {
    if (actor >= static_cast<int>(c_.size())) c_.resize(static_cast<std::size_t>(actor) + 1, 0);
  }
  std::vector<std::uint32_t> c_;
};

}  // namespace tilepipe::interpret
