// The Python extension's interface between its bindings and its kernels, in plain C++.
//
// Two front ends fill these structures: the nanobind module (ext.cpp: PyTorch, NumPy, CuPy
// and other DLPack producers) and the XLA FFI handlers (xla.cpp: JAX). Both call the same
// checks (checks.cpp), which name the Python argument that is wrong, and the same launchers
// (kernels.cu, compiled by nvcc for the GPU and the interpreter, or by the C++ compiler for
// the interpreter alone). Nothing here includes tilepipe's headers, so the front ends
// compile with the host compiler alone and never see the two passes of nvcc.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace tilepipe::python {

enum class dtype { bf16, f16, f32, i32, u8, other };  // u8: also fp8 (e4m3) as its bits

const char* dtype_name(dtype t);

/// A tensor as the binding received it: strides in elements, any rank up to 4.
struct tensor_arg {
  const char* name = "";  // the Python argument, for messages
  void* data = nullptr;
  dtype type = dtype::other;
  std::string type_name;  // the framework's name of the element type, for messages
  bool on_gpu = false;
  int device = 0;  // CUDA ordinal (GPU tensors)
  int rank = -1;   // -1: the argument was None
  std::int64_t shape[4] = {};
  std::int64_t stride[4] = {};

  bool present() const { return rank >= 0; }
  std::int64_t numel() const;
  /// "[2, 1, 8, 128]"
  std::string shape_text() const;
};

/// A wrong argument: the message names it. The bindings raise ValueError.
struct argument_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
/// An argument of the wrong element type or rank. The bindings raise TypeError.
struct argument_type_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
/// A feature tilepipe does not have (a head dim, an output dtype). NotImplementedError.
struct unsupported_error : std::logic_error {
  using std::logic_error::logic_error;
};

struct attention_args {
  const char* op = "tilepipe.attention";  // the caller's name, for messages
  tensor_arg q, k, v, out, lse;          // [B, S, H, D] or varlen [total, H, D]; lse optional
  tensor_arg cu_seqlens_q, cu_seqlens_k;  // varlen: int32 [batch + 1], or absent
  int max_seqlen_q = -1;                  // varlen: bound on the query lengths (-1: none given)
  float softmax_scale = 0.0f;             // 0: 1 / sqrt(head dim)
  bool causal = false;
  int window_left = -1, window_right = -1;
  void* stream = nullptr;                 // cudaStream_t for GPU tensors
  // A KV cache (FlashAttention-3's names): seqused_k int32 [batch], page_table int32
  // [batch, max_pages] with k and v as pages [num_pages, page_size, heads, head_dim]; or absent.
  tensor_arg seqused_k, page_table;
  // Split-KV of the decode path: num_splits (0: the kernel's choice) and its workspace,
  // partials f32 [slots, slot_floats] and partial_flags int32 [slots] (zero), or absent (no split).
  int num_splits = 0;
  tensor_arg partials, partial_flags;
  // An fp8 cache: k and v float8_e4m3fn (as uint8, their bits) when kv_fp8; k_scale and v_scale
  // float32 with one value or one per KV head (absent: 1), K = k * k_scale, V = v * v_scale.
  bool kv_fp8 = false;
  tensor_arg k_scale, v_scale;
};

/// The gradients of attention: the forward's arguments (out its output, lse its LSE, both
/// required), d_out the gradient of out, and dq, dk, dv shaped as q, k, v. workspace: f32 with
/// lse's element count (rowsum(d_out * out) per query row), contiguous.
struct attention_backward_args {
  attention_args forward;  // q, k, v, out, lse, the offsets, max_seqlen_q, scale, mask, stream
  tensor_arg d_out, dq, dk, dv, workspace;
  int max_seqlen_k = -1;  // varlen: bound on the key lengths (-1: found from host offsets)
};

struct grouped_mm_args {
  tensor_arg a, b, out;  // a [M, K] (offsets) or [G, Mmax, K] (masked); b [G, K, N] logical; out like a with N
  tensor_arg table;      // offs: int32 [G] cumulative row ends; masked_m: int32 [G] valid rows per group
  bool masked = false;
  void* stream = nullptr;
};

enum class activation { none, relu, gelu, gelu_tanh, silu };

struct matmul_args {
  tensor_arg a, b, bias, out;  // a [M, K], b [K, N] logical, bias [N] or absent, out [M, N]
  activation act = activation::none;
  void* stream = nullptr;
};

struct quantize_args {
  tensor_arg x, q, scales;  // x [M, K] (bf16 / f16); q [M, K] e4m3 as uint8 bits; scales f32 [M, groups]
  int group = 128;          // columns per scale: 128, or 0 for one scale per row
  void* stream = nullptr;
};

