"""tilepipe.quantize_fp8 (activations to e4m3 with float32 scales) against float64: 1 x 128
groups and one scale per row, bfloat16 and float16, leading batch dimensions, K not a
multiple of 128, rows of very different magnitudes and a row of zeros."""
import numpy as np
import pytest

import tilepipe


def e4m3_spacing(y):
    """The spacing of e4m3 values around |y| (3 mantissa bits; subnormals below 2^-6)."""
    e = np.maximum(-6, np.floor(np.log2(np.maximum(np.abs(y), 1e-30))))
    return np.ldexp(1.0, (e - 3).astype(int))


@pytest.mark.parametrize("group", [128, None])
@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_quantize_fp8(backend, rng, group, dtype):
    if backend.framework in ("jax", "cupy"):
        pytest.skip(f"tilepipe.quantize_fp8 has no {backend.framework} implementation")
    shape, k = (3, 43), 272
    x = rng.standard_normal(shape + (k,)) * 10.0 ** rng.uniform(-3, 3, shape + (1,))
    x[1, 5] = 0.0  # a row of zeros: scale 0, q 0
    xin = backend.array(x, dtype)
    q, scales = tilepipe.quantize_fp8(xin, group=group)
    q, scales = backend.numpy(q), backend.numpy(scales)
    width = k if group is None else 128
    groups = -(-k // width)
    assert q.shape == x.shape and scales.shape == shape + (groups,)
    xr = backend.numpy(xin)  # the values the kernel saw (PyTorch rounds float64 to float16 through float32)
    for g in range(groups):
        block = xr[..., g * width:(g + 1) * width]
        amax = np.abs(block).max(axis=-1)
        np.testing.assert_allclose(scales[..., g], amax / 448.0, rtol=1.2e-7, atol=0)
        y = np.where(amax[..., None] > 0, block / np.where(amax > 0, amax, 1.0)[..., None] * 448.0, 0.0)
        qb = q[..., g * width:(g + 1) * width]
        assert np.all(np.abs(qb) <= 448.0)
        assert np.all(np.abs(qb - y) <= 0.5 * e4m3_spacing(y) * (1 + 1e-5) + 1e-12)
        largest = (np.abs(block) == amax[..., None]) & (amax[..., None] > 0)
        assert np.all(np.abs(qb)[largest] == 448.0)  # each group's largest element lands on +-448
    err = np.linalg.norm(q * np.repeat(scales, width, axis=-1)[..., :k] - xr) / np.linalg.norm(xr)
    assert err < 0.04


def test_quantize_fp8_errors(backend, rng):
    if backend.framework in ("jax", "cupy"):
        pytest.skip(f"tilepipe.quantize_fp8 has no {backend.framework} implementation")
    x = backend.array(rng.standard_normal((4, 40)), "bfloat16")
    with pytest.raises(ValueError, match="group is 128"):
        tilepipe.quantize_fp8(x, group=64)
    with pytest.raises(ValueError, match="not a multiple of 16"):
        tilepipe.quantize_fp8(x)
    with pytest.raises(TypeError, match="bfloat16 or float16"):
        tilepipe.quantize_fp8(backend.array(rng.standard_normal((4, 32)), "float32"))
