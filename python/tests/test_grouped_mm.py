"""tilepipe.grouped_mm (torch._grouped_mm's shapes; both b layouts; the batched and masked
decode layouts) and tilepipe.jax.grouped_mm (ragged_dot's order), against float64."""
import numpy as np
import pytest

import tilepipe
from conftest import HAS_JAX, rel_error, rounded

TOL = 1e-2


def transposed_weights(backend, w, dtype):
    """b as the transpose of [G, N, K] weights (nn.Linear's layout): logical [G, K, N], K contiguous."""
    stored = backend.array(np.ascontiguousarray(np.swapaxes(w, 1, 2)), dtype)
    if backend.framework == "torch":
        return stored.transpose(-2, -1)
    return stored.swapaxes(1, 2)


@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_ragged(backend, rng, layout, dtype):
    sizes = [30, 0, 150, 1, 19]  # an empty group, a group of one row, a group across two row tiles
    m, k, n = sum(sizes), 72, 40
    a = rng.standard_normal((m, k))
    w = rng.standard_normal((len(sizes), k, n))
    offs = np.cumsum(sizes).astype(np.int32)
    b = backend.array(w, dtype) if layout == "kn" else transposed_weights(backend, w, dtype)
    out = backend.numpy(tilepipe.grouped_mm(backend.array(a, dtype), b, offs=backend.array(offs, "int32")))
    a, w = rounded(a, dtype), rounded(w, dtype)
    ref = np.concatenate([a[o - s:o] @ w[g] for g, (s, o) in enumerate(zip(sizes, offs))])
    assert out.shape == (m, n) and rel_error(out, ref) < TOL


def test_batched_and_masked(backend, rng):
    if backend.framework == "jax":
        pytest.skip("tilepipe.jax.grouped_mm is ragged_dot (lhs [M, K]); the batched and masked layouts are not in it")
    g, rows, k, n = 3, 20, 64, 48
    a = rng.standard_normal((g, rows, k))
    w = rng.standard_normal((g, k, n))
    aa, bb = backend.array(a, "bfloat16"), backend.array(w, "bfloat16")
    ref = np.einsum("grk,gkn->grn", rounded(a, "bfloat16"), rounded(w, "bfloat16"))
    out = backend.numpy(tilepipe.grouped_mm(aa, bb))
    assert out.shape == (g, rows, n) and rel_error(out, ref) < TOL
    counts = np.array([5, 0, 20], np.int32)
    out = backend.numpy(tilepipe.grouped_mm(aa, bb, masked_m=backend.array(counts, "int32")))
    for i, c in enumerate(counts):  # rows past masked_m[g] are left as allocated
        assert rel_error(out[i, :c], ref[i, :c]) < TOL


@pytest.mark.skipif(not HAS_JAX, reason="needs jax")
def test_jax_grouped_mm_matches_ragged_dot(rng):
    import jax
    import jax.numpy as jnp
    import tilepipe.jax as tpj
    sizes = jnp.array([7, 0, 33, 24], jnp.int32)
    lhs = jnp.asarray(rng.standard_normal((64, 32)), jnp.bfloat16)
    rhs = jnp.asarray(rng.standard_normal((4, 32, 56)), jnp.bfloat16)
    got = jax.jit(tpj.grouped_mm)(lhs, rhs, sizes)
    ref = jax.lax.ragged_dot(lhs.astype(jnp.float32), rhs.astype(jnp.float32), sizes)
    assert got.dtype == jnp.bfloat16 and rel_error(np.asarray(got, np.float64), np.asarray(ref)) < TOL
