// Launching a kernel (Pallas' plgpu.kernel): a kernel is a struct whose const call
// operator takes the kernel_context and then its parameters:
//     struct my_kernel {
//       static constexpr int num_threads = 1;            // warpgroups per CTA (default 1)
//       static constexpr const char* thread_name = "wg"; // optional: axis_index("wg") is the warpgroup
//       TP_HD void operator()(tp::kernel_context& k, tp::gmem<bf16, 2, tile_a> a, ...,
//                             tp::smem<bf16, tile_c> scratch, tp::barriers<2> bars) const;
//     };
// GMEM parameters bind to the launch's inputs, then to its outputs; SMEM and barrier
// parameters are scratch, allocated (and barriers initialised) before the body runs.
//     auto c = tp::kernel(my_kernel{}, {.grid = {m, n}, .grid_names = {"m", "n"}},
//                         tp::out_type<bf16>(M, N))(dev, a, b);
// The host builds a tensor map for every tile a GMEM parameter's type lists.
#pragma once

#include "../context.cuh"
#include "device.cuh"
#include "device_group.cuh"
#include "kernel_arguments.cuh"
#include "kernel_entry.cuh"
#include "launch_config.cuh"
#include "profiler.cuh"
#include "tensor.cuh"
#include "tensor_map.cuh"

#include <cuda/std/tuple>

#include <array>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace tilepipe {

template <class K, class... Outs>
class kernel_launcher {
  using params = launch_detail::params_of<K>;
  using kp_type = launch_detail::kernel_params<K, params>;

 public:
  kernel_launcher(K k, launch_config cfg, Outs... outs) : k_(k), cfg_(std::move(cfg)), outs_(outs...) {}

  /// Launches on `dev` with the given inputs (tensors or tensor_views); returns the
  /// outputs: nothing, one, or a std::tuple of them (a tensor it allocated, or a view of
  /// the input an aliased output updates).
  template <class... In>
  auto operator()(const device& dev, const In&... inputs) const {
    static_assert(sizeof...(In) + sizeof...(Outs) == kp_type::num_gmem,
                  "tilepipe: a kernel launch binds one tensor (input or out_type) to every tp::gmem parameter");
    const auto in = std::tie(inputs...);
    auto outputs = std::apply([&](const auto&... o) { return std::make_tuple(make_output(dev, o, in)...); }, outs_);
    std::apply([&](const auto&... o) { launch(dev, inputs..., o...); }, outputs);
    if constexpr (sizeof...(Outs) == 0) return;
    else if constexpr (sizeof...(Outs) == 1) return std::move(std::get<0>(outputs));
    else return outputs;
  }

  /// How many CTAs of this launch the GPU can hold at once (whole clusters): the grid size
  /// of a persistent kernel. The interpreter, which runs one CTA or cluster at a time,
  /// answers with the grid's size.
  int resident_ctas(const device& dev) const {
    int grid = 1;
    for (int g : cfg_.grid) grid *= g;
    if (!dev.is_gpu()) return grid;
#if TP_HAS_CUDA_COMPILER
    const detail::device_scope on(dev.ordinal());
    if (cluster_size() == 1)
      return with_gpu_launch(dim3(1), [&](auto entry, const cudaLaunchConfig_t& lc) {
        int per_sm = 0;
        TP_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, entry, lc.blockDim.x, lc.dynamicSmemBytes));
        return per_sm * dev.multiprocessors();
      });
    return with_gpu_launch(cluster_dims(), [&](auto entry, const cudaLaunchConfig_t& lc) {
      int clusters = 0;
      TP_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, entry, &lc));
      return clusters * cluster_size();
    });
#else
    return grid;
#endif
  }

 private:
  std::size_t smem_bytes() const { return cfg_.smem_bytes ? cfg_.smem_bytes : smem_capacity; }

