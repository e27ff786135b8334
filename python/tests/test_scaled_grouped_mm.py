"""tilepipe.scaled_grouped_mm (the fp8 grouped MoE matmul with scales, torch._scaled_grouped_mm's
conventions) against float64 references computed from the dequantised operands, on fresh random
inputs: row-wise and block (1 x 128 / 128 x 128) scales; ragged groups with empty groups, groups
of one row and groups that end inside a tile; N and K that are odd multiples of 8 and 16 (a
partial last block of K); block scale_a M-major; the batched and masked layouts (rows past a
count untouched, and NaN there never reaching a valid row); every group checked on its own,
with scales that differ by a factor of 8 from group to group, so that a kernel reading another
group's scales fails; against torch._scaled_grouped_mm where it runs (row-wise, on a GPU); the
operator under torch.library.opcheck and torch.compile; and bad input raising with the argument
named."""
import ml_dtypes
import numpy as np
import pytest

import tilepipe
from conftest import HAS_CUDA, HAS_TORCH, WITH_CPU, Backend, backend_names, fp8, rel_error

if HAS_TORCH:
    import torch

TOL = 1e-2  # bfloat16 output (the C++ tests reach 6e-3 with f32 sums)
RECIPES = ["row_wise", "block"]


@pytest.fixture(params=[n for n in backend_names() if n.startswith(("numpy", "torch"))])
def fp8_backend(request):
    """The backends with fp8 arrays: NumPy (ml_dtypes) and PyTorch (JAX has no
    tilepipe.scaled_grouped_mm yet, CuPy no float8 dtype: test_errors checks that they say so)."""
    return Backend(request.param)


def transposed(backend, x):
    """The last two dimensions swapped, as a view."""
    return x.transpose(-2, -1) if backend.framework == "torch" else x.swapaxes(-2, -1)


def f32(backend, x):
    return backend.array(np.asarray(x, np.float32), "float32")


def weights(backend, rng, g, n, k):
    """b [g, k, n] column-major: the transpose of contiguous [g, n, k] fp8 weights w (torch's
    mat_b); and w's float64 values [g, n, k]."""
    w, w64 = fp8(backend, rng.uniform(-448, 448, (g, n, k)))
    return transposed(backend, w), w64


def draw(rng, *shape, spread=6):
    return (np.float32(2.0) ** rng.uniform(-spread, spread, shape)).astype(np.float32)


