// The workspace of partial sums that CTAs hand each other (see sched/partials.cuh): owned
// on the host, passed to kernels as a tp::partials_ref. Each launch leaves every flag clear
// again (the reader clears it); a launch that failed midway may not, so make a new buffer
// after a failed launch.
#pragma once

#include "../sched/partials.cuh"
#include "tensor.cuh"

#include <vector>

namespace tilepipe {

class partials_buffer {
 public:
  partials_buffer() = default;
  /// `slots` slots of `slot_floats` floats (a multiple of 4) and their flags, all clear.
  partials_buffer(const device& dev, int slots, long long slot_floats)
      : data_(dev, {checked(slots, slot_floats) * slot_floats}),
        flags_(tensor<unsigned, 1>::from_host(dev, {slots}, std::vector<unsigned>(static_cast<std::size_t>(slots), 0u))),
        slot_floats_(slot_floats) {}

  partials_ref ref() const { return {data_.data(), flags_.data(), static_cast<int>(flags_.numel()), slot_floats_}; }

 private:
  static long long checked(int slots, long long slot_floats) {
    TP_REQUIRE(slots >= 1 && slot_floats >= 4 && slot_floats % 4 == 0,
               "partials_buffer: %d slots of %lld floats; needs at least one slot of a positive multiple of 4 floats",
               slots, slot_floats);
    return slots;
  }
  tensor<float, 1> data_;
  tensor<unsigned, 1> flags_;
  long long slot_floats_ = 0;
};

}  // namespace tilepipe
