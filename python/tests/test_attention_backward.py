"""The gradients of tilepipe.attention on every backend against float64 gradients computed
here from the rounded inputs: PyTorch through autograd (loss.backward()), JAX through jax.vjp
and jax.grad (also under jit), NumPy and CuPy through tilepipe.attention_backward. Causal
with Sq < Sk and Sq > Sk, windows, GQA / MQA (dk, dv summed over a KV head's query heads),
one query row, one key, head dim 256, varlen with empty sequences; the same bits on a second
run; the LSE's missing gradient reported."""
import numpy as np
import pytest

import tilepipe
from conftest import HAS_TORCH, allowed_keys, rel_error, rounded, torch

TOL = 2e-2  # relative Frobenius error of each gradient (bf16 / f16 inputs, 16-bit P and dS inside)


def gradient_reference(q, k, v, d_out, *, causal=False, scale=None, window=(-1, -1)):
    """float64 dq, dk, dv of FlashAttention's attention for one sequence (q, d_out [Sq, Hq, D],
    k, v [Sk, Hkv, D]; masks aligned to the bottom right; rows without keys contribute nothing)."""
    sq, hq, d = q.shape
    sk, hkv = k.shape[0], k.shape[1]
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    group = hq // hkv
    kk, vv = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    s = np.where(allowed_keys(sq, sk, causal, window)[None], np.einsum("qhd,khd->hqk", q, kk) * scale, -np.inf)
    m = np.max(s, axis=-1, keepdims=True, initial=-np.inf)
    p = np.where(np.isfinite(m), np.exp(s - np.where(np.isfinite(m), m, 0.0)), 0.0)
    l = p.sum(-1, keepdims=True)
    p = np.divide(p, l, out=np.zeros_like(p), where=l > 0)
    dp = np.einsum("qhd,khd->hqk", d_out, vv)
    ds = p * (dp - np.sum(p * dp, axis=-1, keepdims=True))
    dq = np.einsum("hqk,khd->qhd", ds, kk) * scale
    dk = np.einsum("hqk,qhd->khd", ds, q) * scale
    dv = np.einsum("hqk,qhd->khd", p, d_out)
    fold = lambda x: x.reshape(sk, hkv, group, d).sum(axis=2)  # the query heads of a KV head
    return dq, fold(dk), fold(dv)


def gradients(backend, q, k, v, d_out, **kw):
    """(dq, dk, dv) as float64 NumPy arrays: autograd for PyTorch, jax.vjp for JAX, the explicit
    call for NumPy and CuPy."""
    if backend.framework == "torch":
        q, k, v = (x.detach().requires_grad_() for x in (q, k, v))
        tilepipe.attention(q, k, v, **kw).backward(d_out)
        return tuple(backend.numpy(x.grad) for x in (q, k, v))
    if backend.framework == "jax":
        import jax
        import tilepipe.jax as tpj
        _, vjp = jax.vjp(lambda q, k, v: tpj.attention(q, k, v, **kw), q, k, v)
        return tuple(backend.numpy(x) for x in vjp(d_out))
    out, lse = tilepipe.attention(q, k, v, return_lse=True, **kw)
    return tuple(backend.numpy(x) for x in tilepipe.attention_backward(d_out, q, k, v, out, lse, **kw))


