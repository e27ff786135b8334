"""JAX: tilepipe.jax.attention and tilepipe.jax.grouped_mm through XLA's FFI.

The extension's XLA FFI handlers are registered for the CPU platform (the interpreter) and,
in builds with nvcc, for CUDA (XLA's stream; command-buffer compatible, so XLA may put them
in its CUDA graphs). Shapes and dtypes are checked at trace time with the same checks as
the other frontends (errors name the argument); offsets in host memory are checked when the
handler runs. attention is differentiable (a custom_vjp over tilepipe's attention backward;
head dims 64 and 128; its lse output has no gradient); there is no batching rule (vmap), and
grouped_mm has no differentiation rule: both raise.

    import jax, tilepipe.jax as tpj
    out = jax.jit(lambda q, k, v: tpj.attention(q, k, v, causal=True))(q, k, v)
    dq, dk, dv = jax.grad(lambda q, k, v: tpj.attention(q, k, v).astype(jnp.float32).sum(), (0, 1, 2))(q, k, v)
    y = tpj.grouped_mm(lhs, rhs, group_sizes)     # jax.lax.ragged_dot's argument order
"""
import jax
import jax.numpy as jnp
import numpy as np

from . import _C, _args

_handlers = _C.xla_handlers()
if not _handlers:
    raise ImportError("tilepipe.jax: this build of tilepipe has no XLA FFI handlers (jax was not in its build "
                      "environment); reinstall with jax installed: pip install --no-build-isolation .")
for (_name, _platform), _capsule in _handlers.items():
    jax.ffi.register_ffi_target(_name, _capsule, platform=_platform)


def _placeholder(x, dtype=None):
    """A trace-time stand-in the extension's checks accept: (shape, dtype name, on_gpu)."""
    return (tuple(int(d) for d in x.shape), str(jnp.dtype(dtype or x.dtype)), False)


def _concrete_max_length(cu_seqlens):
    """max_seqlen_q from offsets whose values are known on the host (outside jit, on the CPU);
    None under tracing and for offsets on a GPU, as in PyTorch: reading them would wait for the
    device."""
    if isinstance(cu_seqlens, jax.core.Tracer):
        return None
    if any(d.platform != "cpu" for d in getattr(cu_seqlens, "devices", lambda: ())()):
        return None
    offsets = np.asarray(cu_seqlens)
    return int(np.max(np.diff(offsets))) if offsets.size > 1 else 0


def _lengths(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k):
    """(varlen, max_seqlen_q, max_seqlen_k) as the handlers take them: maxima found from offsets
    known on the host when not given, -1 where unknown."""
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen and max_seqlen_q is None and cu_seqlens_q is not None:
        max_seqlen_q = _concrete_max_length(cu_seqlens_q)
    if varlen and max_seqlen_k is None and cu_seqlens_k is not None:
        max_seqlen_k = _concrete_max_length(cu_seqlens_k)
    return (varlen, -1 if max_seqlen_q is None else int(max_seqlen_q),
            -1 if max_seqlen_k is None else int(max_seqlen_k))


