"""Bad input raises a Python exception that names the argument (never a device-side trap,
which on a GPU would end the process's CUDA context): element types, ranks, shapes,
strides and alignment (TMA), windows and scales, and offsets the host can read."""
import numpy as np
import pytest

import tilepipe
from tilepipe import flash_attn_interface as fa
from conftest import HAS_JAX


def arrays(backend, rng, *shapes, dtype="bfloat16"):
    return [backend.array(rng.standard_normal(s), dtype) for s in shapes]


def sliced_last(backend, x, n):
    return x[..., :n]


@pytest.fixture
def qkv(backend, rng):
    return arrays(backend, rng, (1, 16, 4, 64), (1, 16, 2, 64), (1, 16, 2, 64))


def test_attention_types_and_shapes(backend, rng, qkv):
    q, k, v = qkv
    with pytest.raises(NotImplementedError, match="head dim 96"):
        tilepipe.attention(*arrays(backend, rng, (1, 4, 2, 96), (1, 4, 2, 96), (1, 4, 2, 96)))
    with pytest.raises(TypeError, match=r"k is float16 but q is bfloat16|k is torch.float16 but q is torch.bfloat16"):
        tilepipe.attention(q, backend.array(rng.standard_normal((1, 16, 2, 64)), "float16"), v)
    with pytest.raises(TypeError, match="q must be bfloat16 or float16"):
        tilepipe.attention(*arrays(backend, rng, (1, 4, 2, 64), (1, 4, 2, 64), (1, 4, 2, 64), dtype="float32"))
    with pytest.raises(ValueError, match="q has 4 heads, which is not a multiple of k's and v's 3"):
        tilepipe.attention(q, *arrays(backend, rng, (1, 16, 3, 64), (1, 16, 3, 64)))
    with pytest.raises(ValueError, match="k and v must have the same shape"):
        tilepipe.attention(q, k, arrays(backend, rng, (1, 15, 2, 64))[0])
    with pytest.raises(ValueError, match="q has batch 1 but k and v have 2"):
        tilepipe.attention(q, *arrays(backend, rng, (2, 16, 2, 64), (2, 16, 2, 64)))
    with pytest.raises(TypeError, match=r"k must have 4 dimensions"):
        tilepipe.attention(q, k[0], v)
    with pytest.raises(ValueError, match="window_size"):
        tilepipe.attention(q, k, v, window_size=(-2, 0))
    with pytest.raises(ValueError, match="softmax_scale"):
        tilepipe.attention(q, k, v, softmax_scale=0.0)


def test_attention_strides(backend, rng):
    if backend.framework == "jax":
        pytest.skip("JAX arrays are dense: no strides to get wrong")
    wide = arrays(backend, rng, (1, 16, 2, 68))[0]  # rows of 68 halves: 136 bytes, not a multiple of 16
    ok = arrays(backend, rng, (1, 16, 2, 64))[0]
    with pytest.raises(ValueError, match=r"q's stride in dimension 2 is 68 elements \(136 bytes\)"):
        tilepipe.attention(sliced_last(backend, wide, 64), ok, ok)
    every_other = arrays(backend, rng, (1, 16, 2, 128))[0][..., ::2]
    with pytest.raises(ValueError, match="v's last dimension must be contiguous"):
        tilepipe.attention(ok, ok, every_other)


def test_varlen_offsets(backend, rng):
    q, k = arrays(backend, rng, (10, 2, 64), (12, 2, 64))
    i32 = lambda x: backend.array(np.array(x, np.int32), "int32")
    with pytest.raises(ValueError, match="cu_seqlens_q and cu_seqlens_k"):
        tilepipe.attention(q, k, k, cu_seqlens_q=i32([0, 10]))
    with pytest.raises(ValueError, match="cu_seqlens_k has 2 entries, expected 3"):
        tilepipe.attention(q, k, k, cu_seqlens_q=i32([0, 4, 10]), cu_seqlens_k=i32([0, 12]), max_seqlen_q=6)
    if backend.gpu:
        with pytest.raises(ValueError, match="max_seqlen_q is required"):
            tilepipe.attention(q, k, k, cu_seqlens_q=i32([0, 4, 10]), cu_seqlens_k=i32([0, 5, 12]))
        return
    if backend.framework == "jax":  # checked where the handler runs: XLA reports it
        match, error = "cu_seqlens_q\\[2\\] = 3", Exception
    else:
        match, error = "cu_seqlens_q\\[2\\] = 3: the offsets must not decrease", ValueError
    with pytest.raises(error, match=match):
        tilepipe.attention(q, k, k, cu_seqlens_q=i32([0, 4, 3, 10]), cu_seqlens_k=i32([0, 5, 6, 12]), max_seqlen_q=7)
    with pytest.raises(error, match="reach 6, more than max_seqlen_q = 5" if backend.framework != "jax" else "max_seqlen_q"):
        tilepipe.attention(q, k, k, cu_seqlens_q=i32([0, 4, 10]), cu_seqlens_k=i32([0, 5, 12]), max_seqlen_q=5)
    if backend.framework == "torch":
        with pytest.raises(TypeError, match="cu_seqlens_q must be int32"):
            tilepipe.attention(q, k, k, cu_seqlens_q=backend.array(np.array([0, 10]), "float32"),
                               cu_seqlens_k=i32([0, 12]))