def scales(backend, rng, recipe, rows, g, n, k, m_major=False):
    """scale_a and scale_b of one recipe for a with `rows` (a shape without K: (M,) or (G, Mmax)),
    and their float64 values. scale_a's are 2^u, u uniform in [-6, 6] (a row reading another
    row's scale is off); group g's scale_b are 8^g * 2^u (centred), u in [-1, 1]: a scale of
    another group is at least twice or at most half the right one, element by element, so a
    group that reads another's scales is off by 50% or more. m_major: block scale_a as the
    transpose of a [ceil(K/128), M] array (ragged only; the kernel loads it through SMEM)."""
    kb, nb = -(-k // 128), -(-n // 128)
    group_factor = (np.float32(8.0) ** (np.arange(g) - g // 2)).astype(np.float32)
    if recipe == "row_wise":
        sa, sb = draw(rng, *rows), draw(rng, g, n, spread=1) * group_factor[:, None]
        return f32(backend, sa), f32(backend, sb), sa.astype(np.float64), sb.astype(np.float64)
    sb = draw(rng, g, nb, kb, spread=1) * group_factor[:, None, None]
    if m_major:
        sa_t = draw(rng, kb, *rows)
        return transposed(backend, f32(backend, sa_t)), f32(backend, sb), sa_t.T.astype(np.float64), sb.astype(np.float64)
    sa = draw(rng, *rows, kb)
    return f32(backend, sa), f32(backend, sb), sa.astype(np.float64), sb.astype(np.float64)


def dequantised(recipe, a64, sa, w64, sb):
    """a's rows and the groups' weights times their scales, float64: a [..., K], w [G, N, K]."""
    k, n = a64.shape[-1], w64.shape[1]
    if recipe == "row_wise":
        return a64 * sa[..., None], w64 * sb[:, :, None]
    fa = np.repeat(sa, 128, axis=-1)[..., :k]
    fb = np.repeat(np.repeat(sb, 128, axis=1), 128, axis=2)[:, :n, :k]
    return a64 * fa, w64 * fb


def ragged_reference(recipe, a64, sa, w64, sb, sizes):
    """out [M, N] in float64: each group's rows of the dequantised a times its dequantised weights."""
    a_deq, w_deq = dequantised(recipe, a64, sa, w64, sb)
    ends = np.cumsum(sizes)
    return np.concatenate([a_deq[e - s:e] @ w_deq[g].T for g, (s, e) in enumerate(zip(sizes, ends))])


def check_groups(out, ref, sizes):
    """Every non-empty group within TOL on its own (a group's error is not hidden by larger ones)."""
    assert out.shape == ref.shape
    ends = np.cumsum(sizes)
    for g, (s, e) in enumerate(zip(sizes, ends)):
        if s:
            assert rel_error(out[e - s:e], ref[e - s:e]) < TOL, f"group {g} (rows {e - s}:{e})"


def ragged_call(backend, rng, recipe, sizes, k, n, m_major=False):
    """A ragged call's inputs: a [M, K], b, scales, offs, and the float64 reference."""
    m, g = sum(sizes), len(sizes)
    a, a64 = fp8(backend, rng.uniform(-448, 448, (m, k)))
    b, w64 = weights(backend, rng, g, n, k)
    sa, sb, sa64, sb64 = scales(backend, rng, recipe, (m,), g, n, k, m_major)
    offs = backend.array(np.cumsum(sizes).astype(np.int32), "int32")
    return (a, b, sa, sb, offs), ragged_reference(recipe, a64, sa64, w64, sb64, sizes), (a64, sa64, w64, sb64)


# (sizes, K, N): an empty group, a group of one row, a group across two row tiles ending inside
# the second; empty groups at the start, middle and end with K and N odd multiples of 16 and 8
# (a partial last block of K and of N); K under one block of 128.
RAGGED = {
    "mixed": ([30, 0, 150, 1, 19], 272, 200),
    "odd_k_n": ([0, 33, 0, 65, 0], 144, 136),
    "k16": ([5, 17, 3], 16, 264),
}


@pytest.mark.parametrize("case", list(RAGGED))
@pytest.mark.parametrize("recipe", RECIPES)
def test_ragged(fp8_backend, rng, recipe, case):
    backend = fp8_backend
    sizes, k, n = RAGGED[case]
    args, ref, _ = ragged_call(backend, rng, recipe, sizes, k, n)
    out = tilepipe.scaled_grouped_mm(*args)
    assert tuple(out.shape) == (sum(sizes), n) and str(out.dtype).removeprefix("torch.") == "bfloat16"
    assert type(out) is type(args[0])
    check_groups(backend.numpy(out), ref, sizes)


def test_block_scale_a_m_major(fp8_backend, rng):
    """Block scale_a as the transpose of a [ceil(K/128), M] array (torch's and DeepGEMM's
    outer-dimension-major layout): the kernel reads it through SMEM."""
    backend = fp8_backend
    sizes = [40, 0, 130, 7, 83]  # M = 260, a multiple of 4: TMA loads the scales
    args, ref, _ = ragged_call(backend, rng, "block", sizes, 400, 136, m_major=True)
    check_groups(backend.numpy(tilepipe.scaled_grouped_mm(*args)), ref, sizes)


@pytest.mark.parametrize("recipe", RECIPES)
def test_each_group_reads_its_own_scales(fp8_backend, rng, recipe):
    """Group g's scale_b is about 8^g times another group's scale: the output matches only where
    each group's rows were scaled by that group's scales (checked here: the reference with the
    scales of group 0, or of the group before, is 50% or more off for every group)."""
    backend = fp8_backend
    sizes = [40, 0, 130, 7, 90]
    args, ref, (a64, sa64, w64, sb64) = ragged_call(backend, rng, recipe, sizes, 400, 136)
    out = backend.numpy(tilepipe.scaled_grouped_mm(*args))
    check_groups(out, ref, sizes)
    ends = np.cumsum(sizes)
    for wrong in (np.zeros_like(sb64) + sb64[:1], np.roll(sb64, 1, axis=0)):
        misplaced = ragged_reference(recipe, a64, sa64, w64, wrong, sizes)
        for g, (s, e) in enumerate(zip(sizes, ends)):
            if s and not np.array_equal(wrong[g], sb64[g]):
                assert rel_error(misplaced[e - s:e], ref[e - s:e]) > 40 * TOL


def masked_call(backend, rng, recipe, counts, mmax, k, n):
    """A masked call's inputs with rows past each count holding NaN (a and scale_a), and the
    float64 reference of the valid rows (NaN elsewhere)."""
    g = len(counts)
    x = rng.uniform(-448, 448, (g, mmax, k))
    invalid = np.arange(mmax)[None, :] >= np.asarray(counts)[:, None]  # [g, mmax]
    x[invalid] = np.nan
    a, a64 = fp8(backend, x)
    b, w64 = weights(backend, rng, g, n, k)
    sa, sb, sa64, sb64 = scales(backend, rng, recipe, (g, mmax), g, n, k)
    poisoned = np.where(invalid if recipe == "row_wise" else invalid[..., None], np.nan, sa64).astype(np.float32)
    sa = f32(backend, poisoned)
    a_deq, w_deq = dequantised(recipe, a64, sa64, w64, sb64)
    ref = np.einsum("gmk,gnk->gmn", a_deq, w_deq)
    ref[invalid] = np.nan
    return a, b, sa, sb, ref, invalid


@pytest.mark.parametrize("recipe", RECIPES)
def test_masked(fp8_backend, rng, recipe):
    """The masked decode layout: only the first masked_m[g] rows of each group are computed;
    Mmax odd (groups start off 16-byte boundaries of the scales), an empty group, a full one."""
    backend = fp8_backend
    counts, mmax, k, n = [5, 0, 37, 20], 37, 144, 136
    a, b, sa, sb, ref, invalid = masked_call(backend, rng, recipe, counts, mmax, k, n)
    out = tilepipe.scaled_grouped_mm(a, b, sa, sb, masked_m=backend.array(np.array(counts, np.int32), "int32"))
    assert tuple(out.shape) == (len(counts), mmax, n)
    with np.errstate(invalid="ignore"):  # the rows past the counts hold whatever the allocation held
        out = backend.numpy(out)
    for g, c in enumerate(counts):
        if c:
            assert np.isfinite(out[g, :c]).all(), f"group {g}: NaN from the rows past its count"
            assert rel_error(out[g, :c], ref[g, :c]) < TOL, f"group {g}"


@pytest.mark.parametrize("recipe", RECIPES)
def test_masked_rows_past_a_count_untouched(rng, recipe):
    """Rows past a count keep what out held: the extension's binding called with an out full of
    a sentinel (the public function allocates out, so this goes one level down, NumPy)."""
    backend = Backend("numpy")
    counts, mmax, k, n = [3, 0, 21], 21, 144, 136
    a, b, sa, sb, ref, invalid = masked_call(backend, rng, recipe, counts, mmax, k, n)
    sentinel = 1232.0  # a bfloat16 value
    out = np.full((len(counts), mmax, n), sentinel, ml_dtypes.bfloat16)
    tilepipe._C.scaled_grouped_mm(a.view(np.uint8), b.view(np.uint8), sa, sb, np.array(counts, np.int32),
                                  out.view(np.uint16), True, 0, 0, False, 0, True)
    out = out.astype(np.float64)
    assert (out[invalid] == sentinel).all()
    for g, c in enumerate(counts):
        if c:
            assert rel_error(out[g, :c], ref[g, :c]) < TOL


@pytest.mark.parametrize("recipe", RECIPES)
def test_batched(fp8_backend, rng, recipe):
    """3-D a with 3-D b and no masked_m: every row of every group (torch's 3-D x 3-D case)."""
    backend = fp8_backend
    g, rows, k, n = 3, 20, 144, 136
    a, a64 = fp8(backend, rng.uniform(-448, 448, (g, rows, k)))
    b, w64 = weights(backend, rng, g, n, k)
    sa, sb, sa64, sb64 = scales(backend, rng, recipe, (g, rows), g, n, k)
    a_deq, w_deq = dequantised(recipe, a64, sa64, w64, sb64)
    out = backend.numpy(tilepipe.scaled_grouped_mm(a, b, sa, sb))
    assert out.shape == (g, rows, n)
    for i in range(g):
        assert rel_error(out[i], a_deq[i] @ w_deq[i].T) < TOL, f"group {i}"


def test_use_fast_accum(fp8_backend, rng):
    """Block scales promote every 128 of K whatever use_fast_accum says; row-wise scales have no
    promoting kernel, and use_fast_accum=False there raises instead of giving less precision."""
    backend = fp8_backend
    sizes = [20, 0, 44]
    args, ref, _ = ragged_call(backend, rng, "block", sizes, 272, 136)
    for fast in (False, True):
        check_groups(backend.numpy(tilepipe.scaled_grouped_mm(*args, use_fast_accum=fast)), ref, sizes)
    args, _, _ = ragged_call(backend, rng, "row_wise", sizes, 272, 136)
    with pytest.raises(NotImplementedError, match=r"use_fast_accum=False with row-wise scales is not supported.*block "
                                                  r"scales promote every 128 of K"):
        tilepipe.scaled_grouped_mm(*args, use_fast_accum=False)


torch_devices = (["cpu"] if WITH_CPU else []) + (["cuda"] if HAS_CUDA else [])


@pytest.mark.skipif(not HAS_CUDA, reason="torch._scaled_grouped_mm runs on a CUDA GPU only (and needs a build with nvcc)")
@pytest.mark.parametrize("layout", ["ragged", "batched"])
def test_matches_torch_scaled_grouped_mm(rng, layout):
    """The same call to torch._scaled_grouped_mm and tilepipe.scaled_grouped_mm gives the same
    result (within bfloat16's rounding), row-wise scales (torch has no grouped block-scaled op),
    use_fast_accum=True on both."""
    backend = Backend("torch-cuda")
    k, n = 256, 208  # multiples of 16, as torch asks
    if layout == "ragged":
        sizes = [32, 0, 144, 16, 48]  # multiples of 16: the alignment torch's grouped kernels may ask of groups
        args, _, _ = ragged_call(backend, rng, "row_wise", sizes, k, n)
        a, b, sa, sb, offs = args
    else:
        g, rows = 3, 32
        a, _ = fp8(backend, rng.uniform(-448, 448, (g, rows, k)))
        b, _ = weights(backend, rng, g, n, k)
        sa, sb, _, _ = scales(backend, rng, "row_wise", (g, rows), g, n, k)
        offs = None
    try:
        want = torch._scaled_grouped_mm(a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16, use_fast_accum=True)
    except (RuntimeError, ValueError, NotImplementedError) as e:
        pytest.skip(f"torch._scaled_grouped_mm does not take this call here: {str(e).splitlines()[0]}")
    got = tilepipe.scaled_grouped_mm(a, b, sa, sb, offs)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert rel_error(got.double().cpu().numpy(), want.double().cpu().numpy()) < TOL


@pytest.mark.skipif(not HAS_TORCH, reason="needs PyTorch")
@pytest.mark.parametrize("device", torch_devices)
def test_operator(rng, device):
    """torch.ops.tilepipe.scaled_grouped_mm: opcheck (fake kernel, dispatch, autograd
    registration), torch.compile with fullgraph, and a backward that raises."""
    backend = Backend(f"torch-{device}")
    # Not opcheck's test_schema: its SchemaCheckMode compares the inputs before and after the
    # call with arithmetic PyTorch does not have for float8 tensors (as in test_scaled_mm).
    utils = ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    op = torch.ops.tilepipe.scaled_grouped_mm.default
    sizes, k, n = [9, 0, 23], 144, 136
    for recipe in RECIPES:
        (a, b, sa, sb, offs), _, _ = ragged_call(backend, rng, recipe, sizes, k, n)
        torch.library.opcheck(op, (a, b, sa, sb, offs, False, torch.bfloat16, True), test_utils=utils)
        # masked_m covering every row: rows past it would be left as allocated, and opcheck compares whole outputs
        a3, b3, sa3, sb3, _, _ = masked_call(backend, rng, recipe, [8, 8], 8, k, n)
        counts = torch.tensor([8, 8], dtype=torch.int32, device=device)
        fast = recipe == "row_wise"  # block scales take use_fast_accum=False too (they always promote)
        torch.library.opcheck(op, (a3, b3, sa3, sb3, counts, True, torch.bfloat16, fast), test_utils=utils)
    torch._dynamo.reset()
    fn = lambda a, b, sa, sb, offs: tilepipe.scaled_grouped_mm(a, b, sa, sb, offs).float().relu()
    want = fn(a, b, sa, sb, offs)
    got = torch.compile(fn, fullgraph=True, backend="aot_eager")(a, b, sa, sb, offs)  # traced through the fake kernel
    assert torch.equal(got, want)
    sa = sa.detach().clone().requires_grad_()
    out = tilepipe.scaled_grouped_mm(a, b, sa, sb, offs)  # through the operator: autograd sees it
    with pytest.raises(NotImplementedError, match="no backward"):
        out.float().sum().backward()


def test_errors(backend, rng):
    if backend.framework in ("jax", "cupy"):
        with pytest.raises(NotImplementedError, match="tilepipe.scaled_grouped_mm"):
            x = backend.array(np.ones((16, 16)), "float32")
            tilepipe.scaled_grouped_mm(x, x[None], x[0], x, x[0])
        return
    sizes, k, n = [30, 0, 50, 20, 0], 272, 200  # M = 100, G = 5, ceil(K/128) = 3, ceil(N/128) = 2
    (a, b, sa, sb, offs), _, _ = ragged_call(backend, rng, "row_wise", sizes, k, n)
    _, _, bsa, bsb, _ = ragged_call(backend, rng, "block", sizes, k, n)[0]
    ones = lambda *shape: f32(backend, np.ones(shape))
    name = r"tilepipe\.scaled_grouped_mm: "
    # scale shapes
    with pytest.raises(ValueError, match=name + r"scale_a has shape \[100, 2\], which is no recipe's.*row-wise "
                                                r"\(scale_a \[100\].*block \(scale_a \[100, 3\]"):
        tilepipe.scaled_grouped_mm(a, b, ones(100, 2), sb, offs)
    with pytest.raises(ValueError, match=r"scale_b has shape \[200\], which is no recipe's.*scale_b \[5, 200\]"):
        tilepipe.scaled_grouped_mm(a, b, sa, ones(200), offs)
    with pytest.raises(ValueError, match=r"scale_b has shape \[4, 200\], which is no recipe's"):
        tilepipe.scaled_grouped_mm(a, b, sa, ones(4, 200), offs)
    with pytest.raises(ValueError, match=r"scale_b has shape \[5, 3, 2\], which is no recipe's.*scale_b \[5, 2, 3\]"):
        tilepipe.scaled_grouped_mm(a, b, bsa, ones(5, 3, 2), offs)  # [G, ceil(K/128), ceil(N/128)]: the other order
    with pytest.raises(ValueError, match=r"scale_a \[100\] is a row-wise scale but scale_b \[5, 2, 3\] is a block one"):
        tilepipe.scaled_grouped_mm(a, b, sa, bsb, offs)
    with pytest.raises(TypeError, match="scale_b must be float32"):
        tilepipe.scaled_grouped_mm(a, b, sa, backend.array(np.ones((5, 200)), "float64"), offs)
    # the output's dtype
    for dtype in ("float32", "float16") + ((torch.float32,) if backend.framework == "torch" else ()):
        with pytest.raises(NotImplementedError, match=name + "out_dtype must be bfloat16"):
            tilepipe.scaled_grouped_mm(a, b, sa, sb, offs, out_dtype=dtype)
    # element types
    with pytest.raises(TypeError, match=name + r"a must be fp8 \(float8_e4m3fn or float8_e5m2\), got (torch\.)?bfloat16"):
        tilepipe.scaled_grouped_mm(backend.array(np.ones((100, k)), "bfloat16"), b, sa, sb, offs)
    with pytest.raises(TypeError, match=name + r"b must be fp8 \(float8_e4m3fn or float8_e5m2\), got (torch\.)?float32"):
        tilepipe.scaled_grouped_mm(a, transposed(backend, ones(5, n, k)), sa, sb, offs)
    e5m2 = np.ones((5, n, k)).astype(ml_dtypes.float8_e5m2)
    if backend.framework == "torch":
        e5m2 = torch.from_numpy(e5m2.view(np.uint8)).view(torch.float8_e5m2).to(a.device)
    with pytest.raises(NotImplementedError, match="b is float8_e5m2"):
        tilepipe.scaled_grouped_mm(a, transposed(backend, e5m2), sa, sb, offs)
    # offs
    if backend.framework == "torch":
        with pytest.raises(TypeError, match=name + "offs must be int32, got torch.int64"):
            tilepipe.scaled_grouped_mm(a, b, sa, sb, offs.long())
    else:  # NumPy integer offsets of any width are converted (as tilepipe.grouped_mm's)
        with pytest.raises(TypeError, match="offs must hold integers, got float64"):
            tilepipe.scaled_grouped_mm(a, b, sa, sb, np.cumsum(sizes).astype(np.float64))
    with pytest.raises(ValueError, match=name + r"offs has 4 entries, expected 5"):
        tilepipe.scaled_grouped_mm(a, b, sa, sb, backend.array(np.array([30, 30, 80, 100], np.int32), "int32"))
    if not backend.gpu:  # the values of a device table only the kernel reads (its debug checks)
        with pytest.raises(ValueError, match=name + r"the groups in offs cover 90 rows but a has 100"):
            tilepipe.scaled_grouped_mm(a, b, sa, sb, backend.array(np.array([30, 30, 80, 90, 90], np.int32), "int32"))
        with pytest.raises(ValueError, match=name + r"group 2 has -10 rows according to offs"):
            tilepipe.scaled_grouped_mm(a, b, sa, sb, backend.array(np.array([30, 40, 30, 100, 100], np.int32), "int32"))
    with pytest.raises(ValueError, match="needs offs"):
        tilepipe.scaled_grouped_mm(a, b, sa, sb)
    # layouts and shapes
    row_major_b, _ = fp8(backend, rng.uniform(-1, 1, (5, k, n)))
    with pytest.raises(ValueError, match=name + r"b \(\[5, 272, 200\]\) must be column-major: the transpose of "
                                                r"\[groups, N, K\] weights"):
        tilepipe.scaled_grouped_mm(a, row_major_b, sa, sb, offs)
    a40, _ = fp8(backend, rng.uniform(-1, 1, (100, 40)))
    b40, _ = weights(backend, rng, 5, n, 40)
    with pytest.raises(ValueError, match=name + r"K = 40 .* is not a multiple of 16"):
        tilepipe.scaled_grouped_mm(a40, b40, sa, sb, offs)
    b100, _ = weights(backend, rng, 5, 100, k)
    with pytest.raises(ValueError, match=name + r"N = 100 .* is not a multiple of 8"):
        tilepipe.scaled_grouped_mm(a, b100, sa, ones(5, 100), offs)
    b_short, _ = weights(backend, rng, 5, n, k - 16)
    with pytest.raises(ValueError, match=name + r"a has K = 272 .* but b has K = 256"):
        tilepipe.scaled_grouped_mm(a, b_short, sa, sb, offs)
    with pytest.raises(NotImplementedError, match=name + r"a 2-D a with a 2-D b is not supported.*"
                                                         r"torch._scaled_grouped_mm's 2-D x 2-D"):
        tilepipe.scaled_grouped_mm(a, b[0], sa, sb, offs)
    # the masked layout
    a3, b3, sa3, sb3, _, _ = masked_call(backend, rng, "row_wise", [3, 0, 21], 21, 144, 136)
    counts = lambda *c: backend.array(np.array(c, np.int32), "int32")
    if not backend.gpu:
        with pytest.raises(ValueError, match=name + r"masked_m\[1\] = 22 is outside \[0, 21\]"):
            tilepipe.scaled_grouped_mm(a3, b3, sa3, sb3, masked_m=counts(3, 22, 0))
    with pytest.raises(ValueError, match=r"scale_a has shape \[63\], which is no recipe's.*scale_a \[3, 21\]"):
        tilepipe.scaled_grouped_mm(a3, b3, ones(63), sb3, masked_m=counts(3, 0, 21))
    wide = ones(3, 29)[:, :21]  # [3, 21] with rows 29 apart: not the stacked rows the kernel reads
    with pytest.raises(ValueError, match=name + r"scale_a's groups must lie back to back in the masked layout"):
        tilepipe.scaled_grouped_mm(a3, b3, wide, sb3, masked_m=counts(3, 0, 21))
    with pytest.raises(ValueError, match=name + "offs goes with a 2-D a"):
        tilepipe.scaled_grouped_mm(a3, b3, sa3, sb3, counts(3, 3, 21))
