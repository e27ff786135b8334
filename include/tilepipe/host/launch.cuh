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

#include "../backend/interpret/grid_runner.hpp"
#include "../context.cuh"
#include "../core/refs.cuh"
#include "device.cuh"
#include "device_group.cuh"
#include "profiler.cuh"
#include "tensor.cuh"
#include "tensor_map.cuh"

#include <cuda/std/tuple>

#include <array>
#include <memory>
#include <mutex>
#include <cxxabi.h>
#include <string>
#include <tuple>
#include <typeinfo>
#include <vector>

namespace tilepipe {

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

namespace launch_detail {

template <class P>
inline constexpr bool is_gmem_v = false;
template <class T, int R, class... Tiles>
inline constexpr bool is_gmem_v<gmem_ref<T, R, Tiles...>> = true;
template <class T, int R, class... Tiles>
inline constexpr bool is_gmem_v<symmetric_ref<T, R, Tiles...>> = true;  // bound to a launch argument like a gmem_ref
template <class P>
inline constexpr bool is_barriers_v = false;
template <int N, int A>
inline constexpr bool is_barriers_v<barriers<N, A>> = true;

template <class P>
constexpr int num_maps() {
  if constexpr (is_gmem_v<P>) return P::num_maps;
  else return 0;
}

template <class P>
constexpr std::size_t scratch_bytes() {
  if constexpr (is_smem_ref_v<P>) return (P::bytes + smem_alignment - 1) / smem_alignment * smem_alignment;
  else if constexpr (is_barriers_v<P>) return (P::bytes + smem_alignment - 1) / smem_alignment * smem_alignment;
  else return 0;
}

template <class F>
struct signature;
template <class K, class... P>
struct signature<void (K::*)(kernel_context&, P...) const> {
  using params = cuda::std::tuple<std::remove_cvref_t<P>...>;
};

template <class K>
using params_of = typename signature<decltype(&K::operator())>::params;

template <class K>
constexpr int threads_of() {
  if constexpr (requires { K::num_threads; }) return K::num_threads;
  else return 1;
}

/// Everything a CTA needs, passed by value as the kernel's __grid_constant__ parameter.
template <class K, class Params>
struct kernel_params;

template <class K, class... P>
struct kernel_params<K, cuda::std::tuple<P...>> {
  static constexpr int total_maps = (0 + ... + num_maps<P>());
  static constexpr std::size_t static_scratch = (0 + ... + scratch_bytes<P>());
  static constexpr int num_gmem = (0 + ... + (is_gmem_v<P> ? 1 : 0));
  static_assert(diagnostic::smem_over_budget<static_scratch, smem_capacity>::ok);

