"""The framework-independent entry points: each finds the frontend of its first array's
type (PyTorch, NumPy, CuPy, JAX) once per type and hands the call over."""
from . import _args

_frontends = {}  # array type -> frontend module


def _frontend_of(x):
    f = _frontends.get(type(x))
    if f is None:
        f = _find_frontend(x)
        _frontends[type(x)] = f
    return f


def _find_frontend(x):
    module = type(x).__module__.split(".")[0]
    if module == "torch":
        from . import _torch
        if isinstance(x, _torch.torch.Tensor):
            return _torch
    if module == "numpy":
        from . import _numpy
        return _numpy
    if module in ("jax", "jaxlib"):
        from . import jax as _jax
        return _jax._Frontend
    if module == "cupy":
        from . import _cupy
        return _cupy
    raise TypeError(f"tilepipe: {type(x).__module__}.{type(x).__qualname__} is not a supported array type "
                    "(torch.Tensor, numpy.ndarray, a JAX array or a cupy.ndarray)")


def attention(q, k, v, *, causal=False, softmax_scale=None, window_size=(-1, -1), cu_seqlens_q=None,
              cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, return_lse=False, seqused_k=None,
              page_table=None, num_splits=0, k_scale=None, v_scale=None):
    """Flash attention forward: softmax(softmax_scale * q k^T + mask) v, FlashAttention's semantics.

    q: [batch, seqlen_q, heads_q, head_dim]; k, v: [batch, seqlen_k, heads_kv, head_dim], or packed
    varlen [total, heads, head_dim] with cu_seqlens_q / cu_seqlens_k (int32 [batch + 1] offsets).
    heads_q a multiple of heads_kv (GQA / MQA); head_dim 64, 128 or 256; bfloat16 or float16.
    causal: the mask aligned to the bottom right (query i sees keys j <= i + seqlen_k - seqlen_q).
    window_size: (left, right) keys around that diagonal, -1 unbounded. softmax_scale defaults
    to 1 / sqrt(head_dim). max_seqlen_q bounds the query lengths (required when cu_seqlens_q is
    on a GPU; found from host offsets otherwise); max_seqlen_k bounds the key lengths (needed only by
    the backward, and only with cu_seqlens_k on a GPU).
    Returns out (q's shape and dtype), or (out, lse) with return_lse: float32 [batch, heads, seqlen_q]
    ([heads, total_q] varlen); rows that see no key give out 0 and lse -inf.
    Differentiable for PyTorch (autograd: loss.backward() runs tilepipe.attention_backward) and
    JAX (jax.grad through tilepipe.jax.attention), head dims 64, 128 and 256; lse has no gradient.
    A KV cache (FlashAttention-3's names; PyTorch and NumPy, q fixed-length): seqused_k, int32
    [batch], the keys each sequence uses of k and v [batch, seqlen_k, heads_kv, head_dim]; with
    page_table, int32 [batch, max_pages], k and v are pages [num_pages, page_size, heads_kv,
    head_dim] (page_size a power of two from 16 to 256) and key j of sequence b is row
    j % page_size of page page_table[b, j // page_size]. num_splits: the KV splits of the decode
    path (seqlen_q <= 16, or a cache), 0 to let the kernel choose.
    An fp8 KV cache (PyTorch and NumPy): k and v float8_e4m3fn (torch.float8_e4m3fn, or
    ml_dtypes.float8_e4m3fn), q bfloat16 or float16; attention runs on K = k * k_scale and
    V = v * v_scale, the scales float32 arrays on q's device with one value or heads_kv values
    (one per KV head), or Python floats; None is 1 (FlashInfer's and vLLM's k_scale / v_scale).
    Any seqlen_q (the decode kernel), with or without a cache; no backward.
    """
    if k_scale is not None or v_scale is not None:
        return _frontend_of(q).attention(q, k, v, causal, softmax_scale, window_size, cu_seqlens_q, cu_seqlens_k,
                                         max_seqlen_q, max_seqlen_k, return_lse, seqused_k, page_table,
                                         int(num_splits), k_scale, v_scale)
    if (seqused_k is None and page_table is None and num_splits == 0):
        return _frontend_of(q).attention(q, k, v, causal, softmax_scale, window_size, cu_seqlens_q, cu_seqlens_k,
                                         max_seqlen_q, max_seqlen_k, return_lse)
    return _frontend_of(q).attention(q, k, v, causal, softmax_scale, window_size, cu_seqlens_q, cu_seqlens_k,
                                     max_seqlen_q, max_seqlen_k, return_lse, seqused_k, page_table, int(num_splits))


