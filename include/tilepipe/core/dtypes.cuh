// Element types: f32, bf16, f16, the two fp8 formats and 8-bit integers, with their names, sizes,
// TMA encodings and float conversions usable on the host (interpreter) and the GPU.
#pragma once

#include "config.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <concepts>
#include <cstdint>
#include <type_traits>

namespace tilepipe {

using f32 = float;
using bf16 = __nv_bfloat16;
using f16 = __half;
using fp8_e4m3 = __nv_fp8_e4m3;
using fp8_e5m2 = __nv_fp8_e5m2;
using i8 = std::int8_t;
using u8 = std::uint8_t;
using u32 = std::uint32_t;  // semaphore counters between devices (ops/signals.cuh)

/// Codes for the element type of a TMA tensor map (values of CUtensorMapDataType).
enum class tma_dtype : int { u8 = 0, u32 = 2, f16 = 6, f32 = 7, bf16 = 9 };

template <class T>
struct dtype_traits;

template <>
struct dtype_traits<f32> {
  static constexpr const char* name = "f32";
  static constexpr tma_dtype tma = tma_dtype::f32;
};
template <>
struct dtype_traits<bf16> {
  static constexpr const char* name = "bf16";
  static constexpr tma_dtype tma = tma_dtype::bf16;
};
template <>
struct dtype_traits<f16> {
  static constexpr const char* name = "f16";
  static constexpr tma_dtype tma = tma_dtype::f16;
};
template <>
struct dtype_traits<fp8_e4m3> {
  static constexpr const char* name = "fp8_e4m3";
  static constexpr tma_dtype tma = tma_dtype::u8;
};
template <>
struct dtype_traits<fp8_e5m2> {
  static constexpr const char* name = "fp8_e5m2";
  static constexpr tma_dtype tma = tma_dtype::u8;
};

// 8-bit integers move as bytes (TMA has no signed 8-bit type, and a copy does not need one);
// computing on them goes through float, exactly (every 8-bit integer is a float).
template <>
struct dtype_traits<i8> {
  static constexpr const char* name = "i8";
  static constexpr tma_dtype tma = tma_dtype::u8;
};
template <>
struct dtype_traits<u8> {
  static constexpr const char* name = "u8";
  static constexpr tma_dtype tma = tma_dtype::u8;
};

template <>
struct dtype_traits<u32> {
  static constexpr const char* name = "u32";
  static constexpr tma_dtype tma = tma_dtype::u32;
};

/// An element type tilepipe can move with TMA and compute on.
template <class T>
concept element_type = requires { dtype_traits<std::remove_cv_t<T>>::name; };

/// The 16-bit types wgmma multiplies into f32.
template <class T>
concept wgmma_operand_type = std::same_as<std::remove_cv_t<T>, bf16> || std::same_as<std::remove_cv_t<T>, f16>;

/// The 8-bit float types wgmma multiplies into f32 (k32 instructions, both operands K-major).
template <class T>
concept wgmma_fp8_type = std::same_as<std::remove_cv_t<T>, fp8_e4m3> || std::same_as<std::remove_cv_t<T>, fp8_e5m2>;

/// Converts any supported element type to float (exact for every type but f32 itself).
template <class T>
TP_HD TP_FORCEINLINE float to_float(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else {
    return static_cast<float>(x);
  }
}

/// Converts a float to T with round-to-nearest-even, the rounding of the GPU's conversions;
/// to an 8-bit integer also saturating, with NaN to 0, as the GPU's cvt.rni.sat does.
template <class T>
TP_HD TP_FORCEINLINE T from_float(float x) {
  if constexpr (std::is_same_v<T, float>) {
    return x;
  } else if constexpr (std::is_same_v<T, bf16>) {
    return __float2bfloat16_rn(x);
  } else if constexpr (std::is_same_v<T, f16>) {
    return __float2half_rn(x);
  } else if constexpr (std::is_same_v<T, i8> || std::is_same_v<T, u8>) {
    constexpr float lo = std::is_same_v<T, i8> ? -128.0f : 0.0f, hi = std::is_same_v<T, i8> ? 127.0f : 255.0f;
    if (!(x == x)) return T(0);
    const float r = rintf(x);  // the current rounding mode: to nearest even, on both backends
    return static_cast<T>(r < lo ? lo : r > hi ? hi : r);
  } else {
    return T(x);
  }
}

}  // namespace tilepipe
