"""PyTorch: the tilepipe::attention / attention_backward / grouped_mm / matmul / quantize_fp8 /
scaled_mm / scaled_grouped_mm operators and the eager fast path.

The operators are registered with torch.library (CPU and CUDA kernels, fake kernels for
torch.compile and export, autograd formulas: attention's runs attention_backward, the others
say there is no backward), so torch.compile(fullgraph=True) keeps them in its graph and
torch.library.opcheck passes.
Eager calls with plain tensors skip the dispatcher: the public functions call the same
kernel function directly (the dispatcher's Python-op round trip costs several microseconds,
as much as the launch itself), and go through the operator whenever something else is
watching: torch.compile / export tracing, tensor subclasses (FakeTensor, DTensor) and
inputs that require grad (so that autograd records attention's backward, and the other
operators' backward raises instead of silently missing gradients).

Every launch goes to the current stream of the tensors' GPU (torch.cuda.stream(...) and
graph capture included), into outputs allocated by PyTorch's caching allocator."""
import torch

from . import _C, _args

_C.register_torch(torch.Tensor, torch.bfloat16, torch.float16, torch.float32, torch.int32, torch.uint8)

_Tensor = torch.Tensor
_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_raw_stream = torch._C._cuda_getCurrentRawStream if torch.cuda.is_available() else None
_prepared_gpus = set()


def _stream(t):
    """The current CUDA stream of t's GPU (0 for host tensors: the interpreter)."""
    if not t.is_cuda:
        return 0
    index = t.get_device()
    if index not in _prepared_gpus:
        # Reads the GPU's properties and makes its failure channel once, before any launch
        # (capture-safe even when this first call happens inside a CUDA-graph capture).
        _C.prepare_gpu(index)
        _prepared_gpus.add(index)
    return _raw_stream(index)


def _direct(*tensors):
    """Whether an eager call may skip the dispatcher (see the module's docstring)."""
    if _is_compiling():
        return False
    grad = _grad_enabled()
    for t in tensors:
        if t is not None and (type(t) is not _Tensor or (grad and t.requires_grad)):
            return False
    return True


# ---- the kernels (the operators' CPU and CUDA implementations, and the eager path) ----------

_contiguous = torch.contiguous_format


_split_shapes = {}  # (device, head dim) -> (slots, slot_floats) of the split-KV workspace


def _split_workspace(q, heads_kv, num_splits):
    """The decode path's split-KV workspace for one call: f32 slots and int32 flags that start at
    zero (the kernel leaves them at zero), from PyTorch's allocator (graph capture included)."""
    key = (q.device, q.shape[-1])
    shape = _split_shapes.get(key)
    if shape is None:
        _stream(q)  # prepares the GPU before the extension opens it
        shape = _split_shapes[key] = _C.attention_split_workspace(q, q.shape[-1])
    slots = _args.split_slots(shape[0], q.shape, heads_kv, num_splits)
    return (torch.empty((slots, shape[1]), dtype=torch.float32, device=q.device),
            torch.zeros(slots, dtype=torch.int32, device=q.device))


_fp8 = torch.float8_e4m3fn


def _attention_kernel(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, softmax_scale, window_left, window_right,
                      return_lse, seqused_k=None, page_table=None, num_splits=0, k_scale=None, v_scale=None):
    # empty_like is the cheapest allocation PyTorch has (about half of torch.empty's argument parsing).
    out = torch.empty_like(q, memory_format=_contiguous)
    lse = None
    if return_lse:
        lse = torch.empty(_args.lse_shape(q.shape, cu_seqlens_q is not None), dtype=torch.float32, device=q.device)
    rows = q.shape[1] if cu_seqlens_q is None else max_seqlen_q  # -1: varlen offsets on the host, not read yet
    kv_fp8 = k.dtype == _fp8
    if seqused_k is None and num_splits == 0 and rows > _args.DECODE_MAX_SEQLEN_Q and not kv_fp8:
        _C.attention(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, softmax_scale, False, window_left,
                     window_right, _stream(q), False)
    else:  # the decode kernel (fp8 K and V run on it whatever Sq) may split the keys: it gets a workspace
        partials, flags = _split_workspace(q, k.shape[-2], num_splits)
        if kv_fp8:  # the extension reads the fp8 codes as their bits
            if v.dtype != _fp8:
                raise TypeError(f"tilepipe.attention: k is {k.dtype} and v is {v.dtype}; both float8_e4m3fn or both "
                                "q's dtype")
            k, v = k.view(torch.uint8), v.view(torch.uint8)
        _C.attention(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, softmax_scale, False, window_left,
                     window_right, _stream(q), False, seqused_k, page_table, num_splits, partials, flags, kv_fp8,
                     k_scale, v_scale)
    return out, lse


