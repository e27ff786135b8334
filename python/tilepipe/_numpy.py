"""NumPy arrays: run in tilepipe's CPU interpreter, synchronously.

bfloat16 arrays (ml_dtypes) reach the extension as uint16 views: NumPy before 2.5 cannot
export bfloat16 through DLPack or the buffer protocol (numpy#31256, jax-ml/ml_dtypes#80),
and the extension is told to read uint16 as bfloat16."""
import numpy as np

from . import _C, _args


def _is_bf16(x):
    return x.dtype.name == "bfloat16"


def _pass(x):
    """What the extension is given: bfloat16 as its uint16 view (same memory), else x."""
    if isinstance(x, np.ndarray) and _is_bf16(x):
        return x.view(np.uint16)
    return x


def _int32(x, name):
    """Offsets and group tables: NumPy integer arrays (or lists) of any width, as int32."""
    if x is None:
        return None
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integers, got {a.dtype}")
    if a.size and (a.min() < -2**31 or a.max() >= 2**31):
        raise ValueError(f"{name} holds values beyond int32")
    return np.ascontiguousarray(a, dtype=np.int32)


def _require_ndarray(x, name):
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a numpy.ndarray like the other arguments, got {type(x).__name__}")


def _is_fp8(x):
    return x.dtype.name == "float8_e4m3fn"


def _scale(x, name):
    """An fp8 scale: a Python number as a one-element float32 array, an array as given (the
    extension checks its dtype and shape)."""
    if x is None or isinstance(x, np.ndarray):
        return x
    if isinstance(x, (int, float, np.number)):
        return np.array([x], np.float32)
    raise TypeError(f"tilepipe.attention: {name} must be a float32 numpy.ndarray or a number, got {type(x).__name__}")


def attention(q, k, v, causal, softmax_scale, window_size, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
              return_lse, seqused_k=None, page_table=None, num_splits=0, k_scale=None, v_scale=None):
    for x, n in ((k, "k"), (v, "v")):
        _require_ndarray(x, n)
    kv_fp8 = _is_fp8(k)
    if kv_fp8 != _is_fp8(v):
        raise TypeError(f"tilepipe.attention: k is {k.dtype} and v is {v.dtype}; both float8_e4m3fn or both q's dtype")
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    left, right = _args.window(causal, window_size)
    scale = _args.softmax_scale(q.shape[-1], softmax_scale)
    out = np.empty(q.shape, q.dtype)
    lse = np.empty(_args.lse_shape(q.shape, varlen), np.float32) if return_lse else None
    # The interpreter's split-KV workspace is small: every call gets one (the decode path may split).
    slots, floats = _C.attention_split_workspace(_pass(q), q.shape[-1])
    slots = _args.split_slots(slots, q.shape, k.shape[-2], num_splits)
    kk, vv = (k.view(np.uint8), v.view(np.uint8)) if kv_fp8 else (_pass(k), _pass(v))
    _C.attention(_pass(q), kk, vv, _pass(out), lse, _int32(cu_seqlens_q, "cu_seqlens_q"),
                 _int32(cu_seqlens_k, "cu_seqlens_k"), -1 if max_seqlen_q is None else int(max_seqlen_q), scale,
                 False, left, right, 0, _is_bf16(q), _int32(seqused_k, "seqused_k"), _int32(page_table, "page_table"),
                 num_splits, np.empty((slots, floats), np.float32), np.zeros(slots, np.int32), kv_fp8,
                 _scale(k_scale, "k_scale"), _scale(v_scale, "v_scale"))
    return (out, lse) if return_lse else out


def attention_backward(d_out, q, k, v, out, lse, causal, softmax_scale, window_size, cu_seqlens_q, cu_seqlens_k,
                       max_seqlen_q, max_seqlen_k):
    for x, n in ((d_out, "d_out"), (k, "k"), (v, "v"), (out, "out"), (lse, "lse")):
        _require_ndarray(x, n)
    left, right = _args.window(causal, window_size)
    scale = _args.softmax_scale(q.shape[-1], softmax_scale)
    dq, dk, dv = np.empty(q.shape, q.dtype), np.empty(k.shape, k.dtype), np.empty(v.shape, v.dtype)
    workspace = np.empty(lse.shape, np.float32)
    _C.attention_backward(_pass(q), _pass(k), _pass(v), _pass(out), _pass(d_out), lse, _pass(dq), _pass(dk), _pass(dv),
                          workspace, _int32(cu_seqlens_q, "cu_seqlens_q"), _int32(cu_seqlens_k, "cu_seqlens_k"),
                          -1 if max_seqlen_q is None else int(max_seqlen_q),
                          -1 if max_seqlen_k is None else int(max_seqlen_k), scale, False, left, right, 0, _is_bf16(q))
    return dq, dk, dv