#if TP_HAS_CUDA_COMPILER
  /// Calls f(entry, config): the GPU entry point, allowed this launch's dynamic shared
  /// memory, and a launch configuration for `grid` with the cluster attribute.
  template <class F>
  auto with_gpu_launch(dim3 grid, F&& f) const {
    auto entry = launch_detail::gpu_entry<K, kp_type>;
    launch_detail::allow_smem<K, kp_type>(smem_bytes());
    cudaLaunchConfig_t lc{};
    lc.gridDim = grid;
    lc.blockDim = dim3(launch_detail::warpgroups_of<K>() * warpgroup_size);
    lc.dynamicSmemBytes = smem_bytes();
    lc.stream = static_cast<cudaStream_t>(cfg_.stream);
    cudaLaunchAttribute attrs[2]{};
    unsigned n = 0;
    if (cluster_size() > 1) {
      attrs[n].id = cudaLaunchAttributeClusterDimension;
      const dim3 c = cluster_dims();
      attrs[n++].val.clusterDim = {c.x, c.y, c.z};
    }
    if (cfg_.dependent_launch) {
      attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attrs[n++].val.programmaticStreamSerializationAllowed = 1;
    }
    lc.attrs = n ? attrs : nullptr, lc.numAttrs = n;
    return f(entry, static_cast<const cudaLaunchConfig_t&>(lc));
  }
#endif

  /// The cluster's CTAs along each grid axis: cluster_shape, or cluster CTAs along
  /// cluster_axis (fill_grid checks them).
  std::array<int, max_grid_rank> cluster_extents() const {
    std::array<int, max_grid_rank> e = {1, 1, 1};
    if (!cfg_.cluster_shape.empty()) {
      for (std::size_t a = 0; a < cfg_.cluster_shape.size() && a < e.size(); ++a) e[a] = cfg_.cluster_shape[a];
    } else if (cfg_.cluster_axis >= 0 && cfg_.cluster_axis < max_grid_rank) {
      e[cfg_.cluster_axis] = cfg_.cluster;
    }
    return e;
  }
  int cluster_size() const {
    const auto e = cluster_extents();
    return e[0] * e[1] * e[2];
  }

#if TP_HAS_CUDA_COMPILER
  dim3 cluster_dims() const {
    const auto e = cluster_extents();
    return dim3(static_cast<unsigned>(e[0]), static_cast<unsigned>(e[1]), static_cast<unsigned>(e[2]));
  }
#endif

  template <class T, int R, class Inputs>
  static tensor<T, R> make_output(const device& dev, const out_type_t<T, R>& o, const Inputs&) {
    tensor<T, R> t(dev, o.shape);
    t.poison();
    return t;
  }

  template <int I, class T, int R, class Inputs>
  static tensor_view<T, R> make_output(const device&, const aliased_t<I, T, R>& o, const Inputs& in) {
    static_assert(I >= 0 && I < static_cast<int>(std::tuple_size_v<Inputs>),
                  "tilepipe: aliased<I>: the launch has no input I");
    using given = launch_detail::argument_traits<std::remove_cvref_t<std::tuple_element_t<I, Inputs>>>;
    static_assert(std::is_same_v<typename given::value_type, T> && given::rank == R,
                  "tilepipe: aliased<I>(out_type<T>(...)): input I has another element type or rank than the output");
    const tensor_view<T, R> v = launch_detail::as_view(std::get<I>(in));
    if (v.shape != o.type.shape) {
      std::string in_shape, out_shape;
      for (int d = 0; d < R; ++d)
        in_shape += (d ? ", " : "") + std::to_string(v.shape[d]), out_shape += (d ? ", " : "") + std::to_string(o.type.shape[d]);
      detail::throw_formatted("aliased output: input %d has shape (%s) but the output aliasing it is declared (%s)", I,
                              in_shape.c_str(), out_shape.c_str());
    }
    return v;
  }

  template <class... A>
  void launch(const device& dev, const A&... args) const {
    const bool gpu = dev.is_gpu();
    auto p = std::make_shared<kp_type>();
    p->kernel = k_;
    fill_grid(p->grid, dev);
    fill_params(*p, dev, cuda::std::make_index_sequence<cuda::std::tuple_size_v<params>>{}, args...);
    if (cfg_.profile) {
      const long long ctas = 1ll * p->grid.extent[0] * p->grid.extent[1] * p->grid.extent[2];
      if (!p->grid.set_profile_target(cfg_.profile->prepare(gpu, ctas, p->grid.num_warpgroups, launch_detail::kernel_name<K>())))
        throw error("tilepipe: launch option profile: this translation unit was built without TILEPIPE_PROFILE, so its "
                    "kernels record no events; define TILEPIPE_PROFILE before including tilepipe");
    }
    const std::size_t smem = smem_bytes();
    if (smem > smem_capacity)
      detail::throw_formatted("launch asks for %zu bytes of shared memory per CTA; sm_90 allows %zu", smem, smem_capacity);
    if (kp_type::static_scratch != 0 && kp_type::static_scratch > smem)
      detail::throw_formatted("shared memory over budget: the kernel's scratch needs %zu bytes, the launch gives %zu",
                              kp_type::static_scratch, smem);
    if (!gpu) {
      launch_detail::run_interpreted<K, kp_type>(p, cfg_, smem, dev);
      return;
    }
#if TP_HAS_CUDA_COMPILER
    launch_gpu(*p, smem, dev.ordinal());
#endif
  }