def _attention_backward_kernel(d_out, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                               softmax_scale, window_left, window_right):
    dq = torch.empty_like(q, memory_format=_contiguous)
    dk = torch.empty_like(k, memory_format=_contiguous)
    dv = torch.empty_like(v, memory_format=_contiguous)
    workspace = torch.empty(lse.shape, dtype=torch.float32, device=q.device)  # rowsum(d_out * out) per query row
    _C.attention_backward(q, k, v, out, d_out, lse, dq, dk, dv, workspace, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                          max_seqlen_k, softmax_scale, False, window_left, window_right, _stream(q), False)
    return dq, dk, dv


def _grouped_mm_kernel(a, b, table, masked):
    out = torch.empty(a.shape[:-1] + (b.shape[-1],), dtype=a.dtype, device=a.device)
    _C.grouped_mm(a, b, out, table, masked, _stream(a), False)
    return out


def _matmul_kernel(a, b, bias, activation):
    out = torch.empty((a.shape[0], b.shape[-1]), dtype=a.dtype, device=a.device)
    _C.matmul(a, b, bias, out, activation, _stream(a), False)
    return out


def _quantize_fp8_kernel(x, group):
    q = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
    groups = 1 if group == 0 else (x.shape[1] + 127) // 128
    scales = torch.empty((x.shape[0], groups), dtype=torch.float32, device=x.device)
    _C.quantize_fp8(x, q.view(torch.uint8), scales, group, _stream(x), False)
    return q, scales


_out_dtypes = {"bfloat16": torch.bfloat16, "float32": torch.float32}


def _scaled_mm_kernel(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum):
    # The extension reads the fp8 codes as their bits; a wrong dtype is named before that.
    a_format, b_format = _args.fp8_format("a", a.dtype), _args.fp8_format("b", b.dtype)
    out = torch.empty((a.shape[0], b.shape[-1]) if a.dim() == 2 and b.dim() == 2 else (0, 0), dtype=out_dtype,
                      device=a.device)
    _C.scaled_mm(a.view(torch.uint8), b.view(torch.uint8), scale_a, scale_b, bias, out, a_format, b_format,
                 not use_fast_accum, _stream(a), False)
    return out


def _scaled_grouped_mm_kernel(a, b, scale_a, scale_b, table, masked, out_dtype, use_fast_accum):
    op = "tilepipe.scaled_grouped_mm"
    a_format, b_format = _args.fp8_format("a", a.dtype, op), _args.fp8_format("b", b.dtype, op)
    out = torch.empty(a.shape[:-1] + (b.shape[-1],), dtype=out_dtype, device=a.device)
    _C.scaled_grouped_mm(a.view(torch.uint8), b.view(torch.uint8), scale_a, scale_b, table, out, masked, a_format,
                         b_format, not use_fast_accum, _stream(a), False)
    return out


# ---- the operators -------------------------------------------------------------------------

_lib = torch.library.Library("tilepipe", "DEF")
_lib.define("attention(Tensor q, Tensor k, Tensor v, Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, int max_seqlen_q, "
            "float softmax_scale, int window_left, int window_right, bool return_lse, int max_seqlen_k=-1, "
            "Tensor? seqused_k=None, Tensor? page_table=None, int num_splits=0, Tensor? k_scale=None, "
            "Tensor? v_scale=None) -> (Tensor, Tensor)")
