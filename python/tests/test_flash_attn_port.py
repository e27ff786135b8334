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
from conftest import HAS_CUDA, Backend, attention_reference, rounded

SEQLENS = [(1, 1), (64, 128), (128, 192), (256, 256), (239, 1), (799, 3), (113, 203), (113, 128), (128, 217),
           (113, 211), (108, 256), (256, 512), (384, 256), (640, 128), (512, 256), (1024, 1024), (1023, 1024),
           (1024, 1023), (4096, 4096), (4224, 4224)]
INTERPRETER_SEQLENS = [(1, 1), (64, 128), (239, 1), (113, 203), (128, 217)]
HEADS = {"mha": 6, "mqa": 1, "gqa": 2}


def in_dtype(x, dtype):
    return np.asarray(x, np.float64).astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16).astype(np.float64)


def attention_lowp(q, k, v, scale, causal, window, dtype):
    """FlashAttention's attention_ref(upcast=False, reorder_ops=True) for one sequence: the
    scores, probabilities and output each rounded to the dtype."""
    sq, hq, d = q.shape
    sk, hkv = k.shape[:2]
    kk, vv = np.repeat(k, hq // hkv, axis=1), np.repeat(v, hq // hkv, axis=1)
    s = in_dtype(np.einsum("qhd,khd->hqk", in_dtype(q * scale, dtype), kk), dtype)
    left, right = window
    if causal:
        right = 0
    i = np.arange(sq)[:, None] + sk - sq
    j = np.arange(sk)[None, :]
    allowed = np.ones((sq, sk), bool)
    if left >= 0:
        allowed &= j >= i - left
    if right >= 0:
        allowed &= j <= i + right
    s = np.where(allowed[None], s.astype(np.float32), -np.inf)
    m = np.max(s, -1, keepdims=True, initial=-np.inf)
    p = np.where(np.isfinite(m), np.exp(s - np.where(np.isfinite(m), m, 0)), 0)
    l = p.sum(-1, keepdims=True)
    p = in_dtype(np.divide(p, l, out=np.zeros_like(p), where=l > 0), dtype)
    return in_dtype(np.einsum("hqk,khd->qhd", p, vv), dtype)


def pass_rule(out, q, k, v, scale, causal, window, dtype):
    ref64, _ = attention_reference(q, k, v, causal=causal, scale=scale, window=window)
    ref = in_dtype(ref64, dtype)
    lowp = attention_lowp(q, k, v, scale, causal, window, dtype)
    atol = 2 * np.max(np.abs(in_dtype(in_dtype(ref + 0.3, dtype) - 0.3, dtype) - ref), initial=0.0)
    err, bound = np.max(np.abs(out - ref), initial=0.0), 2 * np.max(np.abs(lowp - ref), initial=0.0) + atol
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
    q = rounded(rng.standard_normal((batch, seqlen_q, nheads, d)), dtype)
    k = rounded(rng.standard_normal((batch, seqlen_k, nheads_kv, d)), dtype)
    v = rounded(rng.standard_normal((batch, seqlen_k, nheads_kv, d)), dtype)
    scale = d ** -0.5
    out = tilepipe.attention(*(backend.array(x, dtype) for x in (q, k, v)), causal=causal, window_size=window)
    out = backend.numpy(out)
    for b in range(batch):
        pass_rule(out[b], q[b], k[b], v[b], scale, causal, window, dtype)