def attention_backward(d_out, q, k, v, out, lse, *, causal=False, softmax_scale=None, window_size=(-1, -1),
                       cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None):
    """The gradients (dq, dk, dv) of tilepipe.attention for d_out, the gradient of its output.

    q, k, v and the mask arguments as given to the forward; out and lse its outputs (return_lse=True);
    d_out shaped as out. dq, dk and dv have the shapes and dtype of q, k and v; with grouped-query
    heads dk and dv sum over the query heads of each KV head. Head dims 64 and 128. Deterministic:
    the same inputs give the same bits. PyTorch's autograd and jax.grad call this for you.
    """
    return _frontend_of(q).attention_backward(d_out, q, k, v, out, lse, causal, softmax_scale, window_size,
                                              cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)


def grouped_mm(a, b, offs=None, *, masked_m=None, out_dtype=None):
    """The grouped matmul of a mixture-of-experts layer, with torch._grouped_mm's shapes.

    a [M, K], b [G, K, N], offs int32 [G] (cumulative row ends; offs[-1] == M): rows
    offs[g-1]:offs[g] of a times b[g] -> out [M, N]. b may be the transpose of [G, N, K] weights
    (w.transpose(-2, -1)): the layout is read from its strides. a [G, M, K] with b [G, K, N]:
    a batched matmul -> [G, M, N]; with masked_m (int32 [G]) only the first masked_m[g] rows of
    each group are computed (DeepGEMM's masked decode layout; the other rows of out are left as
    they were allocated). bfloat16 or float16; out_dtype must be None or the inputs' dtype.
    """
    return _frontend_of(a).grouped_mm(a, b, offs, masked_m, out_dtype)


def matmul(a, b, bias=None, activation=None):
    """activation(a @ b + bias) with the persistent warp-specialised matmul.

    a [..., K], b [K, N] (or the transpose of an [N, K] weight: w.t()), bias [N] or None,
    activation None, "relu", "gelu" (erf), "gelu_tanh" or "silu". bfloat16 or float16, float32
    accumulation. Rows of a (and b's rows or columns) must be 16-byte multiples: K and N
    multiples of 8.
    """
    return _frontend_of(a).matmul(a, b, bias, _args.activation_code(activation))


def quantize_fp8(x, *, group=128):
    """Activations to fp8 for an fp8 matmul: x [..., K] (bfloat16 or float16, K a multiple of 16)
    -> (q, scales) with q float8_e4m3fn of x's shape and float32 scales, x ~= q * scale.

    group=128: one scale per row and 128 columns (DeepSeek-V3's 1 x 128 blocks), scales
    [..., ceil(K / 128)]; group=None: one scale per row (torch._scaled_mm's row-wise scale_a),
    scales [..., 1]. scale = amax / 448 over the group; q rounds x / scale to nearest even,
    saturating at +-448; a group of zeros gets scale 0.
    """
    if group is not None and group != 128:
        raise ValueError(f"tilepipe.quantize_fp8: group is 128 (1 x 128 blocks) or None (one scale per row), got {group}")
    return _frontend_of(x).quantize_fp8(x, 0 if group is None else 128)


