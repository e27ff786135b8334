// Without XLA's headers (no jax where the extension was built) the module has no handlers
// and tilepipe.jax says so at import.
//
// XLA FFI handlers: JAX calls tilepipe's kernels through jax.ffi.ffi_call, inside jit, on
// XLA's own buffers and (on the GPU) XLA's stream. The handlers turn the buffers (dense,
// row-major) into the same arguments the nanobind functions build, so they pass the same
// checks and launch the same code. tilepipe.jax checks shapes and dtypes at trace time with
// those checks too (placeholders without data); here they see the contents as well (offsets
// in host memory on the CPU platform).
#include "xla.hpp"

#include "ops.hpp"

#include <tilepipe/core/error.cuh>

#include <cuda_runtime_api.h>

#include <utility>

#if TILEPIPE_HAVE_XLA_FFI
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;
using namespace tilepipe::python;

namespace {

tensor_arg from_buffer(const ffi::AnyBuffer& b, const char* name, bool gpu, int device) {
  tensor_arg t;
  t.name = name;
  const auto dims = b.dimensions();
  if (dims.size() > 4) throw argument_type_error(std::string(name) + " has more than 4 dimensions");
  t.rank = static_cast<int>(dims.size());
  std::int64_t stride = 1;
  for (int d = t.rank - 1; d >= 0; --d) t.shape[d] = dims[d], t.stride[d] = stride, stride *= dims[d];
  t.data = b.untyped_data();
  t.on_gpu = gpu, t.device = device;
  switch (b.element_type()) {
    case ffi::DataType::BF16: t.type = dtype::bf16, t.type_name = "bfloat16"; break;
    case ffi::DataType::F16: t.type = dtype::f16, t.type_name = "float16"; break;
    case ffi::DataType::F32: t.type = dtype::f32, t.type_name = "float32"; break;
    case ffi::DataType::S32: t.type = dtype::i32, t.type_name = "int32"; break;
    default: t.type = dtype::other, t.type_name = "an unsupported dtype"; break;
  }
  return t;
}

/// Runs a call, turning every error into an XLA error that carries the message.
template <class F>
ffi::Error guarded(F&& f) {
  try {
    f();
    return ffi::Error::Success();
  } catch (const unsupported_error& e) {
    return ffi::Error(ffi::ErrorCode::kUnimplemented, e.what());
  } catch (const std::invalid_argument& e) {
    return ffi::Error::InvalidArgument(e.what());
  } catch (const std::exception& e) {
    return ffi::Error::Internal(e.what());
  }
}

ffi::Error attention_impl(bool gpu, void* stream, int device, ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v,
                          ffi::AnyBuffer cu_q, ffi::AnyBuffer cu_k, ffi::Result<ffi::AnyBuffer> out,
                          ffi::Result<ffi::AnyBuffer> lse, bool varlen, std::int32_t max_seqlen_q, float scale,
                          bool causal, std::int32_t window_left, std::int32_t window_right) {
  return guarded([&] {
    attention_args a;
    a.q = from_buffer(q, "q", gpu, device), a.k = from_buffer(k, "k", gpu, device), a.v = from_buffer(v, "v", gpu, device);
    a.out = from_buffer(*out, "out", gpu, device), a.lse = from_buffer(*lse, "lse", gpu, device);
    if (varlen) a.cu_seqlens_q = from_buffer(cu_q, "cu_seqlens_q", gpu, device), a.cu_seqlens_k = from_buffer(cu_k, "cu_seqlens_k", gpu, device);
    a.max_seqlen_q = max_seqlen_q, a.softmax_scale = scale, a.causal = causal;
    a.window_left = window_left, a.window_right = window_right, a.stream = stream;
    check(a);
    run(a);
  });
}

ffi::Error attention_backward_impl(bool gpu, void* stream, int device, ffi::AnyBuffer q, ffi::AnyBuffer k,
                                   ffi::AnyBuffer v, ffi::AnyBuffer out, ffi::AnyBuffer d_out, ffi::AnyBuffer lse,
                                   ffi::AnyBuffer cu_q, ffi::AnyBuffer cu_k, ffi::Result<ffi::AnyBuffer> dq,
                                   ffi::Result<ffi::AnyBuffer> dk, ffi::Result<ffi::AnyBuffer> dv,
                                   ffi::Result<ffi::AnyBuffer> workspace, bool varlen, std::int32_t max_seqlen_q,
                                   std::int32_t max_seqlen_k, float scale, bool causal, std::int32_t window_left,
                                   std::int32_t window_right) {
  return guarded([&] {
    attention_backward_args a;
    attention_args& f = a.forward;
    f.q = from_buffer(q, "q", gpu, device), f.k = from_buffer(k, "k", gpu, device), f.v = from_buffer(v, "v", gpu, device);
    f.out = from_buffer(out, "out", gpu, device), f.lse = from_buffer(lse, "lse", gpu, device);
    if (varlen) f.cu_seqlens_q = from_buffer(cu_q, "cu_seqlens_q", gpu, device), f.cu_seqlens_k = from_buffer(cu_k, "cu_seqlens_k", gpu, device);
    f.max_seqlen_q = max_seqlen_q, f.softmax_scale = scale, f.causal = causal;
    f.window_left = window_left, f.window_right = window_right, f.stream = stream;
    a.d_out = from_buffer(d_out, "d_out", gpu, device), a.dq = from_buffer(*dq, "dq", gpu, device);
    a.dk = from_buffer(*dk, "dk", gpu, device), a.dv = from_buffer(*dv, "dv", gpu, device);
    a.workspace = from_buffer(*workspace, "workspace", gpu, device);
    a.max_seqlen_k = max_seqlen_k;
    check(a);
    run(a);
  });
}

ffi::Error grouped_mm_impl(bool gpu, void* stream, int device, ffi::AnyBuffer lhs, ffi::AnyBuffer rhs,
                           ffi::AnyBuffer offsets, ffi::Result<ffi::AnyBuffer> out) {
  return guarded([&] {
    grouped_mm_args a;
    a.a = from_buffer(lhs, "lhs", gpu, device), a.b = from_buffer(rhs, "rhs", gpu, device);  // ragged_dot's names
    a.table = from_buffer(offsets, "group_sizes", gpu, device), a.out = from_buffer(*out, "out", gpu, device);
    a.stream = stream;
    check(a);
    run(a);
  });
}

ffi::Error attention_cpu(ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v, ffi::AnyBuffer cu_q, ffi::AnyBuffer cu_k,
                         ffi::Result<ffi::AnyBuffer> out, ffi::Result<ffi::AnyBuffer> lse, bool varlen,
                         std::int32_t max_seqlen_q, float scale, bool causal, std::int32_t wl, std::int32_t wr) {
  return attention_impl(false, nullptr, 0, q, k, v, cu_q, cu_k, out, lse, varlen, max_seqlen_q, scale, causal, wl, wr);
}
ffi::Error attention_cuda(cudaStream_t stream, std::int32_t device, ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v,
                          ffi::AnyBuffer cu_q, ffi::AnyBuffer cu_k, ffi::Result<ffi::AnyBuffer> out,
                          ffi::Result<ffi::AnyBuffer> lse, bool varlen, std::int32_t max_seqlen_q, float scale,
                          bool causal, std::int32_t wl, std::int32_t wr) {
  return attention_impl(true, stream, device, q, k, v, cu_q, cu_k, out, lse, varlen, max_seqlen_q, scale, causal, wl, wr);
}
ffi::Error attention_backward_cpu(ffi::AnyBuffer q, ffi::AnyBuffer k, ffi::AnyBuffer v, ffi::AnyBuffer out,
                                  ffi::AnyBuffer d_out, ffi::AnyBuffer lse, ffi::AnyBuffer cu_q, ffi::AnyBuffer cu_k,
                                  ffi::Result<ffi::AnyBuffer> dq, ffi::Result<ffi::AnyBuffer> dk,
                                  ffi::Result<ffi::AnyBuffer> dv, ffi::Result<ffi::AnyBuffer> workspace, bool varlen,
                                  std::int32_t max_sq, std::int32_t max_sk, float scale, bool causal, std::int32_t wl,
                                  std::int32_t wr) {
  return attention_backward_impl(false, nullptr, 0, q, k, v, out, d_out, lse, cu_q, cu_k, dq, dk, dv, workspace, varlen,
                                 max_sq, max_sk, scale, causal, wl, wr);
}
ffi::Error attention_backward_cuda(cudaStream_t stream, std::int32_t device, ffi::AnyBuffer q, ffi::AnyBuffer k,
                                   ffi::AnyBuffer v, ffi::AnyBuffer out, ffi::AnyBuffer d_out, ffi::AnyBuffer lse,
                                   ffi::AnyBuffer cu_q, ffi::AnyBuffer cu_k, ffi::Result<ffi::AnyBuffer> dq,
                                   ffi::Result<ffi::AnyBuffer> dk, ffi::Result<ffi::AnyBuffer> dv,
                                   ffi::Result<ffi::AnyBuffer> workspace, bool varlen, std::int32_t max_sq,
                                   std::int32_t max_sk, float scale, bool causal, std::int32_t wl, std::int32_t wr) {
  return attention_backward_impl(true, stream, device, q, k, v, out, d_out, lse, cu_q, cu_k, dq, dk, dv, workspace,
                                 varlen, max_sq, max_sk, scale, causal, wl, wr);
}
ffi::Error grouped_mm_cpu(ffi::AnyBuffer lhs, ffi::AnyBuffer rhs, ffi::AnyBuffer offsets, ffi::Result<ffi::AnyBuffer> out) {
  return grouped_mm_impl(false, nullptr, 0, lhs, rhs, offsets, out);
}
ffi::Error grouped_mm_cuda(cudaStream_t stream, std::int32_t device, ffi::AnyBuffer lhs, ffi::AnyBuffer rhs,
                           ffi::AnyBuffer offsets, ffi::Result<ffi::AnyBuffer> out) {
  return grouped_mm_impl(true, stream, device, lhs, rhs, offsets, out);
}

template <class B>
auto attention_attrs(B binding) {
  return std::move(binding).template Arg<ffi::AnyBuffer>()  // q
      .template Arg<ffi::AnyBuffer>()            // k
      .template Arg<ffi::AnyBuffer>()            // v
      .template Arg<ffi::AnyBuffer>()            // cu_seqlens_q (unused unless varlen)
      .template Arg<ffi::AnyBuffer>()            // cu_seqlens_k
      .template Ret<ffi::AnyBuffer>()            // out
      .template Ret<ffi::AnyBuffer>()            // lse
      .template Attr<bool>("varlen")
      .template Attr<std::int32_t>("max_seqlen_q")
      .template Attr<float>("softmax_scale")
      .template Attr<bool>("causal")
      .template Attr<std::int32_t>("window_left")
      .template Attr<std::int32_t>("window_right");
}
template <class B>
auto attention_backward_attrs(B binding) {
  return std::move(binding).template Arg<ffi::AnyBuffer>()  // q
      .template Arg<ffi::AnyBuffer>()            // k
      .template Arg<ffi::AnyBuffer>()            // v
      .template Arg<ffi::AnyBuffer>()            // out
      .template Arg<ffi::AnyBuffer>()            // d_out
      .template Arg<ffi::AnyBuffer>()            // lse
      .template Arg<ffi::AnyBuffer>()            // cu_seqlens_q (unused unless varlen)
      .template Arg<ffi::AnyBuffer>()            // cu_seqlens_k
      .template Ret<ffi::AnyBuffer>()            // dq
      .template Ret<ffi::AnyBuffer>()            // dk
      .template Ret<ffi::AnyBuffer>()            // dv
      .template Ret<ffi::AnyBuffer>()            // workspace: rowsum(d_out * out), XLA's allocation
      .template Attr<bool>("varlen")
      .template Attr<std::int32_t>("max_seqlen_q")
      .template Attr<std::int32_t>("max_seqlen_k")
      .template Attr<float>("softmax_scale")
      .template Attr<bool>("causal")
      .template Attr<std::int32_t>("window_left")
      .template Attr<std::int32_t>("window_right");
}
template <class B>
auto grouped_mm_attrs(B binding) {
  return std::move(binding).template Arg<ffi::AnyBuffer>().template Arg<ffi::AnyBuffer>().template Arg<ffi::AnyBuffer>().template Ret<ffi::AnyBuffer>();
}

}  // namespace