#if TP_HAS_CUDA_COMPILER
  /// Launches on the GPU and checks the launch itself. The first launch of each kernel
  /// type on a device is also waited for (not while a stream is being captured), so that
  /// what fails in every run of it (shared memory over budget, a device-side check)
  /// fails here, naming the kernel, rather than at the next unrelated CUDA call. Later
  /// launches only leave their description in the diary (formatted if an error needs it).
  /// The launch goes to GPU `ordinal` (the device's), which is current meanwhile.
  void launch_gpu(kp_type& p, std::size_t smem, int ordinal) const {
    const detail::device_scope on(ordinal);
    p.grid.failure = detail::failure_channel_of(ordinal);
    const detail::launch_record record{&launch_detail::kernel_name<K>(), {p.grid.extent[0], p.grid.extent[1], p.grid.extent[2]},
                                       cluster_size(), launch_detail::warpgroups_of<K>(), smem};
    auto stream = static_cast<cudaStream_t>(cfg_.stream);
    with_gpu_launch(dim3(p.grid.extent[0], p.grid.extent[1], p.grid.extent[2]),
                    [&](auto entry, const cudaLaunchConfig_t& lc) {
                      if (const cudaError_t e = cudaLaunchKernelEx(&lc, entry, p); e != cudaSuccess)
                        throw error("tilepipe: launching " + record.describe() + " failed: " + cudaGetErrorString(e));
                    });
    detail::diary().note(record);
    bool wait = launch_detail::first_launch<K, kp_type>();
    if (wait) {
      cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
      TP_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
      wait = capture == cudaStreamCaptureStatusNone;
    }
#if defined(TILEPIPE_DEBUG_HANGS)
    wait = true;  // name the kernel whose barrier wait timed out (the device printed where)
#endif
    if (!wait) return;
    const std::string what = record.describe();
    if (const cudaError_t e = cudaStreamSynchronize(stream); e != cudaSuccess) {
      std::string s = "tilepipe: " + what + " failed: " + cudaGetErrorString(e);
      const std::string failure = detail::recorded_failure();
      if (!failure.empty()) s += ": " + failure;
#if defined(TILEPIPE_DEBUG_HANGS)
      s += ". With TILEPIPE_DEBUG_HANGS a trap is usually a barrier wait that timed out; the device printed which one";
#else
      if (failure.empty()) s += " (a device-side check traps without a message in release builds: build with "
                                "TILEPIPE_DEBUG to see it)";
#endif
      throw error(s);
    }
  }
