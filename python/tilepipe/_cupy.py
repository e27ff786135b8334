"""CuPy arrays: launched on the GPU on CuPy's current stream, outputs allocated by CuPy.
(Host NumPy arrays go to the interpreter: tilepipe._numpy.)"""
import cupy

from . import _C, _args

_prepared_gpus = set()


def _stream(x):
    index = x.device.id
    if index not in _prepared_gpus:
        _C.prepare_gpu(index)
        _prepared_gpus.add(index)
    return cupy.cuda.get_current_stream().ptr


def attention(q, k, v, causal, softmax_scale, window_size, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
              return_lse, seqused_k=None, page_table=None, num_splits=0, k_scale=None, v_scale=None):
    if k_scale is not None or v_scale is not None or k.dtype.name == "float8_e4m3fn":
        raise NotImplementedError("tilepipe.attention: an fp8 KV cache (float8_e4m3fn k and v, k_scale, v_scale) is for "
                                  "torch.Tensor and NumPy arrays (not CuPy yet)")
    if seqused_k is not None or page_table is not None or num_splits:
        raise NotImplementedError("tilepipe.attention: seqused_k, page_table and num_splits are for torch.Tensor and "
                                  "NumPy arrays (not CuPy yet)")
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    left, right = _args.window(causal, window_size)
    scale = _args.softmax_scale(q.shape[-1], softmax_scale)
    out = cupy.empty(q.shape, q.dtype)
    lse = cupy.empty(_args.lse_shape(q.shape, varlen), cupy.float32) if return_lse else None
    _C.attention(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, -1 if max_seqlen_q is None else int(max_seqlen_q),
                 scale, False, left, right, _stream(q), False)
    return (out, lse) if return_lse else out


def attention_backward(d_out, q, k, v, out, lse, causal, softmax_scale, window_size, cu_seqlens_q, cu_seqlens_k,
                       max_seqlen_q, max_seqlen_k):
    left, right = _args.window(causal, window_size)
    scale = _args.softmax_scale(q.shape[-1], softmax_scale)
    dq, dk, dv = cupy.empty(q.shape, q.dtype), cupy.empty(k.shape, k.dtype), cupy.empty(v.shape, v.dtype)
    workspace = cupy.empty(lse.shape, cupy.float32)
    _C.attention_backward(q, k, v, out, d_out, lse, dq, dk, dv, workspace, cu_seqlens_q, cu_seqlens_k,
                          -1 if max_seqlen_q is None else int(max_seqlen_q),
                          -1 if max_seqlen_k is None else int(max_seqlen_k), scale, False, left, right, _stream(q), False)
    return dq, dk, dv


def grouped_mm(a, b, offs, masked_m, out_dtype):
    _args.check_out_dtype("tilepipe.grouped_mm", out_dtype, a.dtype)
    case = _args.grouped_mm_case(a.ndim, b.ndim, offs, masked_m)
    table = offs if case == "ragged" else masked_m if case == "masked" else cupy.full(a.shape[0], a.shape[1], cupy.int32)
    out = cupy.empty(a.shape[:-1] + (b.shape[-1],), a.dtype)
    _C.grouped_mm(a, b, out, table, case != "ragged", _stream(a), False)
    return out


def matmul(a, b, bias, activation):
    lead = a.shape[:-1]
    a2 = a.reshape(-1, a.shape[-1])
    out = cupy.empty((a2.shape[0], b.shape[-1]), a.dtype)
    _C.matmul(a2, b, bias, out, activation, _stream(a), False)
    return out.reshape(lead + (out.shape[1],))


def quantize_fp8(x, group):
    raise NotImplementedError("tilepipe.quantize_fp8: CuPy has no float8 dtype; pass a torch.Tensor or a NumPy array")


def scaled_mm(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum):
    raise NotImplementedError("tilepipe.scaled_mm: CuPy has no float8 dtype; pass torch.Tensors or NumPy arrays")


def scaled_grouped_mm(a, b, scale_a, scale_b, offs, masked_m, out_dtype, use_fast_accum):
    raise NotImplementedError("tilepipe.scaled_grouped_mm: CuPy has no float8 dtype; pass torch.Tensors or NumPy arrays")