  K kernel;
  grid_info grid;
  tma_desc maps[total_maps > 0 ? total_maps : 1];
  cuda::std::tuple<P...> args;
};

/// Index of the first map of parameter I.
template <std::size_t I, class... P>
constexpr int map_offset() {
  int s = 0, i = 0;
  ((s += (i++ < static_cast<int>(I) ? num_maps<P>() : 0)), ...);
  return s;
}

template <std::size_t I, class KP, class... P>
TP_HD auto bind_one(const KP& p, kernel_context& ctx, cuda::std::tuple<P...>*) {
  using Param = cuda::std::tuple_element_t<I, cuda::std::tuple<P...>>;
  if constexpr (is_symmetric_ref_v<Param>) {
    Param r = cuda::std::get<I>(p.args);
    r.all_maps = p.maps + map_offset<I, P...>();
    r.local.maps = r.all_maps + r.device * Param::local_ref::num_maps;
    return r;
  } else if constexpr (is_gmem_v<Param>) {
    Param r = cuda::std::get<I>(p.args);
    r.maps = p.maps + map_offset<I, P...>();
    return r;
  } else if constexpr (is_smem_ref_v<Param>) {
    auto* p = ctx.allocate(Param::bytes, "SMEM scratch");
    prim::name_smem(p, Param::bytes, "SMEM scratch, kernel parameter", static_cast<int>(I));
    return Param{reinterpret_cast<typename Param::value_type*>(p), 0};
  } else if constexpr (is_barriers_v<Param>) {
    Param b{reinterpret_cast<std::uint64_t*>(ctx.allocate(Param::bytes, "barrier scratch"))};
    if (ctx.cta_leader())
      for (int i = 0; i < Param::count; ++i) {
        prim::mbarrier_init(b.ptr + i, Param::arrivals);
        prim::mbarrier_name(b.ptr + i, "scratch", static_cast<int>(I), i);
      }
    return b;
  } else {
    static_assert(sizeof(Param) == 0,
                  "tilepipe: kernel parameters are tp::gmem<...>, tp::smem<...> or tp::barriers<...>; put scalars "
                  "in the kernel struct's members");
  }
}

/// The body of one CTA, the same on both backends.
template <class K, class KP, std::size_t... I>
TP_HD void run_cta(const KP& p, const int (&cta)[max_grid_rank], cuda::std::index_sequence<I...>) {
  kernel_context ctx(p.grid, cta);
  ctx.profile_start();
  using params = decltype(p.args);
  auto args = cuda::std::make_tuple(bind_one<I>(p, ctx, static_cast<std::remove_cvref_t<params>*>(nullptr))...);
  if (ctx.cta_leader()) prim::fence_barrier_init();
  ctx.sync_threads();
  cuda::std::apply([&](auto&... a) { p.kernel(ctx, a...); }, args);
  ctx.profile_finish();
}

#if TP_HAS_CUDA_COMPILER
template <class K, class KP>
__global__ void __launch_bounds__(threads_of<K>() * warpgroup_size, 1) gpu_entry(const __grid_constant__ KP p) {
  const int cta[max_grid_rank] = {static_cast<int>(blockIdx.x), static_cast<int>(blockIdx.y),
                                  static_cast<int>(blockIdx.z)};
  run_cta<K>(p, cta, cuda::std::make_index_sequence<cuda::std::tuple_size_v<decltype(p.args)>>{});
}

/// Lets gpu_entry<K, KP> use `bytes` of dynamic shared memory on the current GPU. The limit
/// is one per entry point (whichever launcher launches it) and a maximum, so it is only
/// ever raised, and set once per size rather than on every launch: the call costs host
/// time on the launch path.
template <class K, class KP>
void allow_smem(std::size_t bytes) {
  static std::mutex m;
  static std::vector<std::size_t> allowed;  // per device ordinal
  int dev = 0;
  TP_CUDA_CHECK(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(m);
  if (allowed.size() <= static_cast<std::size_t>(dev)) allowed.resize(dev + 1, 0);
  if (bytes <= allowed[dev]) return;
  // The first call for a kernel also loads its module (CUDA's lazy loading); it may come
  // inside a CUDA-graph capture (a framework's first call of a tilepipe op).
  const detail::relaxed_capture_mode relaxed;
  TP_CUDA_CHECK(cudaFuncSetAttribute(gpu_entry<K, KP>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  allowed[dev] = bytes;
}
#endif

#if TP_HAS_CUDA_COMPILER
/// True for the first launch of gpu_entry<K, KP> on the current device.
template <class K, class KP>
bool first_launch() {
  static std::mutex m;
  static std::vector<bool> launched;  // per device ordinal
  int dev = 0;
  TP_CUDA_CHECK(cudaGetDevice(&dev));
  const std::lock_guard<std::mutex> lock(m);
  if (launched.size() <= static_cast<std::size_t>(dev)) launched.resize(dev + 1, false);
  const bool first = !launched[dev];
  launched[dev] = true;
  return first;
}
#endif

template <class K>
const std::string& kernel_name() {
  static const std::string name = [] {
    int status = 0;
    char* n = abi::__cxa_demangle(typeid(K).name(), nullptr, nullptr, &status);
    std::string s = status == 0 && n ? n : typeid(K).name();
    std::free(n);
    return s;
  }();
  return name;
}

/// Runs the launch in the interpreter (backend/interpret/grid_runner.hpp); on a device of
/// a simulated group, hands it to the group, which runs it with the other devices' launches
/// (backend/interpret/devices.hpp) and keeps the parameters until then.
template <class K, class KP>
void run_interpreted(std::shared_ptr<const KP> p, const launch_config& cfg, std::size_t smem, const device& dev) {
  static_assert(max_grid_rank == 3, "tilepipe: the interpreter runs grids of 3 axes");
  interpret::grid_shape g;
  for (int a = 0; a < max_grid_rank; ++a) g.extent[a] = p->grid.extent[a];
  g.rank = static_cast<int>(cfg.grid.size());
  for (int a = 0; a < max_grid_rank; ++a) g.cluster[a] = p->grid.cluster[a];
  g.warpgroups = threads_of<K>();
  g.smem_bytes = smem;
  auto run = [p](const std::array<int, 3>& c) {
    const int cta[max_grid_rank] = {c[0], c[1], c[2]};
    run_cta<K>(*p, cta, cuda::std::make_index_sequence<cuda::std::tuple_size_v<decltype(p->args)>>{});
  };
  if (const auto& group = dev.simulated_group()) group->submit(dev.index(), {g, dev.interpreter, kernel_name<K>(), run});
  else interpret::run_grid(g, dev.interpreter, kernel_name<K>(), run);
}

template <class T, int R>
tensor_view<T, R> as_view(const tensor<T, R>& t) {
  return t.view();
}
template <class T, int R>
tensor_view<T, R> as_view(const tensor_view<T, R>& v) {
  return v;
}

/// Element type and rank of a launch argument (a tensor or tensor_view).
template <class A>
struct argument_traits;
template <class T, int R>
struct argument_traits<tensor<T, R>> {
  using value_type = T;
  static constexpr int rank = R;
};
template <class T, int R>
struct argument_traits<tensor_view<T, R>> {
  using value_type = T;
  static constexpr int rank = R;
};

}  // namespace launch_detail

namespace diagnostic {
// The template arguments of argument_mismatch name the argument and both types.
template <int Index>
struct kernel_argument {};
template <class T, int Rank>
struct parameter_is_gmem {};
template <class T, int Rank>
struct argument_is_tensor {};
template <class Argument, class Parameter, class Given>
struct argument_mismatch {
  static_assert(sizeof(Argument) == 0,
                "tilepipe: a launch argument's element type or rank differs from its tp::gmem<T, R, ...> parameter: "
                "see kernel_argument, parameter_is_gmem and argument_is_tensor in the template arguments of this "
                "diagnostic");
  static constexpr bool reported = true;
};
}  // namespace diagnostic

namespace launch_detail {

template <class Param, class T, int R>
Param make_gmem_param(const tensor_view<T, R>& v, tma_desc* maps, bool gpu, int index) {
  if (!v.data)
    detail::throw_formatted("kernel argument %d (tp::gmem<%s, %d>) is a null tensor view: it has no data", index,
                            dtype_traits<T>::name, R);
  if (v.on_gpu != gpu)
    detail::throw_formatted("kernel argument %d lives in %s memory but the launch runs on the %s", index,
                            v.on_gpu ? "GPU" : "host", gpu ? "GPU" : "interpreter");
  Param r;
  r.data = v.data;
  for (int d = 0; d < R; ++d) r.shape[d] = v.shape[d], r.stride[d] = v.stride[d], r.origin[d] = 0;
  int m = 0;
  cuda::std::apply(
      [&](auto*... tiles) {
        const std::string what = "kernel argument " + std::to_string(index);
        ((maps[m++] = host::make_tensor_map<std::remove_pointer_t<decltype(tiles)>>(v, gpu, what.c_str())), ...);
      },
      typename Param::tile_pointers{});
  return r;
}

/// A symmetric parameter: every device's copy, each with its tensor maps.
template <class Param, class T, int R>
Param make_symmetric_param(const symmetric_tensor<T, R>& s, const device& dev, tma_desc* maps, int index) {
  if (s.devices() != dev.count())
    detail::throw_formatted("kernel argument %d is a symmetric tensor of %d devices, but the launch's device is one of "
                            "%d (tp::device_group)",
                            index, s.devices(), dev.count());
  Param r;
  for (int d = 0; d < s.devices(); ++d) {
    r.base[d] = s.on(d).data;
    const auto copy = make_gmem_param<typename Param::local_ref>(s.on(d), maps + d * Param::local_ref::num_maps,
                                                                 dev.is_gpu(), index);
    if (d == dev.index()) r.local = copy;
  }
  r.device = dev.index();
  r.devices = dev.count();
  return r;
}

template <class P>
struct symmetric_parameter_needs_symmetric_tensor {
  static_assert(sizeof(P) == 0, "tilepipe: a tp::symmetric<T, R, ...> kernel parameter binds to a "
                                "tp::symmetric_tensor<T, R> launch argument of the same element type and rank");
  static constexpr bool reported = true;
};

/// A gmem_ref parameter bound to launch argument `Index`, after checking its type and rank.
template <class Param, int Index, class Arg>
Param bind_plain_gmem_argument(const Arg& a, tma_desc* maps, bool gpu) {
  using T = typename Param::value_type;
  using given = argument_traits<std::remove_cvref_t<Arg>>;
  if constexpr (!std::is_same_v<typename given::value_type, T> || given::rank != Param::rank) {
    static_assert(diagnostic::argument_mismatch<diagnostic::kernel_argument<Index>,
                                                diagnostic::parameter_is_gmem<T, Param::rank>,
                                                diagnostic::argument_is_tensor<typename given::value_type, given::rank>>::reported);
    return Param{};
  } else {
    return make_gmem_param<Param>(as_view(a), maps, gpu, Index);
  }
}

/// The GMEM parameter bound to launch argument `Index`, after checking its type and rank.
template <class Param, int Index, class Arg>
Param bind_gmem_argument(const Arg& a, tma_desc* maps, const device& dev) {
  const bool gpu = dev.is_gpu();
  if constexpr (is_symmetric_ref_v<Param>) {
    if constexpr (std::is_same_v<std::remove_cvref_t<Arg>, symmetric_tensor<typename Param::value_type, Param::rank>>) {
      return make_symmetric_param<Param>(a, dev, maps, Index);
    } else {
      static_assert(symmetric_parameter_needs_symmetric_tensor<Param>::reported);
      return Param{};
    }
  } else {
    return bind_plain_gmem_argument<Param, Index>(a, maps, gpu);
  }
}

}  // namespace launch_detail

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
    lc.blockDim = dim3(launch_detail::threads_of<K>() * warpgroup_size);
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
                                       cluster_size(), launch_detail::threads_of<K>(), smem};
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
    constexpr int nt = launch_detail::threads_of<K>();
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
