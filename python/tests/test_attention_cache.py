"""tilepipe.attention over a KV cache (FlashAttention-3's seqused_k and page_table, split-KV's
num_splits) on PyTorch and NumPy against a float64 reference over each sequence's used keys:
decode (Sq 1) and speculative rows (Sq 4), GQA, ragged lengths with an empty one, causal
(bottom-right: query i of Sq sees the first used - Sq + 1 + i keys), page sizes 16 and 64 with
a shuffled table over a pool larger than needed (unused pages and rows NaN), explicit splits,
flash_attn_with_kvcache, and bad caches reported. An fp8 cache (float8_e4m3fn k and v, scales per
tensor or per KV head, arrays or floats; NaN codes where unused) against float64 on the values
its codes stand for."""
import ml_dtypes
import numpy as np
import pytest

import tilepipe
from conftest import HAS_TORCH, attention_reference, rel_error, rounded, torch

TOL = 1e-2


def cache_backend(backend):
    if backend.framework not in ("numpy", "torch"):
        pytest.skip("the KV cache path is for PyTorch and NumPy")
    return backend


def reference(q, k, v, used, causal):
    """float64 out [B, Sq, Hq, D] over the first used[b] keys of each sequence."""
    out = np.zeros(q.shape)
    for b in range(q.shape[0]):
        out[b] = attention_reference(q[b], k[b, :used[b]], v[b, :used[b]], causal=causal)[0]
    return out


def page_cache(rng, k, v, page):
    """k, v [B, S, H, D] as a pool of pages (twice the pages needed, NaN where unused) and a
    shuffled page table."""
    b, s, h, d = k.shape
    per_seq = (s + page - 1) // page
    pool = 2 * b * per_seq
    order = rng.permutation(pool)[: b * per_seq].reshape(b, per_seq)
    kp, vp = np.full((pool, page, h, d), np.nan), np.full((pool, page, h, d), np.nan)
    for i in range(b):
        for j in range(per_seq):
            rows = slice(j * page, min(s, (j + 1) * page))
            n = rows.stop - rows.start
            kp[order[i, j], :n], vp[order[i, j], :n] = k[i, rows], v[i, rows]
    return kp, vp, order.astype(np.int32)


@pytest.mark.parametrize("sq,causal,page,splits", [(1, False, 0, 0), (4, True, 0, 3), (1, False, 16, 0),
                                                   (4, True, 64, 0), (1, True, 16, 5)])
def test_cache(backend, rng, sq, causal, page, splits):
    backend = cache_backend(backend)
    b, sk, hq, hkv, d, dtype = 3, 150, 8, 2, 64, "bfloat16"
    used = np.array([150, 0, 37], np.int32) if not causal else np.array([150, 5, 37], np.int32)
    q = rng.standard_normal((b, sq, hq, d))
    k, v = rng.standard_normal((b, sk, hkv, d)), rng.standard_normal((b, sk, hkv, d))
    for i in range(b):  # keys past a sequence's length are never read
        k[i, used[i]:], v[i, used[i]:] = np.nan, np.nan
    if page:
        kc, vc, table = page_cache(rng, k, v, page)
        table = backend.array(table, "int32")
    else:
        kc, vc, table = k, v, None
    out = tilepipe.attention(backend.array(q, dtype), backend.array(kc, dtype), backend.array(vc, dtype),
                             causal=causal, seqused_k=backend.array(used, "int32"), page_table=table,
                             num_splits=splits)
    got = backend.numpy(out)
    q, k, v = (rounded(np.nan_to_num(x), dtype) for x in (q, k, v))
    want = reference(q, k, v, used, causal)
    assert not np.isnan(got).any()
    assert rel_error(got, want) < TOL


def test_bad_caches_are_reported(backend, rng):
    backend = cache_backend(backend)
    q = backend.array(rng.standard_normal((2, 1, 4, 64)), "bfloat16")
    pages = backend.array(rng.standard_normal((8, 24, 2, 64)), "bfloat16")  # page size 24
    used = backend.array(np.array([10, 20], np.int32), "int32")
    table = backend.array(np.zeros((2, 2), np.int32), "int32")
    with pytest.raises(ValueError, match="power of two from 16 to 256"):
        tilepipe.attention(q, pages, pages, seqused_k=used, page_table=table)
    with pytest.raises(ValueError, match="page_table needs seqused_k"):
        tilepipe.attention(q, pages, pages, page_table=table)
    kv = backend.array(rng.standard_normal((2, 24, 2, 64)), "bfloat16")
    with pytest.raises(ValueError, match="num_splits"):
        tilepipe.attention(q, kv, kv, num_splits=65)


@pytest.mark.skipif(not HAS_TORCH, reason="needs PyTorch")
def test_flash_attn_with_kvcache(rng):
    from tilepipe.flash_attn_interface import flash_attn_with_kvcache
    q = rng.standard_normal((2, 1, 4, 64))
    k, v = rng.standard_normal((2, 90, 1, 64)), rng.standard_normal((2, 90, 1, 64))
    t = lambda x: torch.tensor(x, dtype=torch.bfloat16)
    out, lse = flash_attn_with_kvcache(t(q), t(k), t(v), cache_seqlens=60, causal=True, return_softmax_lse=True)
    assert tuple(lse.shape) == (2, 4, 1)
    want = reference(*(rounded(x, "bfloat16") for x in (q, k, v)), [60, 60], True)
    assert rel_error(out.float().numpy(), want) < TOL
    with pytest.raises(NotImplementedError, match="rotary_cos"):
        flash_attn_with_kvcache(t(q), t(k), t(v), cache_seqlens=60, rotary_cos=t(q))


