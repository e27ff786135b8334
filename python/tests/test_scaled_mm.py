"""tilepipe.scaled_mm (fp8 matmul with scales, torch._scaled_mm's conventions) against float64
references from the dequantised operands: per-tensor, row-wise and block (1 x 128 / 128 x 128)
scales, bfloat16 and float32 output, bias, use_fast_accum both ways, M, N and K that are not
multiples of the tiles (K not a multiple of 128: a partial last block of K), scales of any
strides; against torch._scaled_mm itself where it runs (per-tensor and row-wise on the CPU);
the operator under torch.library.opcheck and torch.compile; and bad input raising with the
argument named."""
import ml_dtypes
import numpy as np
import pytest

import tilepipe
from conftest import HAS_CUDA, HAS_TORCH, WITH_CPU, Backend, backend_names, fp8, rel_error, rounded

if HAS_TORCH:
    import torch

M, N, K = 67, 200, 272  # M odd; N not a multiple of 128; K a multiple of 16 (TMA) but not of 128
MODES = ["per_tensor", "row_wise", "block"]


@pytest.fixture(params=[n for n in backend_names() if n.startswith(("numpy", "torch"))])
def fp8_backend(request):
    """The backends with fp8 arrays: NumPy (ml_dtypes) and PyTorch (JAX has no tilepipe.scaled_mm
    yet, CuPy no float8 dtype: test_scaled_mm_errors checks that they say so)."""
    return Backend(request.param)


def tolerance(backend, out_dtype):
    # bfloat16 output: its rounding. float32: the interpreter sums in f32; the GPU's tensor
    # core keeps fewer bits of its fp8 sums (use_fast_accum=True: over all of K).
    if out_dtype == "bfloat16":
        return 1e-2
    return 1e-3 if backend.gpu else 1e-5


def transposed(backend, x):
    return x.t() if backend.framework == "torch" else x.T


def f32(backend, x):
    return backend.array(np.asarray(x, np.float32), "float32")


def operands(backend, rng, m=M, n=N, k=K):
    """a [m, k] row-major and b [k, n] column-major (w.t() of an [n, k] row-major w), fp8 values
    spread over e4m3's range, and their float64 values (b's as [k, n])."""
    a, a64 = fp8(backend, rng.uniform(-448, 448, (m, k)))
    w, w64 = fp8(backend, rng.uniform(-448, 448, (n, k)))
    return a, transposed(backend, w), a64, w64.T


