"""FlashAttention 3's forward test (hopper/test_flash_attn.py, test_flash_attn_output)
rewritten for tilepipe: its parametrisation (dtypes, MHA / MQA / GQA with 6 query heads,
causal, local windows drawn at random, head dims, the (seqlen_q, seqlen_k) pairs) and its
pass rule: max |out - ref| <= 2 max |ref_lowp - ref| + atol, where ref is the attention
computed in high precision and rounded to the dtype, ref_lowp the same computation done in
the dtype (scores, probabilities and output rounded, as PyTorch in bfloat16 would), and atol
= 2 max |(ref + 0.3 - 0.3) - ref| in the dtype. On the GPU every pair runs; in the
interpreter (CI) five pairs up to 239, head dims 64 and 128 (256 is in test_attention.py) and
batch 1, to keep CI's time."""
import ml_dtypes
import numpy as np
import pytest

import tilepipe
from conftest import HAS_CUDA, Backend

SEQLENS = [(1, 1), (64, 128), (128, 192), (256, 256), (239, 1), (799, 3), (113, 203), (113, 128), (128, 217),
           (113, 211), (108, 256), (256, 512), (384, 256), (640, 128), (512, 256), (1024, 1024), (1023, 1024),
           (1024, 1023), (4096, 4096), (4224, 4224)]
INTERPRETER_SEQLENS = [(1, 1), (64, 128), (239, 1), (113, 203), (128, 217)]
HEADS = {"mha": 6, "mqa": 1, "gqa": 2}


class NumpyMath:
    """The references' arithmetic on the host (float64; the interpreter's tests)."""

    def __init__(self):
        self.xp = np

    def f64(self, x):
        return np.asarray(x, np.float64)

    def in_dtype(self, x, dtype):
        return np.asarray(x, np.float64).astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16).astype(
            np.float64)

    def repeat_heads(self, x, n):
        return np.repeat(x, n, axis=1)

    def max_last(self, x):
        return np.max(x, -1, keepdims=True, initial=-np.inf)

    def amax(self, x):
        return float(np.max(np.abs(x), initial=0.0))

    def positions(self, sq, sk):
        return np.arange(sq)[:, None] + sk - sq, np.arange(sk)[None, :]


class TorchMath(NumpyMath):
    """The same on the GPU in float64 (FlashAttention's sizes are too large for NumPy)."""

    def __init__(self):
        import torch
        self.torch = torch
        self.xp = torch

    def f64(self, x):
        return x.to(self.torch.float64) if isinstance(x, self.torch.Tensor) else self.torch.as_tensor(
            x, dtype=self.torch.float64, device="cuda")

    def in_dtype(self, x, dtype):
        return x.to(getattr(self.torch, dtype)).to(self.torch.float64)

    def repeat_heads(self, x, n):
        return x.repeat_interleave(n, dim=1)

    def max_last(self, x):
        return x.amax(-1, keepdim=True)

    def amax(self, x):
        return float(x.abs().max()) if x.numel() else 0.0

    def positions(self, sq, sk):
        t = self.torch
        return t.arange(sq, device="cuda")[:, None] + sk - sq, t.arange(sk, device="cuda")[None, :]


def attention(m, q, k, v, scale, causal, window, dtype=None):
    """Attention for one sequence (q [Sq, Hq, D], k, v [Sk, Hkv, D]) in float64, or, with a
    dtype, FlashAttention's attention_ref(upcast=False, reorder_ops=True): the scores, the
    probabilities and the output each rounded to the dtype. Masks aligned to the bottom right."""
    xp = m.xp
    rnd = (lambda x: m.in_dtype(x, dtype)) if dtype else (lambda x: x)
    sq, hq, _ = q.shape
    sk, hkv = k.shape[0], k.shape[1]
    kk, vv = m.repeat_heads(k, hq // hkv), m.repeat_heads(v, hq // hkv)
    s = rnd(xp.einsum("qhd,khd->hqk", rnd(q * scale), kk))
    left, right = window
    if causal:
        right = 0
    i, j = m.positions(sq, sk)
    allowed = (j >= i - left) if left >= 0 else (j >= 0)
    if right >= 0:
        allowed = allowed & (j <= i + right)
    s = xp.where(allowed[None], s, -float("inf"))
    mx = m.max_last(s)
    finite = xp.isfinite(mx)
    zero = xp.zeros_like
    p = xp.where(finite, xp.exp(s - xp.where(finite, mx, zero(mx))), zero(s))
    l = p.sum(-1, keepdims=True) if xp is np else p.sum(-1, keepdim=True)
    p = rnd(xp.where(l > 0, p / xp.where(l > 0, l, xp.ones_like(l)), zero(p)))
    return rnd(xp.einsum("hqk,khd->qhd", p, vv))


def pass_rule(m, out, q, k, v, scale, causal, window, dtype):
    ref = m.in_dtype(attention(m, q, k, v, scale, causal, window), dtype)
    lowp = attention(m, q, k, v, scale, causal, window, dtype)
    atol = 2 * m.amax(m.in_dtype(m.in_dtype(ref + 0.3, dtype) - 0.3, dtype) - ref)
    err, bound = m.amax(out - ref), 2 * m.amax(lowp - ref) + atol
    assert err <= bound, f"max |out - ref| = {err:.3g} > 2 max |ref_lowp - ref| + atol = {bound:.3g}"


def flash_attn_cases(seqlens, head_dims):
    for dtype in ("bfloat16", "float16"):
        for mha_type in HEADS:
            for d in head_dims:
                for causal, local in ((False, False), (True, False), (False, True)):
                    for sq, sk in seqlens:
                        yield dtype, mha_type, d, causal, local, sq, sk


def backends():
    return ["torch-cuda"] if HAS_CUDA else ["numpy"]


@pytest.mark.parametrize("backend_name", backends())
@pytest.mark.parametrize("dtype,mha_type,d,causal,local,seqlen_q,seqlen_k",
                         list(flash_attn_cases(SEQLENS, (64, 128, 256)) if HAS_CUDA
                              else flash_attn_cases(INTERPRETER_SEQLENS, (64, 128))))
def test_flash_attn_output(backend_name, rng, dtype, mha_type, d, causal, local, seqlen_q, seqlen_k):
    backend = Backend(backend_name)
    batch = (9 if seqlen_k <= 2048 else 2) if HAS_CUDA else 1
    nheads, nheads_kv = 6, HEADS[mha_type]
    window = tuple(int(x) for x in rng.integers(0, seqlen_k, 2)) if local else (-1, -1)
    arrays = [backend.array(rng.standard_normal((batch, s, h, d)), dtype)
              for s, h in ((seqlen_q, nheads), (seqlen_k, nheads_kv), (seqlen_k, nheads_kv))]
    out = tilepipe.attention(*arrays, causal=causal, window_size=window)
    m = TorchMath() if backend.framework == "torch" else NumpyMath()
    q, k, v, out = (m.f64(x) for x in (*arrays, out))
    for b in range(batch):
        pass_rule(m, out[b], q[b], k[b], v[b], d ** -0.5, causal, window, dtype)
