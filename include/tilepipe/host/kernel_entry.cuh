// What every CTA of a launch receives and how it starts, on both backends: the kernel's
// parameters (GMEM refs with their tensor maps, SMEM scratch, barriers) in one
// __grid_constant__ struct, their binding inside the CTA, the GPU entry point, and the
// interpreter's run of the grid. host/launch.cuh fills the struct and launches.
#pragma once

#include "../backend/interpret/grid_runner.hpp"
#include "../context.cuh"
#include "../core/refs.cuh"
#include "device.cuh"
#include "launch_config.cuh"

#include <cuda/std/tuple>

#include <array>
#include <cstdlib>
#include <cxxabi.h>
#include <memory>
#include <mutex>
#include <string>
#include <typeinfo>
#include <vector>

namespace tilepipe {

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
  ctx.profiler().start(p.grid.profile_target(), cta, p.grid.extent, p.grid.num_warpgroups);
  using params = decltype(p.args);
  auto args = cuda::std::make_tuple(bind_one<I>(p, ctx, static_cast<std::remove_cvref_t<params>*>(nullptr))...);
  if (ctx.cta_leader()) prim::fence_barrier_init();
  ctx.sync_threads();
  cuda::std::apply([&](auto&... a) { p.kernel(ctx, a...); }, args);
  ctx.profiler().finish();
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


}  // namespace launch_detail

}  // namespace tilepipe