// The launches are asynchronous on XLA's stream and allocate nothing: CUDA-graph safe.
XLA_FFI_DEFINE_HANDLER_SYMBOL(tilepipe_attention_cpu, attention_cpu, attention_attrs(ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(tilepipe_attention_cuda, attention_cuda,
                              attention_attrs(ffi::Ffi::Bind().Ctx<ffi::PlatformStream<cudaStream_t>>().Ctx<ffi::DeviceOrdinal>()),
                              {ffi::Traits::kCmdBufferCompatible});
XLA_FFI_DEFINE_HANDLER_SYMBOL(tilepipe_attention_backward_cpu, attention_backward_cpu,
                              attention_backward_attrs(ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(tilepipe_attention_backward_cuda, attention_backward_cuda,
                              attention_backward_attrs(ffi::Ffi::Bind().Ctx<ffi::PlatformStream<cudaStream_t>>().Ctx<ffi::DeviceOrdinal>()),
                              {ffi::Traits::kCmdBufferCompatible});
XLA_FFI_DEFINE_HANDLER_SYMBOL(tilepipe_grouped_mm_cpu, grouped_mm_cpu, grouped_mm_attrs(ffi::Ffi::Bind()));
XLA_FFI_DEFINE_HANDLER_SYMBOL(tilepipe_grouped_mm_cuda, grouped_mm_cuda,
                              grouped_mm_attrs(ffi::Ffi::Bind().Ctx<ffi::PlatformStream<cudaStream_t>>().Ctx<ffi::DeviceOrdinal>()),
                              {ffi::Traits::kCmdBufferCompatible});

#endif  // TILEPIPE_HAVE_XLA_FFI

nanobind::dict xla_handlers() {
  namespace nb = nanobind;
  nb::dict d;
#if TILEPIPE_HAVE_XLA_FFI
  auto add = [&](const char* name, const char* platform, XLA_FFI_Handler* h) {
    d[nb::make_tuple(name, platform)] = nb::capsule(reinterpret_cast<void*>(h));
  };
  add("tilepipe_attention", "cpu", tilepipe_attention_cpu);
  add("tilepipe_attention_backward", "cpu", tilepipe_attention_backward_cpu);
  add("tilepipe_grouped_mm", "cpu", tilepipe_grouped_mm_cpu);
  if (built_with_cuda()) {
    add("tilepipe_attention", "CUDA", tilepipe_attention_cuda);
    add("tilepipe_attention_backward", "CUDA", tilepipe_attention_backward_cuda);
    add("tilepipe_grouped_mm", "CUDA", tilepipe_grouped_mm_cuda);
  }
#endif
  return d;
}
