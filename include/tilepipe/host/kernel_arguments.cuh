// A launch's arguments (tensors, tensor views, symmetric tensors) bound to the kernel's GMEM
// parameters: element type and rank checked (at compile time where the types tell), the
// data's place checked against the backend, and the parameter's tensor maps built.
#pragma once

#include "../core/refs.cuh"
#include "device_group.cuh"
#include "tensor.cuh"
#include "tensor_map.cuh"

#include <cuda/std/tuple>

namespace tilepipe {

namespace launch_detail {

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

}  // namespace tilepipe