/// The fp8 formats of tilepipe.scaled_mm's operands (their bits arrive as uint8).
enum class fp8_format { e4m3, e5m2 };
/// How scale_a and scale_b apply (tp::fp8_scaling's order); check() finds it from their shapes.
enum class scaled_mm_mode { per_tensor, row_wise, block };

/// torch._scaled_mm's operation: out = (a b) * scales + bias.
struct scaled_mm_args {
  tensor_arg a, b;                // a [M, K] row-major, b [K, N] column-major (K contiguous): fp8 as uint8 bits
  fp8_format a_format = fp8_format::e4m3, b_format = fp8_format::e4m3;
  tensor_arg scale_a, scale_b;    // f32: one element each, [M, 1] and [1, N], or [M, ceil(K/128)] and
                                  // [ceil(K/128), ceil(N/128)] (torch's shapes; any strides)
  tensor_arg bias, out;           // bias [N] of out's type or absent; out [M, N] bf16 or f32
  bool promote = true;            // per-tensor / row-wise: promote the sums every 128 of K (!use_fast_accum)
  scaled_mm_mode mode = scaled_mm_mode::per_tensor;  // set by check()
  void* stream = nullptr;
};

/// torch._scaled_grouped_mm's operation: the fp8 grouped (MoE) matmul with row-wise or block scales.
struct scaled_grouped_mm_args {
  tensor_arg a, b;                // a [M, K] (offs) or [G, Mmax, K] (masked), row-major; b [G, K, N] logical, K
                                  // contiguous (the transpose of [G, N, K] weights): fp8 as uint8 bits
  fp8_format a_format = fp8_format::e4m3, b_format = fp8_format::e4m3;
  tensor_arg scale_a, scale_b;    // f32; row-wise: [M] (masked: [G, Mmax]) and [G, N]; block: [M, ceil(K/128)]
                                  // (masked: [G, Mmax, ceil(K/128)]) and [G, ceil(N/128), ceil(K/128)]
  tensor_arg table;               // offs: int32 [G] cumulative row ends; masked_m: int32 [G] valid rows per group
  tensor_arg out;                 // bf16, a's shape with N for K
  bool masked = false;
  bool promote = false;           // !use_fast_accum: block scales always promote; row-wise cannot (check() raises)
  scaled_mm_mode mode = scaled_mm_mode::row_wise;  // set by check(): row_wise or block
  void* stream = nullptr;
};

/// Checks everything the host can know about the call (shapes, element types, strides,
/// alignment, devices, group tables and offsets in host memory) and throws an
/// argument_error naming the argument; afterwards the kernel's own checks cannot fail on
/// the arguments.
void check(attention_args& a);
void check(attention_backward_args& a);
void check(grouped_mm_args& a);
void check(matmul_args& a);
void check(quantize_args& a);
void check(scaled_mm_args& a);
void check(scaled_grouped_mm_args& a);

/// Launch on the tensors' device: the GPU (asynchronously, on `stream`) or the interpreter.
/// The arguments must have passed check().
void run(const attention_args& a);
void run(const attention_backward_args& a);
void run(const grouped_mm_args& a);
void run(const matmul_args& a);
void run(const quantize_args& a);
void run(const scaled_mm_args& a);
void run(const scaled_grouped_mm_args& a);

/// Whether this build has the GPU kernels (nvcc was found) besides the interpreter.
bool built_with_cuda();
/// The split-KV workspace the decode path needs on q's device at a head dim: slots x floats.
struct split_workspace_shape {
  int slots;
  std::int64_t slot_floats;
};
split_workspace_shape attention_split_workspace(const tensor_arg& q, int head_dim);
/// Makes GPU `ordinal` ready for launches (its properties and failure channel): the
/// bindings call it outside CUDA-graph capture, at the first sight of a device.
void prepare_gpu(int ordinal);

// One launcher per kernel family and element type (kernels.cu, one translation unit each).
void run_attention_bf16(const attention_args&);
void run_attention_f16(const attention_args&);
void run_attention_backward_bf16(const attention_backward_args&);
void run_attention_backward_f16(const attention_backward_args&);
void run_grouped_mm_bf16(const grouped_mm_args&);
void run_grouped_mm_f16(const grouped_mm_args&);
void run_matmul_bf16(const matmul_args&);
void run_matmul_f16(const matmul_args&);
void run_quantize_bf16(const quantize_args&);
void run_quantize_f16(const quantize_args&);
// fp8 e4m3 x e4m3 (bf16 and f32 output): the e5m2 pairs tp::scaled_matmul also has are left
// out of the extension (each pair is as many kernels again: docs/python.md).
void run_scaled_mm_fp8_e4m3(const scaled_mm_args&);
void run_scaled_grouped_mm_fp8_e4m3(const scaled_grouped_mm_args&);

}  // namespace tilepipe::python