@pytest.mark.skipif(not HAS_TORCH, reason="needs PyTorch")
def test_no_backward_over_a_cache(rng):
    q = torch.tensor(rng.standard_normal((1, 1, 2, 64)), dtype=torch.bfloat16, requires_grad=True)
    k = torch.tensor(rng.standard_normal((1, 40, 2, 64)), dtype=torch.bfloat16)
    out = tilepipe.attention(q, k, k, seqused_k=torch.tensor([30], dtype=torch.int32))
    with pytest.raises(NotImplementedError, match="KV cache"):
        out.float().sum().backward()


def fp8_array(backend, codes):
    """float8_e4m3fn codes (an ml_dtypes array) as this backend's float8_e4m3fn array."""
    if backend.framework == "numpy":
        return codes
    t = torch.from_numpy(codes.view(np.uint8).copy()).view(torch.float8_e4m3fn)
    return t.to("cuda" if backend.gpu else "cpu")


def fp8_values(rng, shape, per_head):
    """Random float8_e4m3fn codes [..., heads, head_dim] with scales amax / 448 (per KV head: amax
    from 0.01 to 10; else one) and the values they stand for (float64)."""
    heads = shape[-2]
    amax = 10 ** rng.uniform(-2, 1, heads if per_head else 1)
    scale = (amax / 448).astype(np.float32)
    per_element = np.broadcast_to(scale if per_head else scale[0], (heads,))[:, None].astype(np.float64)
    codes = (rng.uniform(-1, 1, shape) * 448).astype(ml_dtypes.float8_e4m3fn)
    return codes, scale, codes.astype(np.float64) * per_element


@pytest.mark.parametrize("sq,causal,page,per_head,cache", [(1, False, 0, False, True), (4, True, 0, True, True),
                                                           (1, False, 16, True, True), (2, True, 64, False, True),
                                                           (20, True, 0, True, False)])
def test_fp8_cache(backend, rng, sq, causal, page, per_head, cache):
    backend = cache_backend(backend)
    b, sk, hq, hkv, d = 3, 150, 8, 2, 64
    used = np.array([150, 5, 37] if cache else [sk] * b, np.int32)
    q = rng.standard_normal((b, sq, hq, d))
    k8, k_scale, k = fp8_values(rng, (b, sk, hkv, d), per_head)
    v8, v_scale, v = fp8_values(rng, (b, sk, hkv, d), per_head)
    for i in range(b):  # keys past a sequence's length are never read (NaN codes there)
        k8[i, used[i]:], v8[i, used[i]:] = np.nan, np.nan
    table = None
    if page:
        kc, vc, table = page_cache(rng, k8.astype(np.float64), v8.astype(np.float64), page)
        k8, v8 = kc.astype(ml_dtypes.float8_e4m3fn), vc.astype(ml_dtypes.float8_e4m3fn)
        table = backend.array(table, "int32")
    # Per tensor, the scales go as Python floats; per head, as float32 arrays.
    scales = ((backend.array(k_scale, "float32"), backend.array(v_scale, "float32")) if per_head
              else (float(k_scale[0]), float(v_scale[0])))
    out = tilepipe.attention(backend.array(q, "bfloat16"), fp8_array(backend, k8), fp8_array(backend, v8),
                             causal=causal, seqused_k=backend.array(used, "int32") if cache else None,
                             page_table=table, k_scale=scales[0], v_scale=scales[1])
    got = backend.numpy(out)
    want = reference(rounded(q, "bfloat16"), k, v, used, causal)
    assert not np.isnan(got).any()
    assert rel_error(got, want) < TOL


def test_bad_fp8_caches_are_reported(backend, rng):
    backend = cache_backend(backend)
    q = backend.array(rng.standard_normal((1, 1, 4, 64)), "bfloat16")
    k16 = backend.array(rng.standard_normal((1, 32, 2, 64)), "bfloat16")
    k8 = fp8_array(backend, rng.standard_normal((1, 32, 2, 64)).astype(ml_dtypes.float8_e4m3fn))
    with pytest.raises(ValueError, match="k_scale and v_scale dequantise float8_e4m3fn k and v"):
        tilepipe.attention(q, k16, k16, k_scale=0.5)
    with pytest.raises(ValueError, match="k_scale must be float32 with one value .per tensor. or heads_kv = 2"):
        tilepipe.attention(q, k8, k8, k_scale=backend.array(np.ones(3), "float32"))
    with pytest.raises(ValueError, match="k_scale has 2 values and v_scale 1"):
        tilepipe.attention(q, k8, k8, k_scale=backend.array(np.ones(2), "float32"), v_scale=0.5)
    with pytest.raises(TypeError, match="both float8_e4m3fn or both"):
        tilepipe.attention(q, k8, k16)