def scaled_mm(a, b, scale_a, scale_b, bias=None, *, out_dtype="bfloat16", use_fast_accum=False, scale_result=None):
    """fp8 matmul with scales, torch._scaled_mm's operation: out = (a @ b) * scales + bias.

    a [M, K] row-major and b [K, N] column-major (the transpose of an [N, K] row-major tensor,
    b = w.t(), as torch._scaled_mm requires), float8_e4m3fn (torch.float8_e4m3fn, or
    ml_dtypes.float8_e4m3fn for NumPy). K a multiple of 16; N a multiple of 8 for bfloat16
    output (4 for float32: 16-byte rows). The scales are float32 arrays on a's device; their
    shapes choose the mode, as torch._scaled_mm's do:
      per-tensor  one element each (0-dim or any shape)   out = sa * sb * (a @ b)
      row-wise    scale_a [M, 1], scale_b [1, N]          out[i, j] = sa[i] * sb[j] * (a @ b)[i, j]
      block       scale_a [M, ceil(K/128)] (1 x 128 blocks of a), scale_b [ceil(K/128), ceil(N/128)]
                  (128 x 128 blocks of b), DeepSeek-V3's: each 128-wide slice of K is scaled by
                  sa[i, kb] * sb[kb, j // 128] before it is summed
    Any strides for the scales (no copies). bias: [N] of the output's dtype, or None.
    out_dtype: bfloat16 (default) or float32 (a string, a torch or a NumPy dtype).
    use_fast_accum=False promotes the tensor core's fp8 sums into float32 every 128 of K
    (torch._scaled_mm's default precision); True keeps the whole K in its accumulator
    (faster on the GPU). Block scales always promote. Returns out [M, N].
    """
    return _frontend_of(a).scaled_mm(a, b, scale_a, scale_b, bias, _args.scaled_mm_out_dtype(out_dtype, scale_result),
                                     bool(use_fast_accum))


def scaled_grouped_mm(a, b, scale_a, scale_b, offs=None, *, masked_m=None, out_dtype="bfloat16", use_fast_accum=True):
    """The fp8 grouped matmul of a mixture-of-experts layer with scales, torch._scaled_grouped_mm's
    conventions: out[i, j] = scales * sum_k a[i, k] b[g(i), k, j], g(i) the group of row i.

    a [M, K] row-major and b [G, K, N] column-major (the transpose of contiguous [G, N, K]
    weights, b = w.transpose(-2, -1), as torch._scaled_grouped_mm requires), float8_e4m3fn
    (torch.float8_e4m3fn, or ml_dtypes.float8_e4m3fn for NumPy); offs int32 [G], the groups'
    cumulative row ends (offs[-1] == M; empty groups allowed): rows offs[g-1]:offs[g] of a
    belong to group g. K a multiple of 16, N of 8; 1 to 256 groups. The scales are float32
    arrays on a's device; their shapes choose the recipe:
      row-wise  scale_a [M], scale_b [G, N] (torch._scaled_grouped_mm's):
                out[i, j] = scale_a[i] * scale_b[g, j] * sum_k a[i, k] b[g, k, j]
      block     scale_a [M, ceil(K/128)] (1 x 128 blocks of a), scale_b [G, ceil(N/128),
                ceil(K/128)] (128 x 128 blocks of each group's [N, K] weights), DeepSeek-V3's
                (and DeepGEMM's m-grouped kernels'): each 128-wide slice kb of K is scaled by
                scale_a[i, kb] * scale_b[g, j // 128, kb] before it is summed. torch has no grouped
                block-scaled op (torch._scaled_grouped_mm takes row-wise scales only).
    Any strides for row-wise scales and block scale_a; block scale_b's groups back to back (as
    in a contiguous tensor).
    a [G, Mmax, K] with b [G, K, N]: batched -> out [G, Mmax, N] (torch's 3-D x 3-D case); with
    masked_m (int32 [G], counts in [0, Mmax]) only the first masked_m[g] rows of each group are
    computed (DeepGEMM's masked decode layout; the other rows of out are left as they were
    allocated). There scale_a is [G, Mmax] (row-wise) or [G, Mmax, ceil(K/128)] (block), its
    groups back to back like a's and out's.
    out_dtype: bfloat16 (the default; None means it too, as in torch), the only output;
    anything else raises NotImplementedError.
    use_fast_accum: row-wise scales run with the whole K in the tensor core's fp8 accumulator
    (fast accumulation, use_fast_accum=True, the default here); the row-wise kernel has no
    promoting variant, so use_fast_accum=False with row-wise scales raises NotImplementedError
    rather than silently giving less precision than asked for (block scales, which promote
    every 128 of K into float32, or tilepipe.scaled_mm(..., use_fast_accum=False) per group
    promote). Block scales always promote, whatever use_fast_accum says.
    Returns out [M, N] (or [G, Mmax, N]) bfloat16 of a's framework. PyTorch and NumPy.
    """
    return _frontend_of(a).scaled_grouped_mm(a, b, scale_a, scale_b, offs, masked_m,
                                             _args.scaled_grouped_mm_out_dtype(out_dtype), bool(use_fast_accum))
