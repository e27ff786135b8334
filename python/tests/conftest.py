"""Shared test infrastructure: the array backends every API test runs on, float64
references, and fresh random inputs.

Backends: numpy and jax-cpu everywhere (the interpreter); torch-cpu where PyTorch is
installed; torch-cuda, jax-gpu and cupy where a CUDA GPU and a build with nvcc are there.
TILEPIPE_TEST_GPU_ONLY=1 keeps only the GPU backends and devices where a GPU is there (the
device machine's run: CI covers the interpreter). Inputs are drawn from a fresh seed per test (printed on failure: TILEPIPE_TEST_SEED=N
replays one), converted to the tested dtype, and the reference is computed in float64 from
the converted values."""
import importlib.util
import os
import secrets

# JAX on a GPU takes 75% of its memory at first use unless told not to; PyTorch shares it here.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import ml_dtypes
import numpy as np
import pytest

import tilepipe

HAS_TORCH = importlib.util.find_spec("torch") is not None
HAS_JAX = importlib.util.find_spec("jax") is not None
HAS_CUPY = importlib.util.find_spec("cupy") is not None
torch = None
if HAS_TORCH:
    import torch
HAS_CUDA = bool(HAS_TORCH and torch.cuda.is_available() and tilepipe.built_with_cuda())
# The CPU backends too unless told to run the GPU ones only (and there is a GPU to run them on).
WITH_CPU = not (HAS_CUDA and os.environ.get("TILEPIPE_TEST_GPU_ONLY") == "1")
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU, PyTorch and a build of tilepipe with nvcc")


class Backend:
    """One array framework on one device: makes arrays from float64 NumPy data and reads them back."""

    def __init__(self, name):
        self.name = name
        self.framework, _, self.device = name.partition("-")
        self.gpu = self.device in ("cuda", "gpu")

    def array(self, x, dtype):
        """x (NumPy) as this backend's array of dtype 'bfloat16' / 'float16' / 'float32' / 'int32'."""
        if self.framework == "numpy":
            return np.asarray(x).astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
        if self.framework == "jax":
            import jax
            import jax.numpy as jnp
            device = jax.devices("gpu" if self.gpu else "cpu")[0]
            return jax.device_put(jnp.asarray(np.asarray(x, np.float64 if dtype != "int32" else np.int32), dtype), device)
        if self.framework == "torch":
            t = torch.from_numpy(np.asarray(x, np.float64 if dtype != "int32" else np.int32).copy())
            return t.to(device="cuda" if self.gpu else "cpu", dtype=getattr(torch, dtype))
        if self.framework == "cupy":
            import cupy
            if dtype == "bfloat16":
                pytest.skip("CuPy arrays have no bfloat16")
            a = np.asarray(x, np.float64 if dtype != "int32" else np.int32)
            return cupy.asarray(a.astype(np.float32 if dtype == "bfloat16" else dtype)).astype(
                ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
        raise AssertionError(self.name)

    def numpy(self, x):
        """x back in float64 (int32 stays int32)."""
        if self.framework == "torch":
            x = x.detach().cpu()
            return x.numpy() if x.dtype == torch.int32 else x.to(torch.float64).numpy()
        if self.framework == "cupy":
            x = x.get()
        a = np.asarray(x)
        return a if a.dtype == np.int32 else a.astype(np.float64)

    def __repr__(self):
        return self.name


def backend_names():
    names = []
    if WITH_CPU:
        names.append("numpy")
        if HAS_JAX:
            names.append("jax-cpu")
        if HAS_TORCH:
            names.append("torch-cpu")
    if HAS_CUDA:
        names.append("torch-cuda")
        if HAS_JAX:
            import jax
            if any(d.platform == "gpu" for d in jax.devices()):
                names.append("jax-gpu")
        if HAS_CUPY:
            names.append("cupy-cuda")
    return names


@pytest.fixture(params=backend_names())
def backend(request):
    return Backend(request.param)


@pytest.fixture
def rng(request):
    seed = int(os.environ.get("TILEPIPE_TEST_SEED", secrets.randbits(32)))
    request.node.user_properties.append(("seed", seed))
    print(f"seed {seed} (TILEPIPE_TEST_SEED={seed} replays it)")
    return np.random.default_rng(seed)


def rounded(x, dtype):
    """x rounded to dtype and back to float64: the values the kernel sees."""
    t = ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    return np.asarray(x).astype(t).astype(np.float64)


def fp8(backend, x):
    """x (NumPy, float64) rounded to float8_e4m3fn as this backend's array, and its float64 values."""
    q = np.asarray(x).astype(ml_dtypes.float8_e4m3fn)
    if backend.framework == "torch":
        import torch

        t = torch.from_numpy(q.view(np.uint8).copy()).view(torch.float8_e4m3fn)
        return t.to("cuda" if backend.gpu else "cpu"), q.astype(np.float64)
    return q, q.astype(np.float64)


def rel_error(out, ref):
    """Relative Frobenius error, as tilepipe's C++ tests measure it."""
    out, ref = np.asarray(out, np.float64), np.asarray(ref, np.float64)
    denom = np.linalg.norm(ref)
    return np.linalg.norm(out - ref) / (denom if denom > 0 else 1.0)


def allowed_keys(sq, sk, causal, window):
    """[Sq, Sk] bool: the keys each query row sees (FlashAttention's masks, aligned to the
    bottom right: row i is key i + sk - sq's row)."""
    left, right = window
    if causal:
        right = 0 if right < 0 else min(right, 0)
    i = np.arange(sq)[:, None] + sk - sq
    j = np.arange(sk)[None, :]
    allowed = np.ones((sq, sk), bool)
    if left >= 0:
        allowed &= j >= i - left
    if right >= 0:
        allowed &= j <= i + right
    return allowed


def attention_reference(q, k, v, *, causal=False, scale=None, window=(-1, -1)):
    """float64 attention with FlashAttention's semantics for one sequence: q [Sq, Hq, D], k, v
    [Sk, Hkv, D]; masks aligned to the bottom right; rows that see no key give 0 and lse -inf.
    Returns out [Sq, Hq, D] and lse [Hq, Sq]."""
    sq, hq, d = q.shape
    sk, hkv = k.shape[0], k.shape[1]
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    group = hq // hkv
    kk = np.repeat(k, group, axis=1)
    vv = np.repeat(v, group, axis=1)
    s = np.where(allowed_keys(sq, sk, causal, window)[None], np.einsum("qhd,khd->hqk", q, kk) * scale, -np.inf)
    m = np.max(s, axis=-1, keepdims=True, initial=-np.inf)
    p = np.where(np.isfinite(m), np.exp(s - np.where(np.isfinite(m), m, 0.0)), 0.0)
    l = p.sum(-1, keepdims=True)
    out = np.einsum("hqk,khd->qhd", np.divide(p, l, out=np.zeros_like(p), where=l > 0), vv)
    with np.errstate(divide="ignore"):
        lse = np.where(l[..., 0] > 0, np.log(np.where(l[..., 0] > 0, l[..., 0], 1.0)) + m[..., 0], -np.inf)
    return out, lse


def check_lse(lse, ref, tol):
    """Finite rows within tol; rows with no key exactly -inf."""
    lse, ref = np.asarray(lse, np.float64), np.asarray(ref, np.float64)
    assert lse.shape == ref.shape
    finite = np.isfinite(ref)
    assert np.array_equal(np.isneginf(lse), ~finite), "rows without keys must have lse -inf, and only they"
    if finite.any():
        assert np.max(np.abs(lse[finite] - ref[finite])) < tol
