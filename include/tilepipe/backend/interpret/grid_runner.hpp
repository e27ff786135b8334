// The CTAs of an interpreted launch that have not run yet, so that a CTA waiting for
// another CTA's flag can run them ahead of their turn.
//
// The interpreter runs one CTA (or cluster) at a time. On the GPU a persistent kernel's
// CTAs are all resident, and one may wait for a flag another sets (stream-K partial sums).
// Here the waiting warpgroup's CTA is frozen while it waits (only it held the baton), so
// running the next CTAs to completion from inside the wait is safe; when none is left and
// the flag is still clear, no CTA of the grid sets it and the GPU would hang.
#pragma once

#include <cstddef>
#include <functional>

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

}  // namespace tilepipe::interpret