#endif

  void fill_grid(grid_info& g, const device& dev) const {
    constexpr int nt = launch_detail::warpgroups_of<K>();
    static_assert(nt >= 1 && nt <= max_warpgroups, "tilepipe: num_threads (warpgroups per CTA) must be 1..4");
    const int rank = static_cast<int>(cfg_.grid.size());
    if (rank < 1 || rank > max_grid_rank)
      detail::throw_formatted("the launch grid has %d axes; tilepipe supports 1 to 3", rank);
    if (!cfg_.grid_names.empty() && static_cast<int>(cfg_.grid_names.size()) != rank)
      detail::throw_formatted("%zu grid names for a grid of %d axes", cfg_.grid_names.size(), rank);
    if (cfg_.cluster_shape.empty()) {
      if (cfg_.cluster != 1 && cfg_.cluster != 2 && cfg_.cluster != 4 && cfg_.cluster != 8)
        detail::throw_formatted("launch option cluster = %d: a cluster has 1, 2, 4 or 8 CTAs", cfg_.cluster);
      if (cfg_.cluster_axis < 0 || cfg_.cluster_axis >= rank)
        detail::throw_formatted("launch option cluster_axis = %d: the grid has axes 0 to %d", cfg_.cluster_axis, rank - 1);
    } else {
      if (static_cast<int>(cfg_.cluster_shape.size()) != rank)
        detail::throw_formatted("launch option cluster_shape has %zu extents for a grid of %d axes: give one per axis",
                                cfg_.cluster_shape.size(), rank);
      if (cfg_.cluster != 1 || cfg_.cluster_axis != 0)
        detail::throw_formatted("launch options cluster_shape and cluster / cluster_axis are both set: cluster_shape "
                                "alone says how many CTAs a cluster spans along every axis");
      for (int a = 0; a < rank; ++a)
        if (cfg_.cluster_shape[a] < 1)
          detail::throw_formatted("launch option cluster_shape: axis %d has extent %d; an extent is at least 1", a,
                                  cfg_.cluster_shape[a]);
      const int size = cluster_size();
      if (size != 1 && size != 2 && size != 4 && size != 8)
        detail::throw_formatted("launch option cluster_shape makes clusters of %d CTAs: a cluster has 1, 2, 4 or 8 CTAs",
                                size);
    }
    const auto cluster = cluster_extents();
    for (int a = 0; a < rank; ++a)
      if (cfg_.grid[a] % cluster[a] != 0)
        detail::throw_formatted("the grid's axis %d has %d CTAs, not a multiple of the cluster size %d along it", a,
                                cfg_.grid[a], cluster[a]);
    for (int a = 0; a < max_grid_rank; ++a) g.cluster[a] = cluster[a];
    g.rank = rank;
    g.num_warpgroups = nt;
    g.device = dev.index();
    g.devices = dev.count();
    if (cfg_.device_axis.empty() || cfg_.device_axis.size() >= static_cast<std::size_t>(max_axis_name))
      detail::throw_formatted("launch option device_axis '%s' must have 1 to %d characters", cfg_.device_axis.c_str(),
                              max_axis_name - 1);
    std::memcpy(g.device_name, cfg_.device_axis.c_str(), cfg_.device_axis.size() + 1);
    for (int a = 0; a < rank; ++a) {
      if (cfg_.grid[a] <= 0) detail::throw_formatted("empty grid: axis %d has extent %d", a, cfg_.grid[a]);
      g.extent[a] = cfg_.grid[a];
      if (!cfg_.grid_names.empty()) {
        if (cfg_.grid_names[a].size() >= static_cast<std::size_t>(max_axis_name))
          detail::throw_formatted("grid axis name '%s' is longer than %d characters", cfg_.grid_names[a].c_str(),
                                  max_axis_name - 1);
        std::memcpy(g.names[a], cfg_.grid_names[a].c_str(), cfg_.grid_names[a].size() + 1);
      }
    }
    if constexpr (requires { K::thread_name; }) {
      const std::string name = K::thread_name;
      if (name.empty() || name.size() >= static_cast<std::size_t>(max_axis_name))
        detail::throw_formatted("the kernel's thread_name '%s' must have 1 to %d characters", name.c_str(), max_axis_name - 1);
      for (std::size_t a = 0; a < cfg_.grid_names.size(); ++a)
        if (cfg_.grid_names[a] == name)
          detail::throw_formatted("the kernel's thread_name '%s' is also the name of grid axis %zu", name.c_str(), a);
      std::memcpy(g.thread_name, name.c_str(), name.size() + 1);
    }
  }

  template <std::size_t... I, class... A>
  static void fill_params(kp_type& p, const device& dev, cuda::std::index_sequence<I...>, const A&... args) {
    const auto bound = std::tie(args...);
    (fill_param<I>(p, dev, bound), ...);
  }

  template <std::size_t I, class Bound>
  static void fill_param(kp_type& p, const device& dev, const Bound& bound) {
    using Param = cuda::std::tuple_element_t<I, params>;
    if constexpr (launch_detail::is_gmem_v<Param>) {
      static_assert(I < std::tuple_size_v<Bound>, "tilepipe: gmem parameters come before scratch parameters");
      constexpr int offset = map_offset_of<I>(cuda::std::make_index_sequence<cuda::std::tuple_size_v<params>>{});
      cuda::std::get<I>(p.args) =
          launch_detail::bind_gmem_argument<Param, static_cast<int>(I)>(std::get<I>(bound), p.maps + offset, dev);
    }
  }

  template <std::size_t I, std::size_t... J>
  static constexpr int map_offset_of(cuda::std::index_sequence<J...>) {
    return launch_detail::map_offset<I, cuda::std::tuple_element_t<J, params>...>();
  }

  K k_;
  launch_config cfg_;
  std::tuple<Outs...> outs_;
};

/// Prepares a launch of kernel `k`; call the result with a device and the inputs.
template <class K, class... Outs>
kernel_launcher<K, Outs...> kernel(K k, launch_config cfg, Outs... outs) {
  return kernel_launcher<K, Outs...>(k, std::move(cfg), outs...);
}

}  // namespace tilepipe
