// A TMA copy issued but not performed yet: the interpreter defers a load until its
// mbarrier is waited for (mbarrier_table.hpp) and a store until its bulk group is
// (copy_engine.hpp), so that a kernel that forgets a wait reads poison, as it would read
// stale data on the GPU.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace tilepipe::interpret {

struct pending_copy {
  std::function<void()> perform;
  std::uint32_t barrier = 0;  // SMEM offset of the barrier a load completes on
  long long bytes = 0;
  std::string what;
  std::uint32_t op = 0;       // the race detector's record of it (0 without detection)
  std::uint32_t peer_op = 0;  // a store's record in the launch's peer_memory (0: none)
};

}  // namespace tilepipe::interpret