_lib.define("attention_backward(Tensor d_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, "
            "Tensor? cu_seqlens_q, Tensor? cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, float softmax_scale, "
            "int window_left, int window_right) -> (Tensor, Tensor, Tensor)")
_lib.define("grouped_mm(Tensor a, Tensor b, Tensor table, bool masked) -> Tensor")
_lib.define("matmul(Tensor a, Tensor b, Tensor? bias, int activation) -> Tensor")
_lib.define("quantize_fp8(Tensor x, int group) -> (Tensor, Tensor)")
_lib.define("scaled_mm(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, Tensor? bias, ScalarType out_dtype, "
            "bool use_fast_accum) -> Tensor")
_lib.define("scaled_grouped_mm(Tensor a, Tensor b, Tensor scale_a, Tensor scale_b, Tensor table, bool masked, "
            "ScalarType out_dtype, bool use_fast_accum) -> Tensor")


def _attention_op(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, softmax_scale, window_left, window_right,
                  return_lse, max_seqlen_k=-1, seqused_k=None, page_table=None, num_splits=0, k_scale=None,
                  v_scale=None):
    out, lse = _attention_kernel(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, softmax_scale, window_left,
                                 window_right, return_lse, seqused_k, page_table, num_splits, k_scale, v_scale)
    # An operator returns tensors: without return_lse an empty one stands for the LSE.
    return out, lse if lse is not None else q.new_empty((0,), dtype=torch.float32)


for _key in ("CPU", "CUDA"):
    _lib.impl("attention", _attention_op, _key)
    _lib.impl("attention_backward", _attention_backward_kernel, _key)
    _lib.impl("grouped_mm", _grouped_mm_kernel, _key)
    _lib.impl("matmul", _matmul_kernel, _key)
    _lib.impl("quantize_fp8", _quantize_fp8_kernel, _key)
    _lib.impl("scaled_mm", _scaled_mm_kernel, _key)
    _lib.impl("scaled_grouped_mm", _scaled_grouped_mm_kernel, _key)


@torch.library.register_fake("tilepipe::attention")
def _attention_fake(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, softmax_scale, window_left, window_right,
                    return_lse, max_seqlen_k=-1, seqused_k=None, page_table=None, num_splits=0, k_scale=None,
                    v_scale=None):
    shape = _args.lse_shape(q.shape, cu_seqlens_q is not None) if return_lse else (0,)
    return q.new_empty(q.shape), q.new_empty(shape, dtype=torch.float32)


@torch.library.register_fake("tilepipe::attention_backward")
def _attention_backward_fake(d_out, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                             softmax_scale, window_left, window_right):
    return q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)


@torch.library.register_fake("tilepipe::grouped_mm")
def _grouped_mm_fake(a, b, table, masked):
    return a.new_empty(a.shape[:-1] + (b.shape[-1],))


@torch.library.register_fake("tilepipe::matmul")
def _matmul_fake(a, b, bias, activation):
    return a.new_empty((a.shape[0], b.shape[-1]))


@torch.library.register_fake("tilepipe::quantize_fp8")
def _quantize_fp8_fake(x, group):
    groups = 1 if group == 0 else (x.shape[1] + 127) // 128
    return x.new_empty(x.shape, dtype=torch.float8_e4m3fn), x.new_empty((x.shape[0], groups), dtype=torch.float32)


@torch.library.register_fake("tilepipe::scaled_mm")
def _scaled_mm_fake(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum):
    return a.new_empty((a.shape[0], b.shape[-1]), dtype=out_dtype)


@torch.library.register_fake("tilepipe::scaled_grouped_mm")
def _scaled_grouped_mm_fake(a, b, scale_a, scale_b, table, masked, out_dtype, use_fast_accum):
    return a.new_empty(a.shape[:-1] + (b.shape[-1],), dtype=out_dtype)


def _no_backward(name):
    def backward(ctx, *grads):
        raise NotImplementedError(f"tilepipe.{name} has no backward pass: tilepipe's kernels are forward only "
                                  "(call it under torch.no_grad(), or use a differentiable implementation for training)")
    return backward


