"""JAX: tilepipe.jax.attention and tilepipe.jax.grouped_mm through XLA's FFI.

The extension's XLA FFI handlers are registered for the CPU platform (the interpreter) and,
in builds with nvcc, for CUDA (XLA's stream; command-buffer compatible, so XLA may put them
in its CUDA graphs). Shapes and dtypes are checked at trace time with the same checks as
the other frontends (errors name the argument); offsets in host memory are checked when the
handler runs. There is no batching rule (vmap) and no differentiation rule: both raise.

    import jax, tilepipe.jax as tpj
    out = jax.jit(lambda q, k, v: tpj.attention(q, k, v, causal=True))(q, k, v)
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


def attention(q, k, v, *, causal=False, softmax_scale=None, window_size=(-1, -1), cu_seqlens_q=None,
              cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, return_lse=False):
    """tilepipe.attention for JAX arrays (see its docstring); works under jax.jit.
    With cu_seqlens_q traced (inside jit), max_seqlen_q must be given: it is static."""
    del max_seqlen_k
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    left, right = _args.window(causal, window_size)
    scale = _args.softmax_scale(q.shape[-1], softmax_scale)
    if varlen and max_seqlen_q is None and cu_seqlens_q is not None:
        max_seqlen_q = _concrete_max_length(cu_seqlens_q)
    max_sq = -1 if max_seqlen_q is None else int(max_seqlen_q)
    lse_shape = _args.lse_shape(q.shape, varlen)
    as_arg = lambda x: None if x is None else _placeholder(x)
    _C.attention_check(_placeholder(q), _placeholder(k), _placeholder(v), _placeholder(q),
                       (lse_shape, "float32", False), as_arg(cu_seqlens_q), as_arg(cu_seqlens_k), max_sq, scale,
                       False, left, right, 0, False)
    if not varlen:  # the handler's varlen arguments, unused
        cu_seqlens_q = cu_seqlens_k = jnp.zeros((1,), jnp.int32)
    call = jax.ffi.ffi_call("tilepipe_attention", (jax.ShapeDtypeStruct(q.shape, q.dtype),
                                                   jax.ShapeDtypeStruct(lse_shape, jnp.float32)))
    out, lse = call(q, k, v, cu_seqlens_q, cu_seqlens_k, varlen=bool(varlen), max_seqlen_q=np.int32(max_sq),
                    softmax_scale=np.float32(scale), causal=False, window_left=np.int32(left),
                    window_right=np.int32(right))
    return (out, lse) if return_lse else out


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
                        return_lse):
    return attention(q, k, v, causal=causal, softmax_scale=softmax_scale, window_size=window_size,
                     cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                     return_lse=return_lse)


class _Frontend:
    """What tilepipe.attention / grouped_mm / matmul call with JAX arrays (tilepipe._api)."""
    attention = staticmethod(_frontend_attention)
    grouped_mm = staticmethod(_frontend_grouped_mm)
    matmul = staticmethod(_frontend_matmul)

    @staticmethod
    def quantize_fp8(x, group):
        raise NotImplementedError("tilepipe.quantize_fp8 has no JAX implementation yet; pass a torch.Tensor or a NumPy array")
