// Names of shared-memory regions, for reports: the allocator and the pipelines name what
// they hand out ("pipeline input 1, slot 2"), so a race report can say which buffer it is
// about instead of printing a bare offset. Allocations are scoped and reuse memory, so the
// most recent region that contains an offset is the one in use.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tilepipe::interpret {

class smem_regions {
 public:
  /// Names [offset, offset + bytes); index and slot (>= 0) are appended to the name.
  void name(std::uint32_t offset, std::uint32_t bytes, const std::string& what, int index, int slot) {
    std::string n = what;
    if (index >= 0) n += " " + std::to_string(index);
    if (slot >= 0) n += ", slot " + std::to_string(slot);
    // Re-naming the same region (every warpgroup runs the allocator) keeps one entry.
    if (!regions_.empty() && regions_.back().begin == offset && regions_.back().end == offset + bytes &&
        regions_.back().name == n)
      return;
    for (auto it = regions_.begin(); it != regions_.end(); ++it)
      if (it->begin == offset && it->end == offset + bytes && it->name == n) {
        region r = *it;
        regions_.erase(it);
        regions_.push_back(r);
        return;
      }
    regions_.push_back({offset, offset + bytes, n});
  }

  /// Says which block the region that starts at `offset` holds now, e.g. "block (2, 0)".
  void note_contents(std::uint32_t offset, std::string contents) {
    for (auto it = regions_.rbegin(); it != regions_.rend(); ++it)
      if (it->begin == offset) {
        it->contents = std::move(contents);
        return;
      }
  }

  /// "'pipeline input 0, slot 1' (block (2, 0)) bytes [256, 512) (SMEM offset 4352)" or "SMEM bytes [a, b)".
  std::string describe(std::uint32_t begin, std::uint32_t end) const {
    for (auto it = regions_.rbegin(); it != regions_.rend(); ++it)
      if (begin >= it->begin && begin < it->end) {
        return "'" + it->name + "'" + (it->contents.empty() ? "" : " (" + it->contents + ")") + " bytes [" +
               std::to_string(begin - it->begin) + ", " + std::to_string(end - it->begin) + ") (SMEM offset " +
               std::to_string(begin) + ")";
      }
    return "SMEM bytes [" + std::to_string(begin) + ", " + std::to_string(end) + ")";
  }

 private:
  struct region {
    std::uint32_t begin, end;
    std::string name;
    std::string contents;  // what it holds now, when its user said (output blocks)
  };
  std::vector<region> regions_;
};

}  // namespace tilepipe::interpret