for _name in ("attention_backward", "grouped_mm", "matmul", "quantize_fp8", "scaled_mm", "scaled_grouped_mm"):
    torch.library.register_autograd(f"tilepipe::{_name}", _no_backward(_name))

_ops = torch.ops.tilepipe


def _attention_setup_context(ctx, inputs, output):
    q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, softmax_scale, window_left, window_right = inputs[:9]
    max_seqlen_k = inputs[10] if len(inputs) > 10 else -1
    ctx.over_cache = len(inputs) > 11 and inputs[11] is not None
    ctx.fp8_kv = k.dtype == _fp8
    out, lse = output
    # The LSE is an output without a gradient (FlashAttention's): a loss through it sees none.
    ctx.mark_non_differentiable(lse)
    ctx.save_for_backward(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k)
    ctx.params = (max_seqlen_q, max_seqlen_k, softmax_scale, window_left, window_right)


def _attention_backward(ctx, d_out, d_lse):
    if ctx.fp8_kv:
        raise NotImplementedError("tilepipe.attention has no backward over fp8 (float8_e4m3fn) k and v: an fp8 KV "
                                  "cache is for inference")
    if ctx.over_cache:
        raise NotImplementedError("tilepipe.attention has no backward over a KV cache (seqused_k / page_table): "
                                  "a cache is for inference")
    q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k = ctx.saved_tensors
    max_sq, max_sk, scale, left, right = ctx.params
    if lse.numel() == 0 and q.numel() > 0:  # called without return_lse: the backward needs the LSE
        out, lse = _ops.attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_sq, scale, left, right, True, max_sk)
    # d_out may be an expanded view (the gradient of a sum): the kernels read rows through TMA.
    dq, dk, dv = _ops.attention_backward(d_out.contiguous(), q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_sq,
                                         max_sk, scale, left, right)
    return (dq, dk, dv) + (None,) * 13  # one per further input: offsets, lengths, scale, mask, cache, splits, fp8 scales


torch.library.register_autograd("tilepipe::attention", _attention_backward, setup_context=_attention_setup_context)


# ---- the public functions' PyTorch side (tilepipe._api dispatches here) ----------------------

def _scale(x, like):
    """An fp8 scale: a Python number as a one-element float32 tensor on q's device, a tensor as given."""
    if x is None or isinstance(x, _Tensor):
        return x
    return torch.tensor([float(x)], dtype=torch.float32, device=like.device)


def attention(q, k, v, causal, softmax_scale, window_size, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
              return_lse, seqused_k=None, page_table=None, num_splits=0, k_scale=None, v_scale=None):
    # The eager path is written out inline: every call here costs a tenth of a microsecond,
    # and a decode step launches this per layer (bench/python_overhead.py).
    if window_size == (-1, -1):
        left, right = -1, (0 if causal else -1)
    else:
        left, right = _args.window(causal, window_size)
    scale = q.shape[-1] ** -0.5 if softmax_scale is None else float(softmax_scale)
    max_sq = -1 if max_seqlen_q is None else int(max_seqlen_q)
    if k_scale is not None or v_scale is not None:
        k_scale, v_scale = _scale(k_scale, q), _scale(v_scale, q)
    if (not _is_compiling() and type(q) is _Tensor and type(k) is _Tensor and type(v) is _Tensor
            and not (_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad))):
        out, lse = _attention_kernel(q, k, v, cu_seqlens_q, cu_seqlens_k, max_sq, scale, left, right, return_lse,
                                     seqused_k, page_table, num_splits, k_scale, v_scale)
    else:  # through the operator, with the LSE that a backward needs
        max_sk = -1 if max_seqlen_k is None else int(max_seqlen_k)
        out, lse = _ops.attention(q, k, v, cu_seqlens_q, cu_seqlens_k, max_sq, scale, left, right, True, max_sk,
                                  seqused_k, page_table, num_splits, k_scale, v_scale)
    return (out, lse) if return_lse else out


