// Builds the tensor map of one (tensor, tile) pair on the host: checks every TMA rule and
// says exactly which one a tensor breaks, fills the description the interpreter uses, and
// on the GPU encodes the CUtensorMap with the driver's cuTensorMapEncodeTiled, reached
// through cudaGetDriverEntryPointByVersion so that nothing links libcuda.
#pragma once

#include "../core/dtypes.cuh"
#include "../core/error.cuh"
#include "../core/tma_desc.cuh"
#include "device.cuh"
#include "tensor.cuh"

#include <cstring>

namespace tilepipe::host {

#if TP_HAS_CUDA_COMPILER
using encode_tiled_fn = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                     const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                     CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

inline encode_tiled_fn encode_tiled() {
  static encode_tiled_fn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    TP_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q));
    if (q != cudaDriverEntryPointSuccess || !p) throw error("tilepipe: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<encode_tiled_fn>(p);
  }();
  return fn;
}
#endif

/// A dimension of extent 1 is only ever read at index 0, so its stride addresses nothing;
/// frameworks hand over any value there (PyTorch's DLPack export writes 1 for a decode
/// query [B, 1, H, D], pytorch#83158). TMA rules for strides apply to the dimensions that
/// have more than one index: the others count as contiguous over the dimensions inside.
template <class T, int R>
long long effective_stride(const tensor_view<T, R>& t, int d) {
  if (t.shape[d] != 1) return t.stride[d];
  if (d == R - 1) return 1;
  const long long inner = effective_stride(t, d + 1) * t.shape[d + 1];
  const long long per16 = 16 / static_cast<long long>(sizeof(T));  // round up to 16 bytes
  return (inner + per16 - 1) / per16 * per16;
}

/// A kernel's check, before its launch, of a tensor it reads or writes by rows with TMA:
/// the last dimension contiguous, the other strides and the data 16-byte aligned
/// (dimensions of extent 1 excepted: effective_stride). Reports name the kernel and the
/// tensor (make_tensor_map's reports name only the launch argument).
template <class T, int R>
void require_tma_rows(const tensor_view<T, R>& t, const char* kernel, const char* name) {
  if (effective_stride(t, R - 1) != 1)
    detail::throw_formatted("%s: %s's last dimension must be contiguous (stride 1, got %lld)", kernel, name,
                            t.stride[R - 1]);
  for (int d = 0; d < R - 1; ++d)
    if (effective_stride(t, d) * static_cast<long long>(sizeof(T)) % 16 != 0)
      detail::throw_formatted("%s: %s's stride %lld in dimension %d is not a multiple of 16 bytes (TMA)", kernel, name,
                              t.stride[d], d);
  if (reinterpret_cast<std::uintptr_t>(t.data) % 16 != 0)
    detail::throw_formatted("%s: %s's data is not 16-byte aligned (TMA)", kernel, name);
}

template <class Tile, class T, int R>
tma_desc make_tensor_map(const tensor_view<T, R>& t, bool gpu, const char* what) {
  using plan = tma_plan<Tile, static_cast<int>(sizeof(T))>;
  constexpr int e = static_cast<int>(sizeof(T));
  tma_desc d{};
  std::memset(&d.map, 0, sizeof d.map);
  d.global = t.data;
  d.rank = R;
  d.elem_bytes = e;
  d.swizzle = Tile::swizzle_bytes;
  d.oob_nan = Tile::oob_fill_mode == oob::nan;
  d.l2_promotion = Tile::l2_promotion_bytes;
  static_assert(Tile::oob_fill_mode == oob::zero || std::is_same_v<T, f32> || std::is_same_v<T, bf16> ||
                    std::is_same_v<T, f16>,
                "tilepipe: oob_fill<oob::nan> needs f32, bf16 or f16 elements (TMA fills NaN for those types only)");

  const auto addr = reinterpret_cast<std::uintptr_t>(t.data);
  if (addr % 16 != 0)
    detail::throw_formatted("%s: tensor data at %p is not 16-byte aligned, which TMA requires", what, t.data);
  if (effective_stride(t, R - 1) != 1)
    detail::throw_formatted("%s: the innermost dimension must be contiguous (stride 1) for TMA, but its stride is %lld",
                            what, t.stride[R - 1]);
  for (int d0 = 0; d0 < R; ++d0)  // before the strides: an empty dimension makes the outer strides 0
    if (t.shape[d0] <= 0)
      detail::throw_formatted("%s: dimension %d has extent %lld; TMA cannot describe an empty tensor", what, d0,
                              t.shape[d0]);
  for (int d0 = 0; d0 < R; ++d0) {
    const int td = R - 1 - d0;  // TMA order: innermost first
    if (t.shape[d0] > (1ll << 32))
      detail::throw_formatted("%s: dimension %d has extent %lld, over the TMA limit of 2^32", what, d0, t.shape[d0]);
    d.dims[td] = t.shape[d0];
    d.stride_bytes[td] = effective_stride(t, d0) * e;
    d.box[td] = plan::box(td);
    if (td > 0 && (d.stride_bytes[td] % 16 != 0 || d.stride_bytes[td] <= 0))
      detail::throw_formatted(
          "%s: the stride of dimension %d is %lld bytes; TMA needs positive strides that are multiples of 16 bytes "
          "(pad the rows)",
          what, d0, d.stride_bytes[td]);
    if (td > 0 && d.stride_bytes[td] >= (1ll << 40))
      detail::throw_formatted("%s: the stride of dimension %d is %lld bytes, over the TMA limit of 2^40", what, d0,
                              d.stride_bytes[td]);
  }

  if (gpu) {
#if TP_HAS_CUDA_COMPILER
    cuuint64_t dims[max_tma_rank], strides[max_tma_rank];
    cuuint32_t box[max_tma_rank], estr[max_tma_rank];
    for (int i = 0; i < R; ++i) {
      dims[i] = static_cast<cuuint64_t>(d.dims[i]);
      strides[i] = static_cast<cuuint64_t>(d.stride_bytes[i + 1 < R ? i + 1 : i]);
      box[i] = static_cast<cuuint32_t>(d.box[i]);
      estr[i] = 1;
    }
    const auto swz = Tile::swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                     : Tile::swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                     : Tile::swizzle_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                 : CU_TENSOR_MAP_SWIZZLE_NONE;
    const auto promotion = d.l2_promotion == 256   ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                           : d.l2_promotion == 128 ? CU_TENSOR_MAP_L2_PROMOTION_L2_128B
                           : d.l2_promotion == 64  ? CU_TENSOR_MAP_L2_PROMOTION_L2_64B
                                                   : CU_TENSOR_MAP_L2_PROMOTION_NONE;
    const CUresult r = encode_tiled()(&d.map, static_cast<CUtensorMapDataType>(dtype_traits<T>::tma), R,
                                      const_cast<void*>(static_cast<const void*>(t.data)), dims, strides, box, estr,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, swz, promotion,
                                      d.oob_nan ? CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
                                                : CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS)
      detail::throw_formatted("%s: cuTensorMapEncodeTiled rejected the tensor map (CUresult %d)", what, static_cast<int>(r));
#else
    throw error("tilepipe: GPU tensor maps need a translation unit compiled by nvcc");
#endif
  }
  return d;
}

}  // namespace tilepipe::host
