// Compiler and target detection shared by every tilepipe header.
//
// tilepipe compiles in two ways from the same sources:
//   * by nvcc: every kernel is built twice, once for the GPU (the device pass, where
//     __CUDA_ARCH__ is defined) and once for the host, where the same code runs in the
//     CPU interpreter;
//   * by a plain C++20 compiler: only the interpreter exists (CI without a GPU).
// Apart from include/tilepipe/backend/, this is the only file that tells the passes apart
// (TP_DEVICE_PASS, and what follows from it: TP_DEBUG_CHECKS, TP_FAIL); the ctest
// interp.backend_ifs checks that.
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#  define TP_HD __host__ __device__
#  define TP_DEVICE __device__
#  define TP_HAS_CUDA_COMPILER 1
#else
#  define TP_HD
#  define TP_DEVICE
#  define TP_HAS_CUDA_COMPILER 0
#endif

#if defined(__CUDA_ARCH__)
#  define TP_DEVICE_PASS 1
#  if (__CUDA_ARCH__ != 900) || !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#    error "tilepipe device code needs sm_90a: build with -gencode=arch=compute_90a,code=sm_90a"
#  endif
#else
#  define TP_DEVICE_PASS 0
#endif

#define TP_FORCEINLINE inline __attribute__((always_inline))

/// Checks that cost time on the device (a block index outside its array, an output block
/// revisited): always made in the interpreter, on the GPU only in debug builds
/// (TILEPIPE_DEBUG), where a failed check prints its message and traps.
#if !TP_DEVICE_PASS || defined(TILEPIPE_DEBUG)
#  define TP_DEBUG_CHECKS 1
#else
#  define TP_DEBUG_CHECKS 0
#endif

/// Fails with a formatted message (core/error.cuh; TP_REQUIRE checks with it): throws
/// tilepipe::error on the host and in the interpreter; on the GPU traps, printing the
/// message first only in debug builds (TILEPIPE_DEBUG): a printf is a function call, and a
/// call anywhere in a kernel makes ptxas serialise every wgmma.
#if TP_DEVICE_PASS && defined(TILEPIPE_DEBUG)
#  define TP_FAIL(...)                   \
    do {                                 \
      printf("tilepipe: " __VA_ARGS__);  \
      printf("\n");                      \
      __trap();                          \
    } while (0)
#elif TP_DEVICE_PASS
#  define TP_FAIL(...) __trap()
#else
#  define TP_FAIL(...) ::tilepipe::detail::throw_formatted(__VA_ARGS__)
#endif

/// The in-kernel profiler (profile.cuh): define TILEPIPE_PROFILE before including tilepipe
/// to record pipeline events; without it every recording call compiles to nothing. With
/// TILEPIPE_PROFILE_COARSE as well, only tiles, epilogues and user scopes are recorded, not
/// each step's waits, copies and bodies (which slow a matmul down: docs/guide.md).
#if defined(TILEPIPE_PROFILE)
#  define TP_PROFILE 1
#else
#  define TP_PROFILE 0
#endif
#if defined(TILEPIPE_PROFILE_COARSE)
#  define TP_PROFILE_STEPS 0
#else
#  define TP_PROFILE_STEPS 1
#endif

namespace tilepipe {

/// Threads in one warpgroup: the unit that runs a tilepipe kernel "thread" (as in Pallas).
inline constexpr int warpgroup_size = 128;
/// Shared memory one CTA may use on sm_90 (227 KB).
inline constexpr std::size_t smem_capacity = 227 * 1024;
/// Alignment of every tilepipe SMEM allocation (128-byte swizzle repeats every 1024 bytes).
inline constexpr std::size_t smem_alignment = 1024;
/// Largest number of warpgroups per CTA tilepipe supports (4 x 128 = 512 threads).
inline constexpr int max_warpgroups = 4;
/// Whether this pass makes the checks of TP_DEBUG_CHECKS.
inline constexpr bool debug_checks = TP_DEBUG_CHECKS;
/// Whether this translation unit records profile events (TILEPIPE_PROFILE), and the events
/// of every pipeline step (not with TILEPIPE_PROFILE_COARSE).
inline constexpr bool profiling = TP_PROFILE;
inline constexpr bool profiling_steps = TP_PROFILE && TP_PROFILE_STEPS;

}  // namespace tilepipe
