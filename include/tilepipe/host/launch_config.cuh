// What a launch is given: its configuration (grid, cluster, shared memory, stream,
// profiler), the GMEM parameter types a kernel declares, and the outputs a launch
// allocates (out_type) or updates in place (aliased). host/launch.cuh launches with them.
#pragma once

#include "../core/refs.cuh"

#include <array>
#include <string>
#include <vector>

namespace tilepipe {

class profiler;

/// A GMEM kernel parameter: element type, rank, and the tiles the kernel moves with TMA.
template <class T, int R, class... Tiles>
using gmem = gmem_ref<T, R, Tiles...>;
/// A kernel parameter in symmetric memory (a tp::symmetric_tensor argument): every device's
/// copy, reached with tp::remote.
template <class T, int R, class... Tiles>
using symmetric = symmetric_ref<T, R, Tiles...>;

struct launch_config {
  std::vector<int> grid = {1};          // 1 to 3 axes; axis 0 is CUDA's x
  std::vector<std::string> grid_names;  // optional names for axis_index("name")
  std::size_t smem_bytes = 0;           // dynamic SMEM per CTA; 0 = the device maximum (227 KB)
  int cluster = 1;                      // CTAs per thread-block cluster (1, 2, 4 or 8), along cluster_axis
  int cluster_axis = 0;                 // the grid axis a cluster's CTAs lie along (0, 1 or 2)
  std::vector<int> cluster_shape;       // or: the cluster's CTAs along every grid axis, e.g. {2, 2}
                                        // (Pallas' cluster=(2, 2)); replaces cluster and cluster_axis
  void* stream = nullptr;               // cudaStream_t for GPU launches
  profiler* profile = nullptr;          // records the launch's events (needs TILEPIPE_PROFILE)
  bool dependent_launch = false;        // programmatic dependent launch: may start before the
                                        // previous kernel in the stream ends (prim::grid_dependency_wait)
  std::string device_axis = "device";   // the device axis' name: axis_index(device_axis) is the device's
                                        // index in its tp::device_group
};

/// An output the launch allocates (poisoned with NaN) and returns.
template <class T, int R>
struct out_type_t {
  std::array<long long, R> shape;
};
template <class T, class... D>
out_type_t<T, sizeof...(D)> out_type(D... dims) {
  return {{static_cast<long long>(dims)...}};
}

/// An output that is input `Input` updated in place (Pallas' input_output_aliases): the
/// launch binds that input to the output's parameter too, allocates nothing, and returns a
/// tensor_view of the input. Its element type and shape must be the input's.
///     auto x_view = tp::kernel(k, cfg, tp::aliased<0>(tp::out_type<float>(M, N)))(dev, x);
template <int Input, class T, int R>
struct aliased_t {
  out_type_t<T, R> type;
};
template <int Input, class T, int R>
aliased_t<Input, T, R> aliased(out_type_t<T, R> type) {
  return {type};
}


}  // namespace tilepipe