CASES = {
    "plain": dict(batch=2, sq=70, sk=70, hq=2, hkv=2, d=64, dtype="bfloat16"),
    "causal_sq_lt_sk_gqa": dict(batch=1, sq=65, sk=200, hq=4, hkv=2, d=128, dtype="float16", causal=True),
    "causal_sq_gt_sk_rows_without_keys": dict(batch=1, sq=150, sk=65, hq=2, hkv=1, d=64, dtype="bfloat16",
                                              causal=True),
    "window_scale": dict(batch=1, sq=130, sk=130, hq=2, hkv=2, d=64, dtype="float16", window=(32, 8), scale=0.3),
    "one_row_mqa": dict(batch=2, sq=1, sk=100, hq=4, hkv=1, d=128, dtype="bfloat16"),
    "one_key": dict(batch=2, sq=7, sk=1, hq=2, hkv=2, d=64, dtype="float16"),
    "head_dim_256_causal_gqa": dict(batch=1, sq=40, sk=70, hq=2, hkv=1, d=256, dtype="bfloat16", causal=True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_gradients_fixed_length(backend, rng, case):
    c = dict(CASES[case])
    batch, sq, sk, hq, hkv, d, dtype = (c.pop(x) for x in ("batch", "sq", "sk", "hq", "hkv", "d", "dtype"))
    kw = dict(causal=c.get("causal", False), window_size=c.get("window", (-1, -1)), softmax_scale=c.get("scale"))
    q, d_out = rng.standard_normal((batch, sq, hq, d)), rng.standard_normal((batch, sq, hq, d))
    k, v = rng.standard_normal((batch, sk, hkv, d)), rng.standard_normal((batch, sk, hkv, d))
    got = gradients(backend, *(backend.array(x, dtype) for x in (q, k, v, d_out)), **kw)
    for x, shape in zip(got, (q.shape, k.shape, v.shape)):
        assert x.shape == shape
    q, k, v, d_out = (rounded(x, dtype) for x in (q, k, v, d_out))
    for b in range(batch):
        ref = gradient_reference(q[b], k[b], v[b], d_out[b], causal=kw["causal"], scale=kw["softmax_scale"],
                                 window=kw["window_size"])
        for name, x, r in zip(("dq", "dk", "dv"), got, ref):
            assert rel_error(x[b], r) < TOL, f"{name}, batch {b}"


def test_gradients_varlen_with_empty_sequences(backend, rng):
    lengths_q, lengths_k = [37, 0, 80, 5], [50, 20, 0, 64]
    cu_q, cu_k = np.cumsum([0] + lengths_q), np.cumsum([0] + lengths_k)
    hq, hkv, d, dtype = 4, 2, 64, "bfloat16"
    q, d_out = rng.standard_normal((cu_q[-1], hq, d)), rng.standard_normal((cu_q[-1], hq, d))
    k, v = rng.standard_normal((cu_k[-1], hkv, d)), rng.standard_normal((cu_k[-1], hkv, d))
    kw = dict(causal=True, cu_seqlens_q=backend.array(cu_q, "int32"), cu_seqlens_k=backend.array(cu_k, "int32"),
              max_seqlen_q=max(lengths_q), max_seqlen_k=max(lengths_k))
    got = gradients(backend, *(backend.array(x, dtype) for x in (q, k, v, d_out)), **kw)
    q, k, v, d_out = (rounded(x, dtype) for x in (q, k, v, d_out))
    for b in range(len(lengths_q)):
        rq, rk = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        ref = gradient_reference(q[rq], k[rk], v[rk], d_out[rq], causal=True)
        for name, x, r, rows in zip(("dq", "dk", "dv"), got, ref, (rq, rk, rk)):
            assert rel_error(x[rows], r) < TOL, f"{name}, sequence {b}"


def test_same_bits_on_a_second_run(backend, rng):
    q, k, v, d_out = (backend.array(rng.standard_normal((1, 90, 4, 64)), "bfloat16") for _ in range(4))
    first = gradients(backend, q, k, v, d_out, causal=True)
    second = gradients(backend, q, k, v, d_out, causal=True)
    for a, b in zip(first, second):
        assert np.array_equal(a, b)


@pytest.mark.skipif(not HAS_TORCH, reason="needs PyTorch")
def test_torch_lse_has_no_gradient_and_the_forward_without_it_recomputes(rng):
    q, k, v = (torch.tensor(rng.standard_normal((1, 40, 2, 64)), dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    out, lse = tilepipe.attention(q, k, v, return_lse=True)
    assert out.requires_grad and not lse.requires_grad
    # The operator called directly without the LSE: the backward computes it again.
    scale = 64 ** -0.5
    out2, _ = torch.ops.tilepipe.attention(q, k, v, None, None, -1, scale, -1, -1, False)
    d_out = torch.tensor(rng.standard_normal(out.shape), dtype=torch.bfloat16)
    got = torch.autograd.grad(out2, (q, k, v), d_out)
    want = torch.autograd.grad(out, (q, k, v), d_out)
    for a, b in zip(got, want):
        assert torch.equal(a, b)


@pytest.mark.skipif(not HAS_TORCH, reason="needs PyTorch")
def test_torch_opcheck_attention_backward(rng):
    q, k, v, d_out = (torch.tensor(rng.standard_normal((1, 33, 2, 64)), dtype=torch.float16) for _ in range(4))
    scale = 64 ** -0.5
    out, lse = torch.ops.tilepipe.attention(q, k, v, None, None, -1, scale, -1, 0, True)
    torch.library.opcheck(torch.ops.tilepipe.attention_backward, (d_out, q, k, v, out, lse, None, None, -1, -1, scale, -1, 0),
                          test_utils=("test_schema", "test_faketensor"))


def test_jax_grad_under_jit(rng):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    import tilepipe.jax as tpj
    q, k, v, w = (rng.standard_normal((1, 50, 2, 64)) for _ in range(4))
    loss = lambda q, k, v: jnp.sum(tpj.attention(q, k, v, causal=True).astype(jnp.float32) * w)
    args = [jnp.asarray(x, jnp.bfloat16) for x in (q, k, v)]
    got = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(*args)
    q, k, v, w = (rounded(x, "bfloat16") for x in (q, k, v, w))
    ref = gradient_reference(q[0], k[0], v[0], rounded(w[0], "bfloat16"), causal=True)
    for name, x, r in zip(("dq", "dk", "dv"), got, ref):
        assert rel_error(np.asarray(x, np.float64)[0], r) < TOL, name
