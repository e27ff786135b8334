"""tilepipe.attention on every backend against a float64 reference (FlashAttention's
semantics): causal with Sq < Sk and Sq > Sk, windows, GQA / MQA, decode (Sq = 1) with the
strides frameworks give a size-1 dimension, Sk = 0, varlen with empty sequences,
non-contiguous q / k / v views, the LSE, and the flash_attn_interface shim."""
import numpy as np
import pytest

import tilepipe
from tilepipe import flash_attn_interface as fa
from conftest import attention_reference, check_lse, rel_error, rounded

TOL = 1e-2  # relative Frobenius error of out (the C++ tests' bound for bf16 and f16)
LSE_TOL = 2e-3


def run_fixed(backend, rng, *, batch, sq, sk, hq, hkv, d, dtype, causal=False, window=(-1, -1), scale=None,
              views=None):
    q = rng.standard_normal((batch, sq, hq, d))
    k = rng.standard_normal((batch, sk, hkv, d))
    v = rng.standard_normal((batch, sk, hkv, d))
    args = views(backend, q, k, v, dtype) if views else [backend.array(x, dtype) for x in (q, k, v)]
    out, lse = tilepipe.attention(*args, causal=causal, window_size=window, softmax_scale=scale, return_lse=True)
    assert tuple(out.shape) == (batch, sq, hq, d) and tuple(lse.shape) == (batch, hq, sq)
    out, lse = backend.numpy(out), backend.numpy(lse)
    q, k, v = (rounded(x, dtype) for x in (q, k, v))
    for b in range(batch):
        ref_o, ref_l = attention_reference(q[b], k[b], v[b], causal=causal, scale=scale, window=window)
        assert rel_error(out[b], ref_o) < TOL, f"batch {b}"
        check_lse(lse[b], ref_l, LSE_TOL)
    return out


