"""tilepipe's kernels from Python: flash attention, the grouped (MoE) matmul, the
persistent matmul and the fp8 matmuls (dense and grouped), for PyTorch, JAX, NumPy and CuPy arrays.

CUDA tensors run on the GPU (sm_90a: H100 / H200), host tensors in tilepipe's CPU
interpreter (the same kernel source, simulated). See docs/python.md.

    import tilepipe
    out = tilepipe.attention(q, k, v, causal=True)          # q, k, v: [batch, seqlen, heads, head_dim]
    out.float().square().sum().backward()                   # PyTorch autograd (jax.grad for tilepipe.jax)
    y = tilepipe.grouped_mm(x, w, offs=offs)                # torch._grouped_mm's shapes
    y = tilepipe.matmul(x, w.t(), bias=b, activation="gelu")
    y = tilepipe.scaled_mm(x8, w8.t(), scale_x, scale_w, out_dtype=torch.bfloat16)   # torch._scaled_mm's
    y = tilepipe.scaled_grouped_mm(x8, w8.transpose(-2, -1), sx, sw, offs=offs)       # torch._scaled_grouped_mm's

JAX: tilepipe.jax.attention and tilepipe.jax.grouped_mm (XLA FFI; under jax.jit).
FlashAttention's names: tilepipe.flash_attn_interface.flash_attn_func / flash_attn_varlen_func.
"""
import importlib.util as _importlib_util

from . import _C
from ._api import attention, attention_backward, grouped_mm, matmul, quantize_fp8, scaled_grouped_mm, scaled_mm

# With PyTorch installed its operators (torch.ops.tilepipe.*) are registered at import, as
# FlashAttention's are: torch.compile, torch.library.opcheck and code that calls the
# operators directly must find them before any eager call has happened.
if _importlib_util.find_spec("torch") is not None:
    from . import _torch  # noqa: F401

__version__ = "0.1.0"
__all__ = ["attention", "attention_backward", "grouped_mm", "matmul", "quantize_fp8", "scaled_grouped_mm", "scaled_mm",
           "built_with_cuda"]


def built_with_cuda() -> bool:
    """Whether this build has the sm_90a GPU kernels (nvcc was found when it was built);
    without them only host arrays (the interpreter) can be used."""
    return _C.built_with_cuda()
