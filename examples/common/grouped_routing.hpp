// How many tokens each expert of a mixture-of-experts layer gets, for the grouped matmul's
// example and benchmark (the same split as bench/grouped_matmul_peers_torch.py).
#pragma once

#include <string>
#include <vector>

namespace example {

/// Group sizes of `groups` groups that add up to groups * rows_per_group rows:
///   balanced: rows_per_group each;
///   skewed:   the first group takes half of the rows, the others share the rest evenly
///             (the last one takes the remainder).
inline std::vector<int> group_sizes(int groups, long long rows_per_group, const std::string& routing) {
  const long long total = groups * rows_per_group;
  std::vector<int> sizes(static_cast<std::size_t>(groups), static_cast<int>(rows_per_group));
  if (routing == "skewed" && groups > 1) {
    const long long first = total / 2, each = (total - first) / (groups - 1);
    sizes.assign(static_cast<std::size_t>(groups), static_cast<int>(each));
    sizes[0] = static_cast<int>(first);
    sizes.back() = static_cast<int>(total - first - each * (groups - 2));
  }
  return sizes;
}

/// Cumulative group ends (PyTorch's offs).
inline std::vector<int> group_ends(const std::vector<int>& sizes) {
  std::vector<int> ends;
  long long end = 0;
  for (int s : sizes) ends.push_back(static_cast<int>(end += s));
  return ends;
}

}  // namespace example