def attention(q, k, v, *, causal=False, softmax_scale=None, window_size=(-1, -1), cu_seqlens_q=None,
              cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, return_lse=False):
    """tilepipe.attention for JAX arrays (see its docstring); works under jax.jit and jax.grad.
    With cu_seqlens_q traced (inside jit), max_seqlen_q must be given: it is static; so is
    max_seqlen_k for the gradient with cu_seqlens_k on a GPU."""
    varlen, max_sq, max_sk = _lengths(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    left, right = _args.window(causal, window_size)
    scale = _args.softmax_scale(q.shape[-1], softmax_scale)
    lse_shape = _args.lse_shape(q.shape, varlen)
    as_arg = lambda x: None if x is None else _placeholder(x)
    _C.attention_check(_placeholder(q), _placeholder(k), _placeholder(v), _placeholder(q),
                       (lse_shape, "float32", False), as_arg(cu_seqlens_q), as_arg(cu_seqlens_k), max_sq, scale,
                       False, left, right, 0, False)
    if not varlen:  # the handler's varlen arguments, unused
        cu_seqlens_q = cu_seqlens_k = jnp.zeros((1,), jnp.int32)
    out, lse = _attention(q, k, v, cu_seqlens_q, cu_seqlens_k, (varlen, max_sq, max_sk, scale, left, right))
    # The LSE has no gradient (FlashAttention's): the backward ignores its cotangent, so a
    # loss through it must see none rather than a wrong one.
    return (out, jax.lax.stop_gradient(lse)) if return_lse else out


def _attention_call(q, k, v, cu_seqlens_q, cu_seqlens_k, params):
    varlen, max_sq, _, scale, left, right = params
    call = jax.ffi.ffi_call("tilepipe_attention", (jax.ShapeDtypeStruct(q.shape, q.dtype),
                                                   jax.ShapeDtypeStruct(_args.lse_shape(q.shape, varlen), jnp.float32)))
    return call(q, k, v, cu_seqlens_q, cu_seqlens_k, varlen=varlen, max_seqlen_q=np.int32(max_sq),
                softmax_scale=np.float32(scale), causal=False, window_left=np.int32(left), window_right=np.int32(right))


_attention = jax.custom_vjp(_attention_call, nondiff_argnums=(5,))


def _attention_fwd(q, k, v, cu_seqlens_q, cu_seqlens_k, params):
    out, lse = _attention_call(q, k, v, cu_seqlens_q, cu_seqlens_k, params)
    return (out, lse), (q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse)


def _attention_bwd(params, residuals, cotangents):
    varlen, max_sq, max_sk, scale, left, right = params
    q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse = residuals
    d_out = cotangents[0].astype(q.dtype)
    cu = (_placeholder(cu_seqlens_q), _placeholder(cu_seqlens_k)) if varlen else (None, None)
    _C.attention_backward_check(_placeholder(q), _placeholder(k), _placeholder(v), _placeholder(q), _placeholder(q),
                                _placeholder(lse), _placeholder(q), _placeholder(k), _placeholder(v),
                                _placeholder(lse), *cu, max_sq, max_sk if not varlen or max_sk >= 0 else 0, scale,
                                False, left, right, 0, False)
    call = jax.ffi.ffi_call("tilepipe_attention_backward", (
        jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct(k.shape, k.dtype),
        jax.ShapeDtypeStruct(v.shape, v.dtype), jax.ShapeDtypeStruct(lse.shape, jnp.float32)))
    dq, dk, dv, _ = call(q, k, v, out, d_out, lse, cu_seqlens_q, cu_seqlens_k, varlen=varlen,
                         max_seqlen_q=np.int32(max_sq), max_seqlen_k=np.int32(max_sk), softmax_scale=np.float32(scale),
                         causal=False, window_left=np.int32(left), window_right=np.int32(right))
    return dq, dk, dv, None, None


_attention.defvjp(_attention_fwd, _attention_bwd)


def attention_backward(d_out, q, k, v, out, lse, *, causal=False, softmax_scale=None, window_size=(-1, -1),
                       cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None):
    """tilepipe.attention_backward for JAX arrays (see its docstring): (dq, dk, dv)."""
    varlen, max_sq, max_sk = _lengths(cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    left, right = _args.window(causal, window_size)
    scale = _args.softmax_scale(q.shape[-1], softmax_scale)
    if not varlen:
        cu_seqlens_q = cu_seqlens_k = jnp.zeros((1,), jnp.int32)
    params = (varlen, max_sq, max_sk, scale, left, right)
    return _attention_bwd(params, (q, k, v, cu_seqlens_q, cu_seqlens_k, out, lse), (d_out, None))[:3]


def grouped_mm(lhs, rhs, group_sizes, *, preferred_element_type=None):
    """jax.lax.ragged_dot(lhs, rhs, group_sizes) on tilepipe's grouped matmul: lhs [M, K], rhs
    [G, K, N], group_sizes int32 [G] with sum(group_sizes) == M (ragged_dot zero-fills rows past
    the sum; tilepipe needs every row in a group). preferred_element_type: None or lhs's dtype."""
    _args.check_out_dtype("tilepipe.jax.grouped_mm", None if preferred_element_type is None
                          else jnp.dtype(preferred_element_type), jnp.dtype(lhs.dtype))
    if lhs.ndim != 2 or rhs.ndim != 3:
        raise TypeError(f"tilepipe.jax.grouped_mm: lhs must be [M, K] and rhs [G, K, N], got shapes {lhs.shape} and "
                        f"{rhs.shape}")
    out_shape = (lhs.shape[0], rhs.shape[2])
    sizes = jnp.asarray(group_sizes)
    if sizes.dtype != jnp.int32:
        raise TypeError(f"tilepipe.jax.grouped_mm: group_sizes must be int32, got {sizes.dtype}")
    _C.grouped_mm_check(_placeholder(lhs), _placeholder(rhs), (out_shape, str(jnp.dtype(lhs.dtype)), False),
                        _placeholder(sizes), False, 0, False, True)
    offsets = jnp.cumsum(sizes, dtype=jnp.int32)  # the kernel's table: cumulative row ends
    call = jax.ffi.ffi_call("tilepipe_grouped_mm", jax.ShapeDtypeStruct(out_shape, lhs.dtype))
    return call(lhs, rhs, offsets)


def _frontend_matmul(a, b, bias, activation):
    raise NotImplementedError("tilepipe.matmul has no JAX implementation (XLA's dot is the peer there); tilepipe.jax "
                              "has attention and grouped_mm")


def _frontend_grouped_mm(a, b, offs, masked_m, out_dtype):
    """tilepipe.grouped_mm (torch._grouped_mm's offsets) on JAX arrays: the ragged case only."""
    if a.ndim != 2 or b.ndim != 3 or offs is None or masked_m is not None:
        raise NotImplementedError("tilepipe.grouped_mm on JAX arrays: only a 2-D a with a 3-D b and offs (use "
                                  "tilepipe.jax.grouped_mm, ragged_dot's order)")
    offs = jnp.asarray(offs, jnp.int32)
    sizes = jnp.diff(offs, prepend=jnp.zeros((1,), jnp.int32))
    return grouped_mm(a, b, sizes, preferred_element_type=out_dtype)


def _frontend_attention(q, k, v, causal, softmax_scale, window_size, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                        max_seqlen_k, return_lse, seqused_k=None, page_table=None, num_splits=0, k_scale=None,
                        v_scale=None):
    if k_scale is not None or v_scale is not None or str(k.dtype) == "float8_e4m3fn":
        raise NotImplementedError("tilepipe.attention: an fp8 KV cache (float8_e4m3fn k and v, k_scale, v_scale) is for "
                                  "torch.Tensor and NumPy arrays (not JAX yet)")
    if seqused_k is not None or page_table is not None or num_splits:
        raise NotImplementedError("tilepipe.attention: seqused_k, page_table and num_splits are for torch.Tensor and "
                                  "NumPy arrays (not JAX yet)")
    return attention(q, k, v, causal=causal, softmax_scale=softmax_scale, window_size=window_size,
                     cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                     max_seqlen_k=max_seqlen_k, return_lse=return_lse)


def _frontend_attention_backward(d_out, q, k, v, out, lse, causal, softmax_scale, window_size, cu_seqlens_q,
                                 cu_seqlens_k, max_seqlen_q, max_seqlen_k):
    return attention_backward(d_out, q, k, v, out, lse, causal=causal, softmax_scale=softmax_scale,
                              window_size=window_size, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                              max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k)


class _Frontend:
    """What tilepipe.attention / grouped_mm / matmul / ... call with JAX arrays (tilepipe._api)."""
    attention = staticmethod(_frontend_attention)
    attention_backward = staticmethod(_frontend_attention_backward)
    grouped_mm = staticmethod(_frontend_grouped_mm)
    matmul = staticmethod(_frontend_matmul)

    @staticmethod
    def quantize_fp8(x, group):
        raise NotImplementedError("tilepipe.quantize_fp8 has no JAX implementation yet; pass a torch.Tensor or a NumPy array")

    @staticmethod
    def scaled_mm(a, b, scale_a, scale_b, bias, out_dtype, use_fast_accum):
        raise NotImplementedError("tilepipe.scaled_mm has no JAX implementation yet; pass torch.Tensors or NumPy arrays")

    @staticmethod
    def scaled_grouped_mm(a, b, scale_a, scale_b, offs, masked_m, out_dtype, use_fast_accum):
        raise NotImplementedError("tilepipe.scaled_grouped_mm has no JAX implementation yet; pass torch.Tensors or "
                                  "NumPy arrays")
