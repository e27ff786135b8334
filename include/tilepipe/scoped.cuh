// Scratch whose lifetime is a scope (Pallas' pl.run_scoped): shared-memory views and
// barriers allocated for one call of a function and handed back when it returns.
//
//     tp::run_scoped<tp::smem<bf16, tile>, tp::barriers<2>>(ctx, [&](auto buf, auto bars) {
//       ...                                           // every warpgroup of the CTA runs this
//     });                                             // buf's bytes are free again here
//
// A collective call: every warpgroup of the CTA makes it (of the context's team: in a
// warp-specialised pipeline's body, the compute warpgroups), in the same order as its other
// allocations. Barriers are initialised (their arrival count from the type) before f runs
// and invalidated after; the team synchronises before f (the barriers are ready) and
// after it (nobody still uses the scratch when later allocations reuse its bytes).
#pragma once

#include "backend/primitives.cuh"
#include "context.cuh"
#include "core/refs.cuh"

#include <cuda/std/tuple>

namespace tilepipe {

namespace scoped_detail {

template <class S>
inline constexpr bool is_barriers = false;
template <int N, int A>
inline constexpr bool is_barriers<barriers<N, A>> = true;

template <class S>
TP_HD S allocate(kernel_context& k) {
  static_assert(is_smem_ref_v<S> || is_barriers<S>,
                "tilepipe: run_scoped allocates tp::smem<T, tile> views and tp::barriers<N, arrivals>");
  if constexpr (is_barriers<S>) {
    S b{reinterpret_cast<std::uint64_t*>(k.allocate(S::bytes, "scoped barriers"))};
    if (k.team_leader())
      for (int i = 0; i < S::count; ++i) {
        prim::mbarrier_init(b.ptr + i, S::arrivals);
        prim::mbarrier_name(b.ptr + i, "scoped", -1, i);
      }
    return b;
  } else {
    return k.alloc<S>();
  }
}

template <class S>
TP_HD void retire(const kernel_context& k, const S& s) {
  if constexpr (is_barriers<S>)
    if (k.team_leader())
      for (int i = 0; i < S::count; ++i) prim::mbarrier_inval(s.ptr + i);
}

}  // namespace scoped_detail

/// Calls f(scratch...) with one Scratch (tp::smem<T, tile> or tp::barriers<N, A>) of each
/// type, allocated for the call; returns what f returns.
template <class... Scratch, class F>
TP_HD decltype(auto) run_scoped(kernel_context& k, F&& f) {
  const std::uint32_t mark = k.smem_mark();
  const cuda::std::tuple<Scratch...> scratch{scoped_detail::allocate<Scratch>(k)...};
  if constexpr ((scoped_detail::is_barriers<Scratch> || ...))
    if (k.team_leader()) prim::fence_barrier_init();
  k.team_sync();
  auto done = [&] {
    k.team_sync();
    cuda::std::apply([&](const auto&... s) { (scoped_detail::retire(k, s), ...); }, scratch);
    k.smem_release(mark);
  };
  if constexpr (std::is_void_v<decltype(cuda::std::apply(f, scratch))>) {
    cuda::std::apply(f, scratch);
    done();
  } else {
    auto result = cuda::std::apply(f, scratch);
    done();
    return result;
  }
}

}  // namespace tilepipe