def test_grouped_mm_errors(backend, rng):
    if backend.framework == "jax":
        pytest.skip("tilepipe.jax.grouped_mm's errors: test_jax_errors")
    a, b = arrays(backend, rng, (20, 64), (3, 64, 32))
    i32 = lambda x: backend.array(np.array(x, np.int32), "int32")
    if not backend.gpu:
        with pytest.raises(ValueError, match="group 1 has -5 rows according to offs"):
            tilepipe.grouped_mm(a, b, offs=i32([10, 5, 20]))
        with pytest.raises(ValueError, match="the groups in offs cover 18 rows but a has 20"):
            tilepipe.grouped_mm(a, b, offs=i32([10, 15, 18]))
        a3 = arrays(backend, rng, (3, 8, 64))[0]
        with pytest.raises(ValueError, match=r"masked_m\[2\] = 9 is outside \[0, 8\]"):
            tilepipe.grouped_mm(a3, b, masked_m=i32([1, 2, 9]))
    with pytest.raises(ValueError, match="offs has 2 entries, expected 3"):
        tilepipe.grouped_mm(a, b, offs=i32([10, 20]))
    with pytest.raises(ValueError, match="a has K = 64 .* b has K = 48"):
        tilepipe.grouped_mm(a, arrays(backend, rng, (3, 48, 32))[0], offs=i32([10, 15, 20]))
    with pytest.raises(ValueError, match="needs offs"):
        tilepipe.grouped_mm(a, b)
    with pytest.raises(NotImplementedError, match="2-D a with a 2-D b"):
        tilepipe.grouped_mm(a, arrays(backend, rng, (64, 32))[0], offs=i32([10, 15, 20]))
    f32 = "float32" if backend.framework == "numpy" else getattr(__import__(backend.framework), "float32")
    with pytest.raises(NotImplementedError, match="out_dtype"):
        tilepipe.grouped_mm(a, b, offs=i32([10, 15, 20]), out_dtype=np.dtype(f32) if backend.framework == "numpy" else f32)
    with pytest.raises(ValueError, match="1 to 256"):
        tilepipe.grouped_mm(a, arrays(backend, rng, (257, 64, 8))[0], offs=i32([20] * 257))


def test_matmul_errors(backend, rng):
    if backend.framework == "jax":
        with pytest.raises(NotImplementedError, match="no JAX implementation"):
            tilepipe.matmul(*arrays(backend, rng, (8, 64), (64, 8)))
        return
    a, b = arrays(backend, rng, (16, 64), (64, 32))
    with pytest.raises(ValueError, match="a's columns \\(K = 64\\) must equal b's rows"):
        tilepipe.matmul(a, arrays(backend, rng, (48, 32))[0])
    with pytest.raises(ValueError, match="a's stride in dimension 0 is 60 elements"):
        tilepipe.matmul(arrays(backend, rng, (16, 60))[0], arrays(backend, rng, (60, 32))[0])
    with pytest.raises(ValueError, match="bias must be one-dimensional with N = 32 entries"):
        tilepipe.matmul(a, b, bias=arrays(backend, rng, (31,))[0])
    with pytest.raises(ValueError, match="activation='tanh'"):
        tilepipe.matmul(a, b, activation="tanh")


@pytest.mark.skipif(not HAS_JAX, reason="needs jax")
def test_jax_errors_at_trace_time(rng):
    import jax
    import jax.numpy as jnp
    import tilepipe.jax as tpj
    q = jnp.zeros((1, 8, 4, 64), jnp.bfloat16)
    kv = jnp.zeros((1, 8, 3, 64), jnp.bfloat16)
    with pytest.raises(ValueError, match="not a multiple of k's and v's 3"):
        jax.jit(tpj.attention)(q, kv, kv)
    cu = jnp.array([0, 8], jnp.int32)
    flat = q.reshape(8, 4, 64)
    with pytest.raises(ValueError, match="max_seqlen_q is required"):
        jax.jit(lambda q, c: tpj.attention(q, q, q, cu_seqlens_q=c, cu_seqlens_k=c))(flat, cu)
    lhs, rhs = jnp.zeros((16, 64), jnp.bfloat16), jnp.zeros((2, 32, 8), jnp.bfloat16)
    with pytest.raises(ValueError, match="lhs has K = 64 .* rhs has K = 32"):
        tpj.grouped_mm(lhs, rhs, jnp.array([8, 8], jnp.int32))
    with pytest.raises(TypeError, match="group_sizes must be int32"):
        tpj.grouped_mm(lhs, jnp.zeros((2, 64, 8), jnp.bfloat16), jnp.array([8, 8], jnp.int64 if jax.config.jax_enable_x64 else jnp.float32))
    if jax.default_backend() != "cpu":
        return  # a GPU's tables stay on the device: the kernel clips them (as tilepipe.grouped_mm on a GPU)
    with pytest.raises(Exception, match="group_sizes"):  # contents: checked when the CPU handler runs
        tpj.grouped_mm(lhs, jnp.zeros((2, 64, 8), jnp.bfloat16), jnp.array([10, 8], jnp.int32)).block_until_ready()


def test_flash_attn_positional_order_matches_fa3(backend, rng, qkv):
    q, k, v = qkv
    with pytest.raises(ValueError, match="softmax_scale"):  # FA2's positional dropout_p lands on softmax_scale
        fa.flash_attn_func(q, k, v, 0.0)