CASES = {
    # name: shape and options
    "plain": dict(batch=2, sq=70, sk=70, hq=2, hkv=2, d=64, dtype="bfloat16"),
    "causal_sq_lt_sk_gqa": dict(batch=1, sq=65, sk=200, hq=4, hkv=2, d=128, dtype="float16", causal=True),
    "causal_sq_gt_sk_rows_without_keys": dict(batch=1, sq=200, sk=65, hq=2, hkv=1, d=64, dtype="bfloat16", causal=True),
    "window": dict(batch=1, sq=150, sk=150, hq=2, hkv=2, d=64, dtype="float16", window=(32, 8)),
    "window_left_causal": dict(batch=1, sq=90, sk=130, hq=3, hkv=1, d=64, dtype="bfloat16", causal=True,
                               window=(20, -1)),
    "head_dim_256_scale": dict(batch=1, sq=40, sk=90, hq=2, hkv=2, d=256, dtype="bfloat16", scale=0.3),
    "decode_mqa": dict(batch=3, sq=1, sk=100, hq=8, hkv=1, d=128, dtype="bfloat16", causal=True),
    "one_key": dict(batch=2, sq=7, sk=1, hq=2, hkv=2, d=64, dtype="float16"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_attention_fixed_length(backend, rng, case):
    run_fixed(backend, rng, **CASES[case])


def test_no_keys(backend, rng):
    """Sk = 0: every row gives 0 and lse -inf (FlashAttention's convention)."""
    q = backend.array(rng.standard_normal((2, 5, 2, 64)), "bfloat16")
    kv = backend.array(np.zeros((2, 0, 2, 64)), "bfloat16")
    out, lse = tilepipe.attention(q, kv, kv, return_lse=True)
    assert np.all(backend.numpy(out) == 0) and np.all(np.isneginf(backend.numpy(lse)))


def test_no_queries(backend, rng):
    q = backend.array(np.zeros((2, 0, 2, 64)), "float16")
    kv = backend.array(rng.standard_normal((2, 9, 2, 64)), "float16")
    assert tuple(tilepipe.attention(q, kv, kv).shape) == (2, 0, 2, 64)


def qkv_unbind(backend, q, k, v, dtype):
    """q, k, v as views of one packed [B, S, 3, H, D] tensor (qkv.unbind(2)): strided, not contiguous."""
    qkv = backend.array(np.stack([q, k, v], axis=2), dtype)
    if backend.framework == "torch":
        return list(qkv.unbind(2))
    return [qkv[:, :, i] for i in range(3)]


def test_qkv_unbind_views(backend, rng):
    run_fixed(backend, rng, batch=2, sq=33, sk=33, hq=2, hkv=2, d=64, dtype="bfloat16", causal=True, views=qkv_unbind)


def size1_stride_one(backend, q, k, v, dtype):
    """A decode query [B, 1, H, D] whose size-1 dimension has stride 1, as PyTorch's DLPack
    export writes it (pytorch#83158): any stride is legal for a dimension of extent 1."""
    args = [backend.array(x, dtype) for x in (q, k, v)]
    if backend.framework == "numpy":
        e = args[0].itemsize
        b, _, h, d = args[0].shape
        args[0] = np.lib.stride_tricks.as_strided(args[0], strides=(h * d * e, e, d * e, e))
    elif backend.framework == "torch":
        b, _, h, d = args[0].shape
        args[0] = args[0].as_strided(args[0].shape, (h * d, 1, d, 1))
    return args


def test_decode_query_with_any_stride_in_its_size1_dimension(backend, rng):
    run_fixed(backend, rng, batch=2, sq=1, sk=50, hq=4, hkv=2, d=64, dtype="float16", views=size1_stride_one)


def varlen_case(backend, rng, seqlens_q, seqlens_k, hq, hkv, d, dtype, causal, window=(-1, -1)):
    cu_q = np.concatenate([[0], np.cumsum(seqlens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(seqlens_k)]).astype(np.int32)
    q = rng.standard_normal((cu_q[-1], hq, d))
    k = rng.standard_normal((cu_k[-1], hkv, d))
    v = rng.standard_normal((cu_k[-1], hkv, d))
    out, lse = tilepipe.attention(*(backend.array(x, dtype) for x in (q, k, v)), causal=causal, window_size=window,
                                  cu_seqlens_q=backend.array(cu_q, "int32"), cu_seqlens_k=backend.array(cu_k, "int32"),
                                  max_seqlen_q=max(seqlens_q), max_seqlen_k=max(seqlens_k), return_lse=True)
    out, lse = backend.numpy(out), backend.numpy(lse)
    assert out.shape == q.shape and lse.shape == (hq, cu_q[-1])
    q, k, v = (rounded(x, dtype) for x in (q, k, v))
    for b in range(len(seqlens_q)):
        rows, keys = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        if seqlens_q[b] == 0:
            continue
        ref_o, ref_l = attention_reference(q[rows], k[keys], v[keys], causal=causal, window=window)
        assert rel_error(out[rows], ref_o) < TOL, f"sequence {b}"
        check_lse(lse[:, rows], ref_l, LSE_TOL)


def test_varlen_with_empty_sequences(backend, rng):
    varlen_case(backend, rng, [0, 5, 70, 1, 0, 3], [3, 0, 90, 40, 0, 3], hq=4, hkv=2, d=64, dtype="bfloat16",
                causal=True)


def test_varlen_window_head_dim_128(backend, rng):
    varlen_case(backend, rng, [17, 60], [60, 17], hq=2, hkv=1, d=128, dtype="float16", causal=False, window=(10, 5))


def test_varlen_without_keys(backend, rng):
    varlen_case(backend, rng, [4, 6], [0, 0], hq=2, hkv=2, d=64, dtype="bfloat16", causal=False)


def test_return_lse_off_returns_out_only(backend, rng):
    q = backend.array(rng.standard_normal((1, 8, 2, 64)), "bfloat16")
    out = tilepipe.attention(q, q, q)
    assert tuple(out.shape) == (1, 8, 2, 64)


def test_flash_attn_interface(backend, rng):
    """The FlashAttention 3 signatures give what tilepipe.attention gives."""
    q, k, v = (backend.array(rng.standard_normal((1, 20, 2, 64)), "bfloat16") for _ in range(3))
    want, want_lse = tilepipe.attention(q, k, v, causal=True, return_lse=True)
    got, got_lse = fa.flash_attn_func(q, k, v, None, True, return_attn_probs=True)
    assert np.array_equal(backend.numpy(got), backend.numpy(want))
    assert np.array_equal(backend.numpy(got_lse), backend.numpy(want_lse))
    cu = backend.array(np.array([0, 20], np.int32), "int32")
    flat = [x.reshape(20, 2, 64) for x in (q, k, v)]
    got = fa.flash_attn_varlen_func(*flat, cu, cu, 20, 20, causal=True, num_splits=4, pack_gqa=True)
    assert np.array_equal(backend.numpy(got), backend.numpy(want).reshape(20, 2, 64))
    for name, value in (("softcap", 30.0), ("attention_chunk", 64), ("qv", q)):
        with pytest.raises(NotImplementedError, match=name):
            fa.flash_attn_func(q, k, v, **{name: value})
    with pytest.raises(NotImplementedError, match="seqused_k"):
        fa.flash_attn_varlen_func(*flat, cu, cu, 20, 20, seqused_k=cu)
