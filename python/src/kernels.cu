// The launchers of the Python extension, compiled once per kernel family and element type
// (CMake makes one translation unit each, defining TILEPIPE_PY_KERNEL and TILEPIPE_PY_DTYPE):
// by nvcc, each holds the sm_90a kernels and the interpreter; by the C++ compiler alone, the
// interpreter only. The arguments have passed check() (checks.cpp).
#include "ops.hpp"

#include <tilepipe/kernels/attention.cuh>
#include <tilepipe/kernels/attention_backward.cuh>
#include <tilepipe/kernels/grouped_matmul.cuh>
#include <tilepipe/kernels/matmul.cuh>
#include <tilepipe/kernels/quantize.cuh>
#include <tilepipe/kernels/scaled_grouped_matmul.cuh>
#include <tilepipe/kernels/scaled_matmul.cuh>

#include <mutex>

namespace tilepipe::python {

namespace {

using T = tilepipe::TILEPIPE_PY_DTYPE;

template <class E, int R>
tensor_view<E, R> view_of(const tensor_arg& t) {
  tensor_view<E, R> v;
  v.data = static_cast<E*>(t.data);
  for (int d = 0; d < R; ++d) v.shape[d] = t.shape[d], v.stride[d] = t.stride[d];
  v.on_gpu = t.on_gpu;
  return v;
}

/// The device of the tensors. The interpreter is shared by the process: its launches are
/// serialised (a JAX CPU computation and a Python thread may call at once).
const device& device_of(const tensor_arg& t) {
  if (!t.on_gpu) {
    static const device interpreter = device::open(backend::interpret);
    return interpreter;
  }
  static std::mutex lock;
  static std::vector<std::unique_ptr<device>> gpus;
  const std::lock_guard<std::mutex> guard(lock);
  if (gpus.size() <= static_cast<std::size_t>(t.device)) gpus.resize(t.device + 1);
  if (!gpus[t.device]) gpus[t.device] = std::make_unique<device>(device::open_gpu(t.device));
  return *gpus[t.device];
}

std::mutex& interpreter_lock() {
  static std::mutex m;
  return m;
}

/// Runs `launch` on the tensors' device; interpreter launches one at a time.
template <class F>
void on_device(const tensor_arg& t, F&& launch) {
  const device& dev = device_of(t);
  if (dev.is_gpu()) return launch(dev);
  const std::lock_guard<std::mutex> guard(interpreter_lock());
  launch(dev);
}

}  // namespace

#if TILEPIPE_PY_KERNEL == 1  // attention
void TILEPIPE_PY_ENTRY(const attention_args& a) {
  if (a.q.numel() == 0) return;  // no query rows: nothing to write (an empty array's strides may be anything)
  attention_options opt;
  opt.scale = a.softmax_scale;
  opt.causal = a.causal;
  opt.window_left = a.window_left;
  opt.window_right = a.window_right;
  opt.lse = a.lse.present() ? static_cast<float*>(a.lse.data) : nullptr;
  opt.stream = a.stream;
  opt.seqused_k = static_cast<const int*>(a.seqused_k.data);
  opt.page_table = static_cast<const int*>(a.page_table.data);
  opt.max_pages_per_seq = a.page_table.present() ? static_cast<int>(a.page_table.shape[1]) : 0;
  opt.num_splits = a.num_splits;
  if (a.partials.present())
    opt.partials = {static_cast<float*>(a.partials.data), static_cast<unsigned*>(a.partial_flags.data),
                    static_cast<int>(a.partials.shape[0]), a.partials.shape[1]};
  opt.k_scale = static_cast<const float*>(a.k_scale.data);
  opt.v_scale = static_cast<const float*>(a.v_scale.data);
  opt.kv_scale_per_head = (a.k_scale.present() && a.k_scale.numel() > 1) || (a.v_scale.present() && a.v_scale.numel() > 1);
  // K and V of type KV: T, or fp8 (e4m3) codes.
  auto run = [&](auto kv) {
    using KV = decltype(kv);
    on_device(a.q, [&](const device& dev) {
      if (a.cu_seqlens_q.present()) {
        const int batch = static_cast<int>(a.cu_seqlens_q.shape[0] - 1);
        // k and v without rows: the kernel reads neither (every sequence is empty there).
        attention_forward_varlen<T>(dev, view_of<T, 3>(a.q), view_of<KV, 3>(a.k), view_of<KV, 3>(a.v),
                                    view_of<T, 3>(a.out), static_cast<const int*>(a.cu_seqlens_q.data),
                                    static_cast<const int*>(a.cu_seqlens_k.data), batch, a.max_seqlen_q, opt);
      } else {
        attention_forward<T>(dev, view_of<T, 4>(a.q), view_of<KV, 4>(a.k), view_of<KV, 4>(a.v), view_of<T, 4>(a.out),
                             opt);
      }
    });
  };
  if (a.kv_fp8) run(fp8_e4m3{});
  else run(T{});
}
#elif TILEPIPE_PY_KERNEL == 5  // attention backward
void TILEPIPE_PY_ENTRY(const attention_backward_args& a) {
  const attention_args& f = a.forward;
  attention_backward_options opt;
  opt.scale = f.softmax_scale;
  opt.causal = f.causal;
  opt.window_left = f.window_left;
  opt.window_right = f.window_right;
  opt.workspace = static_cast<float*>(a.workspace.data);
  opt.stream = f.stream;
  on_device(f.q, [&](const device& dev) {
    if (f.cu_seqlens_q.present()) {
      const int batch = static_cast<int>(f.cu_seqlens_q.shape[0] - 1);
      attention_backward_varlen<T>(dev, view_of<T, 3>(f.q), view_of<T, 3>(f.k), view_of<T, 3>(f.v), view_of<T, 3>(f.out),
                                   view_of<T, 3>(a.d_out), view_of<float, 2>(f.lse), view_of<T, 3>(a.dq),
                                   view_of<T, 3>(a.dk), view_of<T, 3>(a.dv), static_cast<const int*>(f.cu_seqlens_q.data),
                                   static_cast<const int*>(f.cu_seqlens_k.data), batch, f.max_seqlen_q, a.max_seqlen_k,
                                   opt);
    } else {
      attention_backward<T>(dev, view_of<T, 4>(f.q), view_of<T, 4>(f.k), view_of<T, 4>(f.v), view_of<T, 4>(f.out),
                            view_of<T, 4>(a.d_out), view_of<float, 3>(f.lse), view_of<T, 4>(a.dq), view_of<T, 4>(a.dk),
                            view_of<T, 4>(a.dv), opt);
    }
  });
}
#elif TILEPIPE_PY_KERNEL == 2  // grouped matmul
void TILEPIPE_PY_ENTRY(const grouped_mm_args& a) {
  if (a.a.numel() == 0) return;  // no rows: nothing to write
  const std::int64_t K = a.b.shape[1], N = a.b.shape[2];
  const bool kn = a.b.stride[2] == 1 || N == 1;
  tensor_view<T, 3> b = view_of<T, 3>(a.b);  // as stored: [G, K, N] or [G, N, K]
  if (!kn) b.shape[1] = N, b.shape[2] = K, b.stride[1] = a.b.stride[2], b.stride[2] = a.b.stride[1];
  const rhs_layout layout = kn ? rhs_layout::kn : rhs_layout::nk;
  grouped_matmul_options opt;
  opt.stream = a.stream;
  on_device(a.a, [&](const device& dev) {
    const auto* table = static_cast<const int*>(a.table.data);
    if (a.masked) grouped_matmul_masked<T>(dev, view_of<T, 3>(a.a), b, layout, table, view_of<T, 3>(a.out), opt);
    else grouped_matmul<T>(dev, view_of<T, 2>(a.a), b, layout, table, view_of<T, 2>(a.out), opt);
  });
}
#elif TILEPIPE_PY_KERNEL == 3  // matmul
void TILEPIPE_PY_ENTRY(const matmul_args& a) {
  if (a.a.shape[0] == 0) return;  // no rows: nothing to write
  const std::int64_t K = a.a.shape[1], N = a.b.shape[1];
  const bool row_major = a.b.stride[1] == 1 || N == 1;
  tensor_view<T, 2> b = view_of<T, 2>(a.b);  // as stored: [K, N] or [N, K]
  if (!row_major) b.shape[0] = N, b.shape[1] = K, b.stride[0] = a.b.stride[1], b.stride[1] = a.b.stride[0];
  matmul_options opt;
  opt.bias = a.bias.present() ? a.bias.data : nullptr;
  opt.act = static_cast<tilepipe::activation>(static_cast<int>(a.act));
  opt.stream = a.stream;
  on_device(a.a, [&](const device& dev) {
    matmul<T>(dev, view_of<T, 2>(a.a), b, row_major ? b_layout::row_major : b_layout::col_major, view_of<T, 2>(a.out), opt);
  });
}
#elif TILEPIPE_PY_KERNEL == 4  // fp8 quantisation
void TILEPIPE_PY_ENTRY(const quantize_args& a) {
  quantize_options opt;
  opt.group = a.group;
  opt.stream = a.stream;
  on_device(a.x, [&](const device& dev) {
    quantize_fp8<T>(dev, view_of<T, 2>(a.x), view_of<fp8_e4m3, 2>(a.q), view_of<float, 2>(a.scales), opt);
  });
}
#elif TILEPIPE_PY_KERNEL == 6  // fp8 matmul with scales; T: the operands' fp8 type
/// A scale as tp::scaled_matmul reads it ([rows, cols], any strides): the argument as given,
/// or transposed (scale_b: torch's [1, N] and [ceil(K/128), ceil(N/128)] are tilepipe's
/// [N, 1] and [ceil(N/128), ceil(K/128)] read the other way round); one element: [1, 1].
static tensor_view<float, 2> scale_view(const tensor_arg& t, bool transposed) {
  tensor_view<float, 2> v;
  v.data = static_cast<float*>(t.data);
  v.on_gpu = t.on_gpu;
  if (t.rank != 2) {  // per tensor: one element, any rank
    v.shape = {1, 1};
    v.stride = {0, 0};
    return v;
  }
  const int r = transposed ? 1 : 0, c = 1 - r;
  v.shape = {t.shape[r], t.shape[c]};
  v.stride = {t.stride[r], t.stride[c]};
  return v;
}

void TILEPIPE_PY_ENTRY(const scaled_mm_args& a) {
  if (a.a.shape[0] == 0) return;  // no rows: nothing to write (an empty scale_a may have no data)
  const std::int64_t K = a.a.shape[1], N = a.b.shape[1];
  tensor_view<T, 2> b = view_of<T, 2>(a.b);  // [K, N] column-major, read as the [N, K] row-major it transposes
  b.shape = {N, K};
  b.stride = {a.b.stride[1], a.b.stride[0]};
  scaled_matmul_options opt;
  opt.bias = a.bias.present() ? a.bias.data : nullptr;
  opt.promote = a.promote;
  opt.stream = a.stream;
  const fp8_scaling scaling = static_cast<fp8_scaling>(static_cast<int>(a.mode));
  const tensor_view<float, 2> sa = scale_view(a.scale_a, false), sb = scale_view(a.scale_b, true);
  on_device(a.a, [&](const device& dev) {
    if (a.out.type == dtype::bf16) scaled_matmul<T, T, bf16>(dev, view_of<T, 2>(a.a), b, view_of<bf16, 2>(a.out), scaling, sa, sb, opt);
    else scaled_matmul<T, T, float>(dev, view_of<T, 2>(a.a), b, view_of<float, 2>(a.out), scaling, sa, sb, opt);
  });
}
#elif TILEPIPE_PY_KERNEL == 7  // fp8 grouped matmul with scales; T: the operands' fp8 type
void TILEPIPE_PY_ENTRY(const scaled_grouped_mm_args& a) {
  if (a.a.numel() == 0) return;  // no rows: nothing to write (an empty scale_a may have no data)
  const std::int64_t G = a.b.shape[0], K = a.b.shape[1], N = a.b.shape[2];
  tensor_view<T, 3> b = view_of<T, 3>(a.b);  // [G, K, N] with K contiguous, read as the [G, N, K] it transposes
  b.shape = {G, N, K};
  b.stride = {a.b.stride[0], a.b.stride[2], a.b.stride[1]};
  scaled_grouped_matmul_options opt;
  opt.stream = a.stream;
  const auto* table = static_cast<const int*>(a.table.data);
  // The scales' ranks choose the recipe (tp::scaled_grouped_matmul's overloads).
  on_device(a.a, [&](const device& dev) {
    if (a.mode == scaled_mm_mode::block) {
      if (a.masked)
        scaled_grouped_matmul_masked<T>(dev, view_of<T, 3>(a.a), b, view_of<float, 3>(a.scale_a),
                                        view_of<float, 3>(a.scale_b), table, view_of<bf16, 3>(a.out), opt);
      else
        scaled_grouped_matmul<T>(dev, view_of<T, 2>(a.a), b, view_of<float, 2>(a.scale_a), view_of<float, 3>(a.scale_b),
                                 table, view_of<bf16, 2>(a.out), opt);
    } else if (a.masked) {
      scaled_grouped_matmul_masked<T>(dev, view_of<T, 3>(a.a), b, view_of<float, 2>(a.scale_a),
                                      view_of<float, 2>(a.scale_b), table, view_of<bf16, 3>(a.out), opt);
    } else {
      scaled_grouped_matmul<T>(dev, view_of<T, 2>(a.a), b, view_of<float, 1>(a.scale_a), view_of<float, 2>(a.scale_b),
                               table, view_of<bf16, 2>(a.out), opt);
    }
  });
}
#elif TILEPIPE_PY_KERNEL == 0  // what the bindings ask of the build and the GPUs
bool built_with_cuda() { return TP_HAS_CUDA_COMPILER; }
split_workspace_shape attention_split_workspace(const tensor_arg& q, int head_dim) {
  return {attention_partial_slots(device_of(q)), attention_partial_floats(head_dim)};
}
void prepare_gpu(int ordinal) {
  if (!TP_HAS_CUDA_COMPILER)
    throw unsupported_error("tilepipe: this build has no GPU kernels (nvcc was not found when it was built); "
                            "reinstall with CUDA 13's nvcc on PATH, or pass host arrays (the interpreter)");
  tensor_arg t;
  t.on_gpu = true, t.device = ordinal;
  (void)device_of(t);
}
#endif

}  // namespace tilepipe::python
