"""tilepipe.matmul (the persistent warp-specialised matmul) with both b layouts, bias and
every activation, against float64."""
import math

import numpy as np
import pytest

import tilepipe
from conftest import rel_error, rounded

TOL = 1e-2
ACTIVATIONS = {
    None: lambda x: x,
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": lambda x: 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3))),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
}


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_matmul_bias_activation(backend, rng, activation):
    if backend.framework == "jax":
        pytest.skip("tilepipe.matmul has no JAX implementation")
    m, k, n = 130, 72, 264
    a, w, bias = rng.standard_normal((m, k)), rng.standard_normal((k, n)), rng.standard_normal(n)
    with_bias = activation is not None  # the plain epilogue without bias, the bias one with every activation
    out = tilepipe.matmul(backend.array(a, "bfloat16"), backend.array(w, "bfloat16"),
                          bias=backend.array(bias, "bfloat16") if with_bias else None, activation=activation)
    ref = rounded(a, "bfloat16") @ rounded(w, "bfloat16") + (rounded(bias, "bfloat16") if with_bias else 0.0)
    assert rel_error(backend.numpy(out), ACTIVATIONS[activation](ref)) < TOL


def test_matmul_weight_transposed_and_batched_rows(backend, rng):
    """b as w.t() of an [N, K] weight (nn.Linear), a with leading batch dimensions."""
    if backend.framework == "jax":
        pytest.skip("tilepipe.matmul has no JAX implementation")
    a, w = rng.standard_normal((2, 3, 40)), rng.standard_normal((24, 40))
    weight = backend.array(w, "float16")
    b = weight.t() if backend.framework == "torch" else weight.T
    out = backend.numpy(tilepipe.matmul(backend.array(a, "float16"), b))
    ref = rounded(a, "float16") @ rounded(w, "float16").T
    assert out.shape == (2, 3, 24) and rel_error(out, ref) < TOL
