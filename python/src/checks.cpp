// What the host can check before a launch, with messages that name the Python argument.
// A device-side check that fails on the GPU traps and leaves the process's CUDA context
// unusable (fatal for a PyTorch or JAX process), so everything the host can know is checked
// here: element types, ranks, shapes, devices, the TMA layout rules (last dimension
// contiguous, other strides and the data 16-byte aligned; extent-1 dimensions excepted,
// as the library's tensor maps treat them), and group tables and sequence offsets that
// live in host memory. Tables in GPU memory cannot be read without a synchronisation
// (illegal in a CUDA-graph capture); the kernels clip what they read from them.
#include "ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <initializer_list>
#include <utility>

namespace tilepipe::python {

const char* dtype_name(dtype t) {
  switch (t) {
    case dtype::bf16: return "bfloat16";
    case dtype::f16: return "float16";
    case dtype::f32: return "float32";
    case dtype::i32: return "int32";
    case dtype::u8: return "uint8";
    default: return "another type";
  }
}

std::int64_t tensor_arg::numel() const {
  std::int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= shape[d];
  return n;
}

std::string tensor_arg::shape_text() const {
  std::string s = "[";
  for (int d = 0; d < rank; ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

namespace {

template <class E = argument_error>
[[noreturn]] void fail(const char* fmt, ...) {
  char buf[1024];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  throw E(buf);
}

const char* where(const tensor_arg& t) { return t.on_gpu ? "a GPU" : "host memory"; }

void require_rank(const char* op, const tensor_arg& t, int rank, const char* layout) {
  if (t.rank != rank)
    fail<argument_type_error>("%s: %s must have %d dimensions (%s), got shape %s", op, t.name, rank, layout,
                              t.shape_text().c_str());
}

void require_type(const char* op, const tensor_arg& t, dtype type) {
  if (t.type != type)
    fail<argument_type_error>("%s: %s must be %s, got %s", op, t.name, dtype_name(type), t.type_name.c_str());
}

/// bf16 or f16, and the same as `like` when given.
void require_16bit(const char* op, const tensor_arg& t, const tensor_arg* like = nullptr) {
  if (t.type != dtype::bf16 && t.type != dtype::f16)
    fail<argument_type_error>("%s: %s must be bfloat16 or float16, got %s", op, t.name, t.type_name.c_str());
  if (like && t.type != like->type)
    fail<argument_type_error>("%s: %s is %s but %s is %s; they must have the same dtype", op, t.name, t.type_name.c_str(),
                              like->name, like->type_name.c_str());
}

/// Every present tensor on the device of `first`, and GPU tensors only in a build with the GPU kernels.
void require_same_device(const char* op, std::initializer_list<const tensor_arg*> ts) {
  const tensor_arg* first = *ts.begin();
  if (first->on_gpu && !built_with_cuda())
    fail<unsupported_error>("%s: %s is on a GPU, but this build of tilepipe has no GPU kernels (nvcc was not found "
                            "when it was built); reinstall with CUDA 13's nvcc on PATH, or pass host arrays (the "
                            "interpreter)",
                            op, first->name);
  for (const tensor_arg* t : ts) {
    if (!t->present()) continue;
    if (t->on_gpu != first->on_gpu || (t->on_gpu && t->device != first->device))
      fail("%s: %s is on %s%s but %s is on %s%s; every tensor of a call must be on the same device", op, t->name,
           where(*t), t->on_gpu ? (" " + std::to_string(t->device)).c_str() : "", first->name, where(*first),
           first->on_gpu ? (" " + std::to_string(first->device)).c_str() : "");
  }
}

std::int64_t elem_bytes(dtype t) { return t == dtype::u8 ? 1 : t == dtype::bf16 || t == dtype::f16 ? 2 : 4; }

/// The stride tilepipe uses for dimension d: an extent-1 dimension is never stepped, so any
/// stride a framework gives it is accepted (host/tensor_map.cuh, effective_stride).
std::int64_t effective_stride(const tensor_arg& t, int d) {
  if (t.shape[d] != 1) return t.stride[d];
  if (d == t.rank - 1) return 1;
  const std::int64_t inner = effective_stride(t, d + 1) * t.shape[d + 1];
  const std::int64_t per16 = 16 / elem_bytes(t.type);
  return (inner + per16 - 1) / per16 * per16;
}

/// The layout TMA reads and writes: last dimension contiguous, other strides multiples of
/// 16 bytes, data 16-byte aligned. An empty tensor is never touched.
void require_tma_layout(const char* op, const tensor_arg& t) {
  if (t.numel() == 0) return;
  const std::int64_t e = elem_bytes(t.type);
  if (effective_stride(t, t.rank - 1) != 1)
    fail("%s: %s's last dimension must be contiguous (stride 1, got %lld); pass %s.contiguous() or a copy", op, t.name,
         static_cast<long long>(t.stride[t.rank - 1]), t.name);
  for (int d = 0; d < t.rank - 1; ++d) {
    const std::int64_t s = effective_stride(t, d);
    if (s <= 0 || s * e % 16 != 0)
      fail("%s: %s's stride in dimension %d is %lld elements (%lld bytes), which is not a positive multiple of 16 "
           "bytes; tilepipe moves %s with TMA, which needs that (shape %s: the sizes of the inner dimensions must "
           "make rows of a multiple of 16 bytes, or pass a padded copy)",
           op, t.name, d, static_cast<long long>(s), static_cast<long long>(s * e), t.name, t.shape_text().c_str());
  }
  if (reinterpret_cast<std::uintptr_t>(t.data) % 16 != 0)
    fail("%s: %s's data is not 16-byte aligned (TMA needs it); a view that starts inside a row can cause this: pass "
         "a copy",
         op, t.name);
}

void require_int32_vector(const char* op, const tensor_arg& t, std::int64_t length, const char* what) {
  require_type(op, t, dtype::i32);
  if (t.rank != 1) fail<argument_type_error>("%s: %s must be one-dimensional, got shape %s", op, t.name, t.shape_text().c_str());
  if (t.shape[0] != length)
    fail("%s: %s has %lld entries, expected %lld (%s)", op, t.name, static_cast<long long>(t.shape[0]),
         static_cast<long long>(length), what);
  if (t.shape[0] > 1 && t.stride[0] != 1)
    fail("%s: %s must be contiguous (stride 1, got %lld)", op, t.name, static_cast<long long>(t.stride[0]));
}

void require_int32_range(const char* op, const tensor_arg& t, std::int64_t value) {
  if (value > 0x7fffffffLL)
    fail("%s: %s's shape %s exceeds the 32-bit sizes the kernel uses", op, t.name, t.shape_text().c_str());
}

const std::int32_t* host_ints(const tensor_arg& t) {
  return t.on_gpu || !t.data ? nullptr : static_cast<const std::int32_t*>(t.data);  // null data: a trace-time placeholder
}

}  // namespace

void check(attention_args& a) {
  const char* op = a.op;
  const bool varlen = a.cu_seqlens_q.present() || a.cu_seqlens_k.present();
  const int rank = varlen ? 3 : 4;
  const char* layout = varlen ? "[total, heads, head_dim] with cu_seqlens" : "[batch, seqlen, heads, head_dim]";
  if (varlen && !(a.cu_seqlens_q.present() && a.cu_seqlens_k.present()))
    fail("%s: varlen attention needs both cu_seqlens_q and cu_seqlens_k (%s was given alone)", op,
         a.cu_seqlens_q.present() ? "cu_seqlens_q" : "cu_seqlens_k");
  for (tensor_arg* t : {&a.q, &a.k, &a.v, &a.out}) require_rank(op, *t, rank, layout);
  require_16bit(op, a.q), require_16bit(op, a.out, &a.q);
  if (a.kv_fp8) {
    require_type(op, a.k, dtype::u8), require_type(op, a.v, dtype::u8);  // float8_e4m3fn, passed as its bits
  } else {
    require_16bit(op, a.k, &a.q), require_16bit(op, a.v, &a.q);
    if (a.k_scale.present() || a.v_scale.present())
      fail("%s: k_scale and v_scale dequantise float8_e4m3fn k and v; k and v are %s", op, a.k.type_name.c_str());
  }
  require_same_device(op, {&a.q, &a.k, &a.v, &a.out, &a.lse, &a.cu_seqlens_q, &a.cu_seqlens_k, &a.seqused_k,
                           &a.page_table, &a.partials, &a.partial_flags, &a.k_scale, &a.v_scale});
  const int h = rank - 2, d = rank - 1;  // the heads' and the head dim's dimension
  const std::int64_t D = a.q.shape[d], hq = a.q.shape[h], hkv = a.k.shape[h];
  if (D != 64 && D != 128 && D != 256)
    fail<unsupported_error>("%s: head dim %lld (the last dimension of q, shape %s) is not supported; tilepipe has "
                            "64, 128 and 256",
                            op, static_cast<long long>(D), a.q.shape_text().c_str());
  if (a.k.shape[d] != D)
    fail("%s: k's head dim is %lld but q's is %lld (shapes %s and %s)", op, static_cast<long long>(a.k.shape[d]),
         static_cast<long long>(D), a.k.shape_text().c_str(), a.q.shape_text().c_str());
  if (a.v.shape[d] != D)
    fail<unsupported_error>("%s: v's head dim %lld differs from q's and k's %lld; tilepipe needs them equal", op,
                            static_cast<long long>(a.v.shape[d]), static_cast<long long>(D));
  for (int i = 0; i < rank - 1; ++i)
    if (a.v.shape[i] != a.k.shape[i])
      fail("%s: k and v must have the same shape but k is %s and v is %s", op, a.k.shape_text().c_str(),
           a.v.shape_text().c_str());
  if (hkv < 1 || hq % hkv != 0)
    fail("%s: q has %lld heads, which is not a multiple of k's and v's %lld (grouped-query attention needs "
         "heads_q %% heads_kv == 0)",
         op, static_cast<long long>(hq), static_cast<long long>(hkv));
  const bool paged = a.page_table.present();
  if (!varlen && !paged && a.k.shape[0] != a.q.shape[0])
    fail("%s: q has batch %lld but k and v have %lld", op, static_cast<long long>(a.q.shape[0]),
         static_cast<long long>(a.k.shape[0]));
  if (a.seqused_k.present() || paged) {
    if (varlen)
      fail<unsupported_error>("%s: seqused_k / page_table with cu_seqlens is not supported from Python yet; pass q "
                              "as [batch, seqlen_q, heads, head_dim]", op);
    if (!a.seqused_k.present()) fail("%s: page_table needs seqused_k (the keys each sequence uses)", op);
    require_int32_vector(op, a.seqused_k, a.q.shape[0], "one per sequence of q");
    if (paged) {
      require_type(op, a.page_table, dtype::i32);
      if (a.page_table.rank != 2 || a.page_table.shape[0] != a.q.shape[0] || a.page_table.shape[1] < 1)
        fail("%s: page_table must be int32 [batch, max_pages_per_seq] with batch = %lld, got shape %s", op,
             static_cast<long long>(a.q.shape[0]), a.page_table.shape_text().c_str());
      if (a.page_table.stride[1] != 1 && a.page_table.shape[1] > 1)
        fail("%s: page_table's rows must be contiguous (stride 1 along pages)", op);
      const std::int64_t page = a.k.shape[1];
      if (page < 16 || page > 256 || (page & (page - 1)) != 0)
        fail("%s: the page size (k's second dimension, %lld) must be a power of two from 16 to 256", op,
             static_cast<long long>(page));
    }
  }
  if (a.kv_fp8) {
    std::int64_t counts[2] = {1, 1};
    int i = 0;
    for (tensor_arg* s : {&a.k_scale, &a.v_scale}) {
      if (s->present()) {
        require_type(op, *s, dtype::f32);
        counts[i] = s->numel();
        if (s->rank > 1 || (counts[i] != 1 && counts[i] != hkv) || (s->rank == 1 && s->shape[0] > 1 && s->stride[0] != 1))
          fail("%s: %s must be float32 with one value (per tensor) or heads_kv = %lld values (per KV head), "
               "contiguous; got shape %s",
               op, s->name, static_cast<long long>(hkv), s->shape_text().c_str());
      }
      ++i;
    }
    if (a.k_scale.present() && a.v_scale.present() && counts[0] != counts[1])
      fail("%s: k_scale has %lld values and v_scale %lld: both per tensor (1) or both per KV head (%lld)", op,
           static_cast<long long>(counts[0]), static_cast<long long>(counts[1]), static_cast<long long>(hkv));
  }
  if (a.num_splits < 0 || a.num_splits > 64) fail("%s: num_splits must be 0 (choose) to 64, got %d", op, a.num_splits);
  if (a.partials.present()) {
    require_type(op, a.partials, dtype::f32), require_type(op, a.partial_flags, dtype::i32);
    if (a.partials.rank != 2 || a.partial_flags.rank != 1 || a.partial_flags.shape[0] != a.partials.shape[0] ||
        a.partials.shape[1] % 4 != 0 || a.partials.stride[1] != 1 || a.partials.stride[0] != a.partials.shape[1])
      fail("%s: the split-KV workspace must be contiguous float32 [slots, slot_floats] (slot_floats a multiple of "
           "4) with int32 [slots] flags, got %s and %s",
           op, a.partials.shape_text().c_str(), a.partial_flags.shape_text().c_str());
  }
  for (int i = 0; i < rank; ++i)
    if (a.out.shape[i] != a.q.shape[i])
      fail("%s: out must have q's shape %s, got %s", op, a.q.shape_text().c_str(), a.out.shape_text().c_str());
  for (tensor_arg* t : {&a.q, &a.k, &a.v}) require_int32_range(op, *t, t->shape[rank - 3]);
  for (tensor_arg* t : {&a.q, &a.k, &a.v, &a.out}) require_tma_layout(op, *t);
  if (a.window_left < -1 || a.window_right < -1)
    fail("%s: window_size must be (left, right) with -1 for unbounded or a size >= 0, got (%d, %d)", op, a.window_left,
         a.window_right);
  if (!std::isfinite(a.softmax_scale) || a.softmax_scale == 0.0f)
    fail("%s: softmax_scale must be a finite nonzero number, got %g", op, static_cast<double>(a.softmax_scale));

  if (varlen) {
    if (a.cu_seqlens_q.rank != 1 || a.cu_seqlens_q.shape[0] < 1)
      fail("%s: cu_seqlens_q must be a one-dimensional int32 tensor of batch + 1 offsets, got shape %s", op,
           a.cu_seqlens_q.shape_text().c_str());
    const std::int64_t batch = a.cu_seqlens_q.shape[0] - 1;
    require_int32_vector(op, a.cu_seqlens_q, batch + 1, "batch + 1 offsets");
    require_int32_vector(op, a.cu_seqlens_k, batch + 1, "as many as cu_seqlens_q");
    const std::int64_t total_q = a.q.shape[0], total_k = a.k.shape[0];
    const std::int32_t *cq = host_ints(a.cu_seqlens_q), *ck = host_ints(a.cu_seqlens_k);
    if (cq && ck) {  // in host memory: checked entry by entry, and max_seqlen_q found if not given
      int longest = 0;
      for (std::int64_t b = 0; b <= batch; ++b) {
        if (cq[b] < 0 || cq[b] > total_q || (b > 0 && cq[b] < cq[b - 1]))
          fail("%s: cu_seqlens_q[%lld] = %d: the offsets must not decrease and must lie in [0, %lld] (q has %lld "
               "rows)",
               op, static_cast<long long>(b), cq[b], static_cast<long long>(total_q), static_cast<long long>(total_q));
        if (ck[b] < 0 || ck[b] > total_k || (b > 0 && ck[b] < ck[b - 1]))
          fail("%s: cu_seqlens_k[%lld] = %d: the offsets must not decrease and must lie in [0, %lld] (k has %lld "
               "rows)",
               op, static_cast<long long>(b), ck[b], static_cast<long long>(total_k), static_cast<long long>(total_k));
        if (b > 0 && cq[b] - cq[b - 1] > longest) longest = cq[b] - cq[b - 1];
      }
      if (a.max_seqlen_q < 0) a.max_seqlen_q = longest;
      else if (longest > a.max_seqlen_q)
        fail("%s: sequence lengths in cu_seqlens_q reach %d, more than max_seqlen_q = %d", op, longest, a.max_seqlen_q);
    } else if (a.max_seqlen_q < 0) {
      fail("%s: max_seqlen_q is required with cu_seqlens_q on a GPU (tilepipe does not read device memory on the "
           "host: that would synchronise the stream)",
           op);
    }
    if (a.lse.present()) {
      require_type(op, a.lse, dtype::f32);
      if (a.lse.rank != 2 || a.lse.shape[0] != hq || a.lse.shape[1] != total_q)
        fail("%s: lse must be [heads, total_q] = [%lld, %lld], got %s", op, static_cast<long long>(hq),
             static_cast<long long>(total_q), a.lse.shape_text().c_str());
    }
  } else if (a.lse.present()) {
    require_type(op, a.lse, dtype::f32);
    if (a.lse.rank != 3 || a.lse.shape[0] != a.q.shape[0] || a.lse.shape[1] != hq || a.lse.shape[2] != a.q.shape[1])
      fail("%s: lse must be [batch, heads, seqlen_q] = [%lld, %lld, %lld], got %s", op,
           static_cast<long long>(a.q.shape[0]), static_cast<long long>(hq), static_cast<long long>(a.q.shape[1]),
           a.lse.shape_text().c_str());
  }
  if (a.lse.present() && a.lse.numel() > 0) {
    const std::int64_t inner = a.lse.rank == 3 ? a.lse.shape[2] : a.lse.shape[1];
    bool contiguous = a.lse.stride[a.lse.rank - 1] == 1 || inner == 1;
    if (a.lse.rank == 3) contiguous = contiguous && (a.lse.stride[1] == inner || a.lse.shape[1] == 1) &&
                                      (a.lse.stride[0] == a.lse.shape[1] * inner || a.lse.shape[0] == 1);
    else contiguous = contiguous && (a.lse.stride[0] == inner || a.lse.shape[0] == 1);
    if (!contiguous) fail("%s: lse must be contiguous", op);
  }
}

void check(attention_backward_args& a) {
  attention_args& f = a.forward;
  f.op = "tilepipe.attention_backward";
  const char* op = f.op;
  if (!f.lse.present()) fail("%s: lse (the forward's log-sum-exp) is required", op);
  check(f);
  const bool varlen = f.cu_seqlens_q.present();
  const int rank = varlen ? 3 : 4;
  for (tensor_arg* t : {&a.d_out, &a.dq, &a.dk, &a.dv}) require_rank(op, *t, rank, "the shape of q (d_out, dq) or k (dk, dv)");
  require_16bit(op, a.d_out, &f.q), require_16bit(op, a.dq, &f.q), require_16bit(op, a.dk, &f.q), require_16bit(op, a.dv, &f.q);
  require_same_device(op, {&f.q, &a.d_out, &a.dq, &a.dk, &a.dv, &a.workspace});
  for (int i = 0; i < rank; ++i) {
    for (const tensor_arg* t : {&a.d_out, &a.dq})
      if (t->shape[i] != f.q.shape[i])
        fail("%s: %s must have q's shape %s, got %s", op, t->name, f.q.shape_text().c_str(), t->shape_text().c_str());
    for (const tensor_arg* t : {&a.dk, &a.dv})
      if (t->shape[i] != f.k.shape[i])
        fail("%s: %s must have k's shape %s, got %s", op, t->name, f.k.shape_text().c_str(), t->shape_text().c_str());
  }
  for (tensor_arg* t : {&a.d_out, &a.dq, &a.dk, &a.dv}) require_tma_layout(op, *t);
  if (!a.workspace.present()) fail("%s: workspace (float32, lse's size) is required", op);
  require_type(op, a.workspace, dtype::f32);
  if (a.workspace.numel() != f.lse.numel() ||
      (a.workspace.numel() > 1 && a.workspace.stride[a.workspace.rank - 1] != 1))
    fail("%s: workspace must be a contiguous float32 array of lse's %lld elements, got shape %s", op,
         static_cast<long long>(f.lse.numel()), a.workspace.shape_text().c_str());
  if (varlen) {
    if (const std::int32_t* ck = host_ints(f.cu_seqlens_k)) {
      int longest = 0;
      for (std::int64_t b = 1; b < f.cu_seqlens_k.shape[0]; ++b) longest = std::max(longest, ck[b] - ck[b - 1]);
      if (a.max_seqlen_k < 0) a.max_seqlen_k = longest;
      else if (longest > a.max_seqlen_k)
        fail("%s: sequence lengths in cu_seqlens_k reach %d, more than max_seqlen_k = %d", op, longest, a.max_seqlen_k);
    } else if (a.max_seqlen_k < 0) {
      fail("%s: max_seqlen_k is required with cu_seqlens_k on a GPU (tilepipe does not read device memory on the "
           "host: that would synchronise the stream)",
           op);
    }
  }
}

/// A grouped matmul's group table where the host holds it (a device table only the kernel
/// reads): masked counts in [0, rows per group of lhs], otherwise cumulative row ends that do
/// not decrease and end at lhs's rows.
void check_group_table(const char* op, const tensor_arg& table, bool masked, std::int64_t groups,
                       const tensor_arg& lhs, std::int64_t rows) {
  const std::int32_t* t = host_ints(table);
  if (!t) return;
  for (std::int64_t g = 0; g < groups; ++g) {
    if (masked && (t[g] < 0 || t[g] > lhs.shape[1]))
      fail("%s: %s[%lld] = %d is outside [0, %lld] (the rows per group of %s)", op, table.name, static_cast<long long>(g),
           t[g], static_cast<long long>(lhs.shape[1]), lhs.name);
    const std::int64_t size = masked ? 0 : t[g] - (g > 0 ? t[g - 1] : 0);
    if (!masked && size < 0)
      fail("%s: group %lld has %lld rows according to %s (cumulative row ends %d, then %d); group sizes must not be "
           "negative",
           op, static_cast<long long>(g), static_cast<long long>(size), table.name, g > 0 ? t[g - 1] : 0, t[g]);
  }
  if (!masked && t[groups - 1] != rows)
    fail("%s: the groups in %s cover %d rows but %s has %lld; tilepipe needs every row of %s in a group (slice it to the "
         "rows the groups cover)",
         op, table.name, t[groups - 1], lhs.name, static_cast<long long>(rows), lhs.name);
}

void check(grouped_mm_args& a) {
  const char* op = "tilepipe.grouped_mm";
  require_16bit(op, a.a), require_16bit(op, a.b, &a.a), require_16bit(op, a.out, &a.a);
  require_same_device(op, {&a.a, &a.b, &a.out, &a.table});
  require_rank(op, a.b, 3, "[groups, K, N]");
  const std::int64_t G = a.b.shape[0], K = a.b.shape[1], N = a.b.shape[2];
  if (G < 1 || G > 256) fail("%s: %s has %lld groups; tilepipe supports 1 to 256", op, a.b.name, static_cast<long long>(G));
  require_int32_vector(op, a.table, G, "one per group of b");
  if (a.masked) {
    require_rank(op, a.a, 3, "[groups, rows, K] in the masked layout");
    require_rank(op, a.out, 3, "[groups, rows, N]");
    if (a.a.shape[0] != G)
      fail("%s: %s has %lld groups but %s has %lld", op, a.a.name, static_cast<long long>(a.a.shape[0]), a.b.name,
           static_cast<long long>(G));
    if (a.a.shape[1] < 1) fail("%s: %s has no rows per group (shape %s)", op, a.a.name, a.a.shape_text().c_str());
  } else {
    require_rank(op, a.a, 2, "[rows, K] with offs");
    require_rank(op, a.out, 2, "[rows, N]");
  }
  const int kd = a.a.rank - 1;
  if (a.a.shape[kd] != K)
    fail("%s: %s has K = %lld (shape %s) but %s has K = %lld (shape %s, logical [groups, K, N])", op, a.a.name,
         static_cast<long long>(a.a.shape[kd]), a.a.shape_text().c_str(), a.b.name, static_cast<long long>(K),
         a.b.shape_text().c_str());
  if (K < 1 || N < 1) fail("%s: K = %lld and N = %lld must be positive", op, static_cast<long long>(K), static_cast<long long>(N));
  for (int i = 0; i < a.a.rank - 1; ++i)
    if (a.out.shape[i] != a.a.shape[i] || a.out.shape[kd] != N)
      fail("%s: out must be %s with N = %lld, got %s", op, a.a.shape_text().c_str(), static_cast<long long>(N),
           a.out.shape_text().c_str());
  const std::int64_t rows = a.masked ? a.a.shape[0] * a.a.shape[1] : a.a.shape[0];
  if (rows > 0x7fffffffLL - 256 * 128) fail("%s: %s has %lld rows, beyond the kernel's 32-bit row indices", op, a.a.name, static_cast<long long>(rows));
  // b is [G, K, N] with N contiguous, or the transpose of a contiguous [G, N, K] (nn.Linear weights).
  const bool kn = a.b.stride[2] == 1 || N == 1;
  const bool nk = !kn && (a.b.stride[1] == 1 || K == 1);
  if (!kn && !nk)
    fail("%s: %s (logical [groups, K, N] = %s) must have N contiguous (stride 1), or K contiguous as the transpose "
         "of [groups, N, K] weights (w.transpose(-2, -1)); its strides are (%lld, %lld, %lld)",
         op, a.b.name, a.b.shape_text().c_str(), static_cast<long long>(a.b.stride[0]), static_cast<long long>(a.b.stride[1]),
         static_cast<long long>(a.b.stride[2]));
  tensor_arg b_stored = a.b;  // as the kernel reads it: [G, K, N] or [G, N, K]
  if (nk) b_stored.shape[1] = N, b_stored.shape[2] = K, b_stored.stride[1] = a.b.stride[2], b_stored.stride[2] = a.b.stride[1];
  require_tma_layout(op, a.a), require_tma_layout(op, b_stored), require_tma_layout(op, a.out);
  if (a.masked) {
    for (const tensor_arg* t : {&a.a, &a.out})
      if (t->shape[0] > 1 && t->shape[1] > 1 && t->stride[0] != t->shape[1] * t->stride[1])
        fail("%s: %s's groups must lie back to back in the masked layout (stride %lld in dimension 0, expected "
             "%lld)",
             op, t->name, static_cast<long long>(t->stride[0]), static_cast<long long>(t->shape[1] * t->stride[1]));
  }
  check_group_table(op, a.table, a.masked, G, a.a, rows);
}

void check(matmul_args& a) {
  const char* op = "tilepipe.matmul";
  require_rank(op, a.a, 2, "[M, K]"), require_rank(op, a.b, 2, "[K, N]"), require_rank(op, a.out, 2, "[M, N]");
  require_16bit(op, a.a), require_16bit(op, a.b, &a.a), require_16bit(op, a.out, &a.a);
  require_same_device(op, {&a.a, &a.b, &a.out, &a.bias});
  const std::int64_t M = a.a.shape[0], K = a.a.shape[1], N = a.b.shape[1];
  if (a.b.shape[0] != K)
    fail("%s: a is %s and b is %s: a's columns (K = %lld) must equal b's rows", op, a.a.shape_text().c_str(),
         a.b.shape_text().c_str(), static_cast<long long>(K));
  if (K < 1 || N < 1) fail("%s: K = %lld and N = %lld must be positive", op, static_cast<long long>(K), static_cast<long long>(N));
  if (a.out.shape[0] != M || a.out.shape[1] != N)
    fail("%s: out must be [%lld, %lld], got %s", op, static_cast<long long>(M), static_cast<long long>(N),
         a.out.shape_text().c_str());
  for (const tensor_arg* t : {&a.a, &a.b, &a.out}) require_int32_range(op, *t, t->shape[0] > t->shape[1] ? t->shape[0] : t->shape[1]);
  const bool row_major = a.b.stride[1] == 1 || N == 1;
  const bool col_major = !row_major && (a.b.stride[0] == 1 || K == 1);
  if (!row_major && !col_major)
    fail("%s: b (%s) must have N contiguous, or K contiguous as the transpose of an [N, K] weight (w.t()); its "
         "strides are (%lld, %lld)",
         op, a.b.shape_text().c_str(), static_cast<long long>(a.b.stride[0]), static_cast<long long>(a.b.stride[1]));
  tensor_arg b_stored = a.b;
  if (col_major) b_stored.shape[0] = N, b_stored.shape[1] = K, b_stored.stride[0] = a.b.stride[1], b_stored.stride[1] = a.b.stride[0];
  require_tma_layout(op, a.a), require_tma_layout(op, b_stored), require_tma_layout(op, a.out);
  if (a.bias.present()) {
    require_16bit(op, a.bias, &a.a);
    if (a.bias.rank != 1 || a.bias.shape[0] != N)
      fail("%s: bias must be one-dimensional with N = %lld entries, got shape %s", op, static_cast<long long>(N),
           a.bias.shape_text().c_str());
    if (N > 1 && a.bias.stride[0] != 1) fail("%s: bias must be contiguous (stride 1, got %lld)", op, static_cast<long long>(a.bias.stride[0]));
  }
}

void check(quantize_args& a) {
  const char* op = "tilepipe.quantize_fp8";
  require_rank(op, a.x, 2, "[M, K]"), require_rank(op, a.q, 2, "[M, K]"), require_rank(op, a.scales, 2, "[M, groups]");
  require_16bit(op, a.x), require_type(op, a.q, dtype::u8), require_type(op, a.scales, dtype::f32);
  require_same_device(op, {&a.x, &a.q, &a.scales});
  if (a.group != 0 && a.group != 128) fail("%s: group must be 128 (1 x 128 blocks) or None (one scale per row), got %d", op, a.group);
  const std::int64_t M = a.x.shape[0], K = a.x.shape[1], groups = a.group == 0 ? 1 : (K + 127) / 128;
  if (K % 16 != 0) fail("%s: x has K = %lld columns, not a multiple of 16 (the fp8 rows must be 16-byte multiples)", op, static_cast<long long>(K));
  if (a.q.shape[0] != M || a.q.shape[1] != K) fail("%s: q must be %s like x, got %s", op, a.x.shape_text().c_str(), a.q.shape_text().c_str());
  if (a.scales.shape[0] != M || a.scales.shape[1] != groups)
    fail("%s: scales must be [%lld, %lld], got %s", op, static_cast<long long>(M), static_cast<long long>(groups), a.scales.shape_text().c_str());
  for (const tensor_arg* t : {&a.x, &a.q}) require_int32_range(op, *t, t->shape[0] > t->shape[1] ? t->shape[0] : t->shape[1]);
  require_tma_layout(op, a.x), require_tma_layout(op, a.q);
}

/// The fp8 operands the extension builds kernels for: e4m3 (cpp_note: what the C++ call takes more).
void require_e4m3(const char* op, const tensor_arg& a, fp8_format a_format, const tensor_arg& b, fp8_format b_format,
                  const char* cpp_note) {
  for (const auto& [t, format] : {std::pair{&a, a_format}, std::pair{&b, b_format}})
    if (format == fp8_format::e5m2)
      fail<unsupported_error>("%s: %s is float8_e5m2; tilepipe's Python package multiplies float8_e4m3fn operands "
                              "only (the C++ %s is a full set of kernels more to build)",
                              op, t->name, cpp_note);
}

void check(scaled_mm_args& a) {
  const char* op = "tilepipe.scaled_mm";
  require_rank(op, a.a, 2, "[M, K], row-major");
  require_rank(op, a.b, 2, "[K, N], column-major: the transpose of an [N, K] row-major tensor");
  require_type(op, a.a, dtype::u8), require_type(op, a.b, dtype::u8);  // fp8, passed as its bits
  require_e4m3(op, a.a, a.a_format, a.b, a.b_format, "tp::scaled_matmul also takes e5m2 and mixed pairs: each pair");
  require_rank(op, a.out, 2, "[M, N]");
  if (a.out.type != dtype::bf16 && a.out.type != dtype::f32)
    fail<unsupported_error>("%s: out_dtype must be bfloat16 or float32, got %s", op, a.out.type_name.c_str());
  require_type(op, a.scale_a, dtype::f32), require_type(op, a.scale_b, dtype::f32);
  require_same_device(op, {&a.a, &a.b, &a.scale_a, &a.scale_b, &a.bias, &a.out});
  const std::int64_t M = a.a.shape[0], K = a.a.shape[1], N = a.b.shape[1];
  if (a.b.shape[0] != K)
    fail("%s: a is %s and b is %s: a's columns (K = %lld) must equal b's rows", op, a.a.shape_text().c_str(),
         a.b.shape_text().c_str(), static_cast<long long>(K));
  if (K < 1 || N < 1) fail("%s: K = %lld and N = %lld must be positive", op, static_cast<long long>(K), static_cast<long long>(N));
  if (K % 16 != 0)
    fail("%s: K = %lld (a is %s) is not a multiple of 16; the fp8 rows of a and b must be 16-byte multiples (TMA), as "
         "torch._scaled_mm also requires",
         op, static_cast<long long>(K), a.a.shape_text().c_str());
  const std::int64_t out_per16 = 16 / elem_bytes(a.out.type);
  if (N % out_per16 != 0)
    fail("%s: N = %lld (b is %s) is not a multiple of %lld; the rows of the %s output must be 16-byte multiples "
         "(TMA): pad b's columns",
         op, static_cast<long long>(N), a.b.shape_text().c_str(), static_cast<long long>(out_per16),
         dtype_name(a.out.type));
  if (a.out.shape[0] != M || a.out.shape[1] != N)
    fail("%s: out must be [%lld, %lld], got %s", op, static_cast<long long>(M), static_cast<long long>(N),
         a.out.shape_text().c_str());
  for (const tensor_arg* t : {&a.a, &a.b, &a.out}) require_int32_range(op, *t, t->shape[0] > t->shape[1] ? t->shape[0] : t->shape[1]);
  // b is [K, N] with K contiguous: the transpose of an [N, K] row-major tensor (torch._scaled_mm's
  // column-major mat2, the K-major layout fp8 wgmma reads).
  if (a.b.stride[0] != 1)
    fail("%s: b (%s) must be column-major: the transpose of an [N, K] row-major tensor (w.t()), K contiguous, as "
         "torch._scaled_mm requires; its strides are (%lld, %lld)%s",
         op, a.b.shape_text().c_str(), static_cast<long long>(a.b.stride[0]), static_cast<long long>(a.b.stride[1]),
         a.b.stride[1] == 1 ? " (row-major: pass b.t().contiguous().t(), or the [N, K] weight's .t())" : "");
  tensor_arg b_stored = a.b;  // as the kernel reads it: [N, K]
  b_stored.shape[0] = N, b_stored.shape[1] = K, b_stored.stride[0] = a.b.stride[1], b_stored.stride[1] = a.b.stride[0];
  require_tma_layout(op, a.a), require_tma_layout(op, b_stored), require_tma_layout(op, a.out);
  if (a.bias.present()) {
    if (a.bias.type != a.out.type)
      fail<argument_type_error>("%s: bias must have the output's dtype (%s), got %s", op, dtype_name(a.out.type),
                                a.bias.type_name.c_str());
    if (a.bias.rank != 1 || a.bias.shape[0] != N)
      fail("%s: bias must be one-dimensional with N = %lld entries, got shape %s", op, static_cast<long long>(N),
           a.bias.shape_text().c_str());
    if (N > 1 && a.bias.stride[0] != 1)
      fail("%s: bias must be contiguous (stride 1, got %lld)", op, static_cast<long long>(a.bias.stride[0]));
  }
  // The scaling mode, from the scales' shapes as torch._scaled_mm finds it: the modes each
  // scale's shape fits (per-tensor before row-wise before block where a shape fits several).
  const std::int64_t kb = (K + 127) / 128, nb = (N + 127) / 128;
  auto is = [](const tensor_arg& t, std::int64_t rows, std::int64_t cols) {
    return t.rank == 2 && t.shape[0] == rows && t.shape[1] == cols;
  };
  const bool fits_a[3] = {a.scale_a.numel() == 1, is(a.scale_a, M, 1), is(a.scale_a, M, kb)};
  const bool fits_b[3] = {a.scale_b.numel() == 1, is(a.scale_b, 1, N), is(a.scale_b, kb, nb)};
  const char* mode_names[3] = {"per-tensor", "row-wise", "block"};
  char modes[256];
  std::snprintf(modes, sizeof modes,
                "per-tensor (one element each), row-wise (scale_a [%lld, 1], scale_b [1, %lld]) or block (1 x 128 "
                "for a: scale_a [%lld, %lld]; 128 x 128 for b: scale_b [%lld, %lld])",
                static_cast<long long>(M), static_cast<long long>(N), static_cast<long long>(M),
                static_cast<long long>(kb), static_cast<long long>(kb), static_cast<long long>(nb));
  for (int m = 0; m < 3; ++m)
    if (fits_a[m] && fits_b[m]) {
      a.mode = static_cast<scaled_mm_mode>(m);
      return;
    }
  const bool any_a = fits_a[0] || fits_a[1] || fits_a[2], any_b = fits_b[0] || fits_b[1] || fits_b[2];
  if (!any_a || !any_b) {
    const tensor_arg& s = any_a ? a.scale_b : a.scale_a;
    fail("%s: %s has shape %s, which is no scaling mode's for a %s and b %s: the scales are float32 %s", op, s.name,
         s.shape_text().c_str(), a.a.shape_text().c_str(), a.b.shape_text().c_str(), modes);
  }
  const int ma = fits_a[0] ? 0 : fits_a[1] ? 1 : 2, mb = fits_b[0] ? 0 : fits_b[1] ? 1 : 2;
  fail("%s: scale_a %s is a %s scale but scale_b %s is a %s one; both must be of one mode: %s", op,
       a.scale_a.shape_text().c_str(), mode_names[ma], a.scale_b.shape_text().c_str(), mode_names[mb], modes);
}

void check(scaled_grouped_mm_args& a) {
  const char* op = "tilepipe.scaled_grouped_mm";
  if (a.masked) require_rank(op, a.a, 3, "[groups, rows, K], row-major, in the masked layout");
  else require_rank(op, a.a, 2, "[M, K], row-major, with offs");
  require_rank(op, a.b, 3, "[groups, K, N], column-major: the transpose of [groups, N, K] weights");
  require_type(op, a.a, dtype::u8), require_type(op, a.b, dtype::u8);  // fp8, passed as its bits
  require_e4m3(op, a.a, a.a_format, a.b, a.b_format, "tp::scaled_grouped_matmul also takes e5m2 x e5m2: a pair");
  require_rank(op, a.out, a.a.rank, a.masked ? "[groups, rows, N]" : "[M, N]");
  if (a.out.type != dtype::bf16)
    fail<unsupported_error>("%s: out_dtype must be bfloat16 (torch._scaled_grouped_mm's output), got %s", op,
                            a.out.type_name.c_str());
  require_type(op, a.scale_a, dtype::f32), require_type(op, a.scale_b, dtype::f32);
  require_same_device(op, {&a.a, &a.b, &a.scale_a, &a.scale_b, &a.table, &a.out});
  const std::int64_t G = a.b.shape[0], K = a.b.shape[1], N = a.b.shape[2];
  if (G < 1 || G > 256) fail("%s: b has %lld groups; tilepipe supports 1 to 256", op, static_cast<long long>(G));
  require_int32_vector(op, a.table, G, "one per group of b");
  if (a.masked) {
    if (a.a.shape[0] != G)
      fail("%s: a has %lld groups but b has %lld", op, static_cast<long long>(a.a.shape[0]), static_cast<long long>(G));
    if (a.a.shape[1] < 1) fail("%s: a has no rows per group (shape %s)", op, a.a.shape_text().c_str());
  }
  const int kd = a.a.rank - 1;
  if (a.a.shape[kd] != K)
    fail("%s: a has K = %lld (shape %s) but b has K = %lld (shape %s, logical [groups, K, N])", op,
         static_cast<long long>(a.a.shape[kd]), a.a.shape_text().c_str(), static_cast<long long>(K),
         a.b.shape_text().c_str());
  if (K < 1 || N < 1) fail("%s: K = %lld and N = %lld must be positive", op, static_cast<long long>(K), static_cast<long long>(N));
  if (K % 16 != 0)
    fail("%s: K = %lld (a is %s) is not a multiple of 16; the fp8 rows of a and b must be 16-byte multiples (TMA), as "
         "torch._scaled_grouped_mm also requires",
         op, static_cast<long long>(K), a.a.shape_text().c_str());
  if (N % 8 != 0)
    fail("%s: N = %lld (b is %s) is not a multiple of 8; the rows of the bfloat16 output must be 16-byte multiples "
         "(TMA): pad b's columns",
         op, static_cast<long long>(N), a.b.shape_text().c_str());
  for (int i = 0; i < kd; ++i)
    if (a.out.shape[i] != a.a.shape[i] || a.out.shape[kd] != N)
      fail("%s: out must be %s with N = %lld, got %s", op, a.a.shape_text().c_str(), static_cast<long long>(N),
           a.out.shape_text().c_str());
  const std::int64_t rows = a.masked ? a.a.shape[0] * a.a.shape[1] : a.a.shape[0];
  if (rows > 0x7fffffffLL - 256 * 128)
    fail("%s: a has %lld rows, beyond the kernel's 32-bit row indices", op, static_cast<long long>(rows));
  // b is [G, K, N] with K contiguous: the transpose of contiguous [G, N, K] weights
  // (torch._scaled_grouped_mm's column-major mat_b, the K-major layout fp8 wgmma reads).
  if (a.b.stride[1] != 1 && K > 1)
    fail("%s: b (%s) must be column-major: the transpose of [groups, N, K] weights (w.transpose(-2, -1)), K "
         "contiguous, as torch._scaled_grouped_mm requires; its strides are (%lld, %lld, %lld)%s",
         op, a.b.shape_text().c_str(), static_cast<long long>(a.b.stride[0]), static_cast<long long>(a.b.stride[1]),
         static_cast<long long>(a.b.stride[2]),
         a.b.stride[2] == 1 ? " (row-major: pass b.transpose(-2, -1).contiguous().transpose(-2, -1))" : "");
  tensor_arg b_stored = a.b;  // as the kernel reads it: [G, N, K]
  b_stored.shape[1] = N, b_stored.shape[2] = K, b_stored.stride[1] = a.b.stride[2], b_stored.stride[2] = a.b.stride[1];
  require_tma_layout(op, a.a), require_tma_layout(op, b_stored), require_tma_layout(op, a.out);

  // The recipe, from the scales' shapes (their ranks differ, so at most one fits).
  const std::int64_t kb = (K + 127) / 128, nb = (N + 127) / 128;
  auto is = [](const tensor_arg& t, std::initializer_list<std::int64_t> shape) {
    if (t.rank != static_cast<int>(shape.size())) return false;
    int d = 0;
    for (const std::int64_t s : shape)
      if (t.shape[d++] != s) return false;
    return true;
  };
  const std::int64_t g0 = a.a.shape[0], m1 = a.masked ? a.a.shape[1] : 0;  // masked: G and Mmax
  const bool row_a = a.masked ? is(a.scale_a, {g0, m1}) : is(a.scale_a, {g0});
  const bool block_a = a.masked ? is(a.scale_a, {g0, m1, kb}) : is(a.scale_a, {g0, kb});
  const bool row_b = is(a.scale_b, {G, N}), block_b = is(a.scale_b, {G, nb, kb});
  char recipes[384];
  const std::string rows_text = a.masked ? std::to_string(g0) + ", " + std::to_string(m1) : std::to_string(g0);
  std::snprintf(recipes, sizeof recipes,
                "row-wise (scale_a [%s]: one per row of a; scale_b [%lld, %lld]: one per group and column of out) or "
                "block (scale_a [%s, %lld]: 1 x 128 blocks of a; scale_b [%lld, %lld, %lld]: 128 x 128 blocks of "
                "each group's [N, K] weights)",
                rows_text.c_str(), static_cast<long long>(G), static_cast<long long>(N), rows_text.c_str(),
                static_cast<long long>(kb), static_cast<long long>(G), static_cast<long long>(nb),
                static_cast<long long>(kb));
  if (row_a && row_b) a.mode = scaled_mm_mode::row_wise;
  else if (block_a && block_b) a.mode = scaled_mm_mode::block;
  else if ((row_a || block_a) && (row_b || block_b))
    fail("%s: scale_a %s is a %s scale but scale_b %s is a %s one; both must be of one recipe, float32 %s", op,
         a.scale_a.shape_text().c_str(), row_a ? "row-wise" : "block", a.scale_b.shape_text().c_str(),
         row_b ? "row-wise" : "block", recipes);
  else {
    const tensor_arg& s = row_a || block_a ? a.scale_b : a.scale_a;
    fail("%s: %s has shape %s, which is no recipe's for a %s and b %s: the scales are float32 %s", op, s.name,
         s.shape_text().c_str(), a.a.shape_text().c_str(), a.b.shape_text().c_str(), recipes);
  }
  const bool block = a.mode == scaled_mm_mode::block;
  if (a.promote && !block)
    fail<unsupported_error>("%s: use_fast_accum=False with row-wise scales is not supported: the row-wise kernel keeps "
                            "the whole K in the tensor core's accumulator (use_fast_accum=True); block scales promote "
                            "every 128 of K into float32, and tilepipe.scaled_mm(..., use_fast_accum=False) per group "
                            "promotes row-wise sums",
                            op);
  // The layouts the kernel takes: the masked layout's groups back to back (a, out and scale_a
  // are read as their stacked rows), and block scale_b's groups back to back.
  if (a.masked)
    for (const tensor_arg* t : {&a.a, &a.out, &a.scale_a})
      if (t->shape[0] > 1 && t->stride[0] != t->shape[1] * t->stride[1])
        fail("%s: %s's groups must lie back to back in the masked layout (stride %lld in dimension 0, expected %lld "
             "x %lld)",
             op, t->name, static_cast<long long>(t->stride[0]), static_cast<long long>(t->shape[1]),
             static_cast<long long>(t->stride[1]));
  if (block && G > 1 && nb > 1 && a.scale_b.stride[0] != nb * a.scale_b.stride[1])
    fail("%s: scale_b's groups must lie back to back (stride %lld in dimension 0, expected %lld blocks x %lld), as in "
         "a contiguous tensor",
         op, static_cast<long long>(a.scale_b.stride[0]), static_cast<long long>(nb),
         static_cast<long long>(a.scale_b.stride[1]));
  check_group_table(op, a.table, a.masked, G, a.a, rows);
}

}  // namespace tilepipe::python

namespace tilepipe::python {

// One launcher per element type (kernels.cu); check() has made sure the type is one of two.
void run(const attention_args& a) { a.q.type == dtype::bf16 ? run_attention_bf16(a) : run_attention_f16(a); }
void run(const attention_backward_args& a) {
  a.forward.q.type == dtype::bf16 ? run_attention_backward_bf16(a) : run_attention_backward_f16(a);
}
void run(const grouped_mm_args& a) { a.a.type == dtype::bf16 ? run_grouped_mm_bf16(a) : run_grouped_mm_f16(a); }
void run(const matmul_args& a) { a.a.type == dtype::bf16 ? run_matmul_bf16(a) : run_matmul_f16(a); }
void run(const quantize_args& a) { a.x.type == dtype::bf16 ? run_quantize_bf16(a) : run_quantize_f16(a); }
void run(const scaled_mm_args& a) { run_scaled_mm_fp8_e4m3(a); }  // check() admits e4m3 x e4m3 only
void run(const scaled_grouped_mm_args& a) { run_scaled_grouped_mm_fp8_e4m3(a); }  // e4m3 x e4m3 too

}  // namespace tilepipe::python