def _group_table(case, a, offs, masked_m):
    """The grouped kernels' int32 table: offs (ragged), masked_m (masked), or full groups (batched)."""
    if case == "ragged":
        return _int32(offs, "offs")
    if case == "masked":
        return _int32(masked_m, "masked_m")
    return np.full(a.shape[0], a.shape[1], np.int32)


def grouped_mm(a, b, offs, masked_m, out_dtype):
    _require_ndarray(b, "b")
    _args.check_out_dtype("tilepipe.grouped_mm", out_dtype, a.dtype)
    case = _args.grouped_mm_case(a.ndim, b.ndim, offs, masked_m)
    out = np.empty(a.shape[:-1] + (b.shape[-1],), a.dtype)
    table = _group_table(case, a, offs, masked_m)
    _C.grouped_mm(_pass(a), _pass(b), _pass(out), table, case != "ragged", 0, _is_bf16(a))
    return out


def matmul(a, b, bias, activation):
    _require_ndarray(b, "b")
    if a.ndim < 2:
        raise TypeError(f"tilepipe.matmul: a must have at least 2 dimensions ([..., K]), got shape {a.shape}")
    lead = a.shape[:-1]
    a2 = a.reshape(-1, a.shape[-1])
    out = np.empty((a2.shape[0], b.shape[-1] if b.ndim == 2 else 0), a.dtype)
    _C.matmul(_pass(a2), _pass(b), _pass(bias), _pass(out), activation, 0, _is_bf16(a))
    return out.reshape(lead + (out.shape[1],))


def quantize_fp8(x, group):
    import ml_dtypes
    if x.ndim < 2:
        raise TypeError(f"tilepipe.quantize_fp8: x must have at least 2 dimensions ([..., K]), got shape {x.shape}")
    x2 = x.reshape(-1, x.shape[-1])
    q = np.empty(x2.shape, ml_dtypes.float8_e4m3fn)
    scales = np.empty((x2.shape[0], 1 if group == 0 else (x2.shape[1] + 127) // 128), np.float32)
    _C.quantize_fp8(_pass(x2), q.view(np.uint8), scales, group, 0, _is_bf16(x))
    return q.reshape(x.shape), scales.reshape(x.shape[:-1] + (scales.shape[-1],))


def scaled_mm(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum):
    import ml_dtypes
    for x, n in ((b, "b"), (scale_a, "scale_a"), (scale_b, "scale_b")):
        _require_ndarray(x, n)
    a_format, b_format = _args.fp8_format("a", a.dtype), _args.fp8_format("b", b.dtype)
    if bias is not None:  # here: bfloat16 reaches the extension as uint16 (a uint16 bias must not pass for it)
        _require_ndarray(bias, "bias")
        if bias.dtype.name != out_dtype:
            raise TypeError(f"tilepipe.scaled_mm: bias must have the output's dtype ({out_dtype}), got {bias.dtype}")
    out = np.empty((a.shape[0], b.shape[-1]) if a.ndim == 2 and b.ndim == 2 else (0, 0),
                   ml_dtypes.bfloat16 if out_dtype == "bfloat16" else np.float32)
    _C.scaled_mm(a.view(np.uint8), b.view(np.uint8), scale_a, scale_b, _pass(bias), _pass(out), a_format, b_format,
                 not use_fast_accum, 0, out_dtype == "bfloat16")
    return out


def scaled_grouped_mm(a, b, scale_a, scale_b, offs, masked_m, out_dtype, use_fast_accum):
    import ml_dtypes
    for x, n in ((b, "b"), (scale_a, "scale_a"), (scale_b, "scale_b")):
        _require_ndarray(x, n)
    op = "tilepipe.scaled_grouped_mm"
    a_format, b_format = _args.fp8_format("a", a.dtype, op), _args.fp8_format("b", b.dtype, op)
    case = _args.grouped_mm_case(a.ndim, b.ndim, offs, masked_m, op)
    table = _group_table(case, a, offs, masked_m)
    out = np.empty(a.shape[:-1] + (b.shape[-1],), ml_dtypes.bfloat16)  # out_dtype: bfloat16, the only one
    _C.scaled_grouped_mm(a.view(np.uint8), b.view(np.uint8), scale_a, scale_b, table, _pass(out), case != "ragged",
                         a_format, b_format, not use_fast_accum, 0, True)
    return out