def scales(backend, rng, mode, m=M, n=N, k=K):
    """scale_a and scale_b of one mode in torch._scaled_mm's shapes, and the float64 factors they
    put on each element of a [m, k] and b [k, n]. Block scales are laid out as torch's cuBLAS
    path wants them (outer-dimension-major): scale_a the transpose of a [ceil(k/128), m] array,
    scale_b of a [ceil(n/128), ceil(k/128)] one (contiguous [ceil(k/128), ceil(n/128)] scales
    it rejects: "Invalid scaling configuration")."""
    kb, nb = -(-k // 128), -(-n // 128)
    draw = lambda *shape: np.float32(2.0) ** rng.uniform(-6, 6, shape).astype(np.float32)
    if mode == "per_tensor":
        sa, sb = draw(), draw()
        return f32(backend, sa), f32(backend, sb), np.full((m, k), float(sa)), np.full((k, n), float(sb))
    if mode == "row_wise":
        sa, sb = draw(m, 1), draw(1, n)
        return f32(backend, sa), f32(backend, sb), np.repeat(sa, k, 1).astype(np.float64), np.repeat(sb, k, 0).astype(np.float64)
    sa_t, sb_t = draw(kb, m), draw(nb, kb)
    fa = np.repeat(sa_t.T, 128, 1)[:, :k].astype(np.float64)
    fb = np.repeat(np.repeat(sb_t.T, 128, 0), 128, 1)[:k, :n].astype(np.float64)
    return transposed(backend, f32(backend, sa_t)), transposed(backend, f32(backend, sb_t)), fa, fb


@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("use_fast_accum", [False, True])
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("mode", MODES)
def test_scaled_mm(fp8_backend, rng, mode, out_dtype, use_fast_accum, with_bias):
    backend = fp8_backend
    a, b, a64, b64 = operands(backend, rng)
    sa, sb, fa, fb = scales(backend, rng, mode)
    ref = (a64 * fa) @ (b64 * fb)
    bias = None
    if with_bias:
        bias64 = rng.standard_normal(N) * np.abs(ref).mean()
        bias = backend.array(bias64, out_dtype)
        ref = ref + rounded(bias64, out_dtype)
    dtype = getattr(torch, out_dtype) if backend.framework == "torch" else out_dtype
    out = tilepipe.scaled_mm(a, b, sa, sb, bias, out_dtype=dtype, use_fast_accum=use_fast_accum)
    assert tuple(out.shape) == (M, N) and str(out.dtype).removeprefix("torch.") == out_dtype
    assert rel_error(backend.numpy(out), ref) < tolerance(backend, out_dtype)


@pytest.mark.parametrize("mode", MODES)
def test_scaled_mm_scale_strides(fp8_backend, rng, mode):
    """Scales of any strides are read where they are (no copies): per-tensor as a 0-dim, a
    [1] and a [1, 1] array; row-wise and block scales as strided views of larger arrays and
    in the other memory order."""
    backend = fp8_backend
    m, n, k = 33, 136, 400  # four 128-blocks of K, the last of 16
    a, b, a64, b64 = operands(backend, rng, m, n, k)
    kb, nb = -(-k // 128), -(-n // 128)
    draw = lambda *shape: (np.float32(2.0) ** rng.uniform(-4, 4, shape)).astype(np.float32)
    if mode == "per_tensor":
        sa, sb = draw(), draw()
        ref = float(sa) * float(sb) * (a64 @ b64)
        for sa_, sb_ in ((sa, sb.reshape(1)), (sa.reshape(1, 1), sb)):
            out = tilepipe.scaled_mm(a, b, f32(backend, sa_), f32(backend, sb_), out_dtype="float32")
            assert rel_error(backend.numpy(out), ref) < tolerance(backend, "float32")
        return
    if mode == "row_wise":
        big_a, big_b = draw(m, 3), draw(n, 2)
        sa = f32(backend, big_a)[:, 1:2]                          # [m, 1], strides (3, 1)
        sb = transposed(backend, f32(backend, big_b))[1:2, :]     # [1, n], strides (1, 2)
        ref = (a64 * big_a[:, 1:2]) @ (b64 * big_b.T[1:2, :])
    else:
        big_a, sb_t = draw(m, 2 * kb), draw(nb, kb)
        sa = f32(backend, big_a)[:, ::2]                # [m, kb] with column stride 2
        sb = transposed(backend, f32(backend, sb_t))    # [kb, nb] column-major
        fa = np.repeat(big_a[:, ::2], 128, 1)[:, :k]
        fb = np.repeat(np.repeat(sb_t.T, 128, 0), 128, 1)[:k, :n]
        ref = (a64 * fa) @ (b64 * fb)
    out = tilepipe.scaled_mm(a, b, sa, sb, out_dtype="float32")
    assert rel_error(backend.numpy(out), ref) < tolerance(backend, "float32")


def test_scaled_mm_empty_and_single_rows(fp8_backend, rng):
    backend = fp8_backend
    for m in (0, 1):
        a, b, a64, b64 = operands(backend, rng, m, 64, 128)
        sa, sb, fa, fb = scales(backend, rng, "row_wise", m, 64, 128)
        out = tilepipe.scaled_mm(a, b, sa, sb)
        assert tuple(out.shape) == (m, 64)
        if m:
            assert rel_error(backend.numpy(out), (a64 * fa) @ (b64 * fb)) < 1e-2


torch_devices = (["cpu"] if WITH_CPU else []) + (["cuda"] if HAS_CUDA else [])


@pytest.mark.skipif(not HAS_TORCH, reason="needs PyTorch")
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("device, mode", [(d, m) for d in torch_devices for m in MODES if d == "cuda" or m != "block"])
def test_matches_torch_scaled_mm(rng, device, mode, out_dtype):
    """The same call to torch._scaled_mm and tilepipe.scaled_mm gives the same result (within
    the output's rounding), where PyTorch runs it: per-tensor and row-wise on the CPU (its CPU
    kernel has no block scales), every mode its cuBLASLt path takes on a GPU."""
    backend = Backend(f"torch-{device}")
    n = 208  # a multiple of 16, as torch._scaled_mm on a GPU requires
    a, b, a64, b64 = operands(backend, rng, n=n)
    sa, sb, fa, fb = scales(backend, rng, mode, n=n)
    dtype = getattr(torch, out_dtype)
    bias = None
    if out_dtype == "bfloat16" or device == "cpu":  # cuBLASLt takes no bias with float32 output
        bias = torch.randn(n, dtype=dtype, device=device) * 1e3
    try:
        want = torch._scaled_mm(a, b, sa, sb, bias=bias, out_dtype=dtype)
    except (RuntimeError, ValueError, NotImplementedError) as e:
        pytest.skip(f"torch._scaled_mm on {device} does not take {mode} scales here: {str(e).splitlines()[0]}")
    got = tilepipe.scaled_mm(a, b, sa, sb, bias=bias, out_dtype=dtype)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert rel_error(got.double().cpu().numpy(), want.double().cpu().numpy()) < tolerance(backend, out_dtype)


@pytest.mark.skipif(not HAS_TORCH, reason="needs PyTorch")
@pytest.mark.parametrize("device", torch_devices)
def test_operator(rng, device):
    """torch.ops.tilepipe.scaled_mm: opcheck (schema, fake kernel, dispatch), torch.compile with
    fullgraph, and a backward that raises."""
    backend = Backend(f"torch-{device}")
    a, b, _, _ = operands(backend, rng, 40, 64, 144)
    # Not opcheck's test_schema: its SchemaCheckMode compares the inputs before and after the
    # call with arithmetic PyTorch does not have for float8 tensors ("mul_cpu_reduced_float").
    utils = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    for mode in ("per_tensor", "block"):
        sa, sb, _, _ = scales(backend, rng, mode, 40, 64, 144)
        bias = torch.randn(64, dtype=torch.bfloat16, device=device)
        torch.library.opcheck(torch.ops.tilepipe.scaled_mm.default, (a, b, sa, sb, bias, torch.bfloat16, False),
                              test_utils=utils)
        torch.library.opcheck(torch.ops.tilepipe.scaled_mm.default, (a, b, sa, sb, None, torch.float32, True),
                              test_utils=utils)
    torch._dynamo.reset()
    fn = lambda a, b, sa, sb: tilepipe.scaled_mm(a, b, sa, sb, out_dtype=torch.float32).relu()
    want = fn(a, b, sa, sb)
    got = torch.compile(fn, fullgraph=True, backend="aot_eager")(a, b, sa, sb)  # traced through the fake kernel
    assert torch.equal(got, want)
    sa = sa.detach().clone().requires_grad_()
    out = tilepipe.scaled_mm(a, b, sa, sb, out_dtype=torch.float32)  # through the operator: autograd sees it
    with pytest.raises(NotImplementedError, match="no backward"):
        out.sum().backward()


def test_scaled_mm_errors(backend, rng):
    if backend.framework in ("jax", "cupy"):
        with pytest.raises(NotImplementedError, match="tilepipe.scaled_mm"):
            x = backend.array(np.ones((16, 16)), "float32")
            tilepipe.scaled_mm(x, x, x, x)
        return
    a, b, _, _ = operands(backend, rng)
    sa, sb, _, _ = scales(backend, rng, "row_wise")
    one = f32(backend, np.float32(1.0))
    # b's layout: row-major [K, N] is not what torch._scaled_mm takes either
    row_major_b, _ = fp8(backend, rng.uniform(-1, 1, (K, N)))
    with pytest.raises(ValueError, match=r"b \(\[272, 200\]\) must be column-major: the transpose of an \[N, K\] row-major"):
        tilepipe.scaled_mm(a, row_major_b, one, one)
    # scale shapes
    with pytest.raises(ValueError, match=r"scale_a has shape \[67, 2\], which is no scaling mode's.*scale_a \[67, 3\]"):
        tilepipe.scaled_mm(a, b, f32(backend, np.ones((M, 2))), sb)
    with pytest.raises(ValueError, match=r"scale_b has shape \[200, 1\], which is no scaling mode's.*scale_b \[1, 200\]"):
        tilepipe.scaled_mm(a, b, sa, f32(backend, np.ones((N, 1))))  # tilepipe's C++ shape, not torch's
    with pytest.raises(ValueError, match=r"scale_b has shape \[2, 3\], which is no scaling mode's.*scale_b \[3, 2\]"):
        tilepipe.scaled_mm(a, b, f32(backend, np.ones((M, 3))), f32(backend, np.ones((2, 3))))  # block, C++'s order
    with pytest.raises(ValueError, match=r"scale_a \[\] is a per-tensor scale but scale_b \[1, 200\] is a row-wise one"):
        tilepipe.scaled_mm(a, b, one, sb)
    with pytest.raises(TypeError, match="scale_a must be float32"):
        tilepipe.scaled_mm(a, b, backend.array(np.ones((M, 1)), "float64"), sb)
    # element types
    with pytest.raises(TypeError, match=r"a must be fp8 \(float8_e4m3fn or float8_e5m2\), got (torch\.)?bfloat16"):
        tilepipe.scaled_mm(backend.array(np.ones((M, K)), "bfloat16"), b, one, one)
    with pytest.raises(TypeError, match=r"b must be fp8 \(float8_e4m3fn or float8_e5m2\), got (torch\.)?float32"):
        tilepipe.scaled_mm(a, transposed(backend, f32(backend, np.ones((N, K)))), one, one)
    e5m2 = np.ones((N, K)).astype(ml_dtypes.float8_e5m2)
    if backend.framework == "torch":
        e5m2 = torch.from_numpy(e5m2.view(np.uint8)).view(torch.float8_e5m2).to(a.device)
    with pytest.raises(NotImplementedError, match="b is float8_e5m2"):
        tilepipe.scaled_mm(a, transposed(backend, e5m2), one, one)
    # shapes
    short_b, _ = fp8(backend, rng.uniform(-1, 1, (N, K - 16)))
    with pytest.raises(ValueError, match=r"a's columns \(K = 272\) must equal b's rows"):
        tilepipe.scaled_mm(a, transposed(backend, short_b), one, one)
    a40, _ = fp8(backend, rng.uniform(-1, 1, (M, 40)))
    w40, _ = fp8(backend, rng.uniform(-1, 1, (N, 40)))
    with pytest.raises(ValueError, match="K = 40 .* is not a multiple of 16"):
        tilepipe.scaled_mm(a40, transposed(backend, w40), one, one)
    w100, _ = fp8(backend, rng.uniform(-1, 1, (100, K)))
    with pytest.raises(ValueError, match=r"N = 100 .* is not a multiple of 8"):
        tilepipe.scaled_mm(a, transposed(backend, w100), one, one)
    assert tilepipe.scaled_mm(a, transposed(backend, w100), one, one, out_dtype="float32").shape[1] == 100
    a3 = a.reshape(1, M, K)
    with pytest.raises(TypeError, match=r"a must have 2 dimensions"):
        tilepipe.scaled_mm(a3, b, one, one)
    # bias and the output
    with pytest.raises(TypeError, match=r"bias must have the output's dtype \(bfloat16\), got (torch\.)?float32"):
        tilepipe.scaled_mm(a, b, one, one, f32(backend, np.ones(N)))
    with pytest.raises(ValueError, match="bias must be one-dimensional with N = 200 entries"):
        tilepipe.scaled_mm(a, b, one, one, backend.array(np.ones(N - 8), "bfloat16"))
    with pytest.raises(NotImplementedError, match="out_dtype must be bfloat16 or float32"):
        tilepipe.scaled_mm(a, b, one, one, out_dtype="float16")
    with pytest.raises(NotImplementedError, match="out_dtype=None"):
        tilepipe.scaled_mm(a, b, one, one, out_dtype=None)
    with pytest.raises(NotImplementedError, match="scale_result"):
        tilepipe.scaled_mm(a, b, one, one, scale_result=one)