def attention_backward(d_out, q, k, v, out, lse, causal, softmax_scale, window_size, cu_seqlens_q, cu_seqlens_k,
                       max_seqlen_q, max_seqlen_k):
    left, right = _args.window(causal, window_size)
    scale = _args.softmax_scale(q.shape[-1], softmax_scale)
    args = (q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, -1 if max_seqlen_q is None else int(max_seqlen_q),
            -1 if max_seqlen_k is None else int(max_seqlen_k), scale, left, right)
    if _direct(d_out, q, k, v, out, lse):
        return _attention_backward_kernel(d_out, *args)
    return _ops.attention_backward(d_out, *args)


_full_counts = {}  # (groups, rows, device) -> int32 [groups] of rows: the batched case's masked_m


def _counts(a):
    # Not cached while tracing, nor inside a CUDA-graph capture: a tensor filled there holds
    # its values only once the graph is replayed.
    if _is_compiling() or (a.is_cuda and torch.cuda.is_current_stream_capturing()):
        return torch.full((a.shape[0],), a.shape[1], dtype=torch.int32, device=a.device)
    key = (a.shape[0], a.shape[1], a.device)
    t = _full_counts.get(key)
    if t is None:
        t = _full_counts[key] = torch.full((a.shape[0],), a.shape[1], dtype=torch.int32, device=a.device)
    return t


def grouped_mm(a, b, offs, masked_m, out_dtype):
    _args.check_out_dtype("tilepipe.grouped_mm", out_dtype, a.dtype)
    case = _args.grouped_mm_case(a.dim(), b.dim(), offs, masked_m)
    table = offs if case == "ragged" else masked_m if case == "masked" else _counts(a)
    if _direct(a, b):
        return _grouped_mm_kernel(a, b, table, case != "ragged")
    return _ops.grouped_mm(a, b, table, case != "ragged")


def matmul(a, b, bias, activation):
    if a.dim() < 2:
        raise TypeError(f"tilepipe.matmul: a must have at least 2 dimensions ([..., K]), got shape {tuple(a.shape)}")
    lead = a.shape[:-1]
    a2 = a if a.dim() == 2 else a.reshape(-1, a.shape[-1])
    out = _matmul_kernel(a2, b, bias, activation) if _direct(a2, b, bias) else _ops.matmul(a2, b, bias, activation)
    return out if a.dim() == 2 else out.reshape(*lead, out.shape[-1])


def quantize_fp8(x, group):
    if x.dim() < 2:
        raise TypeError(f"tilepipe.quantize_fp8: x must have at least 2 dimensions ([..., K]), got shape {tuple(x.shape)}")
    lead = x.shape[:-1]
    x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    q, scales = _quantize_fp8_kernel(x2, group) if _direct(x2) else _ops.quantize_fp8(x2, group)
    if x.dim() == 2:
        return q, scales
    return q.reshape(x.shape), scales.reshape(*lead, scales.shape[-1])


def scaled_mm(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum):
    dtype = _out_dtypes[out_dtype]
    if _direct(a, b, scale_a, scale_b, bias):
        return _scaled_mm_kernel(a, b, scale_a, scale_b, bias, dtype, use_fast_accum)
    return _ops.scaled_mm(a, b, scale_a, scale_b, bias, dtype, use_fast_accum)


def scaled_grouped_mm(a, b, scale_a, scale_b, offs, masked_m, out_dtype, use_fast_accum):
    dtype = _out_dtypes[out_dtype]
    case = _args.grouped_mm_case(a.dim(), b.dim(), offs, masked_m, "tilepipe.scaled_grouped_mm")
    table = offs if case == "ragged" else masked_m if case == "masked" else _counts(a)
    if _direct(a, b, scale_a, scale_b, table):
        return _scaled_grouped_mm_kernel(a, b, scale_a, scale_b, table, case != "ragged", dtype, use_fast_accum)
    return _ops.scaled_grouped_mm(a, b, scale_a, scale_b, table, case != "ragged", dtype, use_fast_accum)
