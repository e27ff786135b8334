// A loop whose index is a compile-time constant in each iteration: register arrays may be
// indexed with it (a run-time index would move them to local memory).
#pragma once

#include "config.cuh"

#include <type_traits>
#include <utility>

namespace tilepipe {

namespace detail {
template <class F, int... I>
TP_HD TP_FORCEINLINE void static_for_impl(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
}  // namespace detail

/// Calls f(std::integral_constant<int, i>{}) for i = 0 .. N - 1.
template <int N, class F>
TP_HD TP_FORCEINLINE void static_for(F&& f) {
  detail::static_for_impl(f, std::make_integer_sequence<int, N>{});
}

}  // namespace tilepipe
