"""PyTorch integration: torch.library.opcheck, torch.compile(fullgraph=True), CUDA graphs
(a first-ever call inside the capture, in a fresh process), the current stream (a side
stream), tensors on a GPU other than the current one, and autograd (backward raises).
The CUDA tests need a GPU; opcheck and compile also run on CPU tensors (the interpreter)."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import HAS_CUDA, HAS_TORCH, WITH_CPU, attention_reference, rel_error, requires_cuda, rounded

pytestmark = pytest.mark.skipif(not HAS_TORCH, reason="needs PyTorch")
if HAS_TORCH:
    import torch

    import tilepipe

DEVICES = (["cpu"] if WITH_CPU else []) + (["cuda"] if HAS_CUDA else [])


def qkv(device, b=2, s=40, hq=4, hkv=2, d=64, dtype=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    dtype = dtype or torch.bfloat16
    return [torch.randn(b, s, h, d, generator=g).to(device, dtype) for h in (hq, hkv, hkv)]


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    q, k, v = qkv(device)
    cu = torch.tensor([0, 30, 80], dtype=torch.int32, device=device)
    flat = [x.reshape(-1, *x.shape[2:]) for x in (q, k, v)]
    ops = torch.ops.tilepipe
    torch.library.opcheck(ops.attention.default, (q, k, v, None, None, -1, 0.125, -1, 0, True))
    torch.library.opcheck(ops.attention.default, (*flat, cu, cu, 50, 0.125, 16, -1, False))
    a = torch.randn(40, 64, device=device, dtype=torch.bfloat16)
    w = torch.randn(3, 64, 32, device=device, dtype=torch.bfloat16)
    offs = torch.tensor([10, 10, 40], dtype=torch.int32, device=device)
    torch.library.opcheck(ops.grouped_mm.default, (a, w, offs, False))
    # masked_m covering every row: rows past it would be left as allocated, and opcheck compares whole outputs
    w_nk = w[:2].transpose(1, 2).contiguous().transpose(1, 2)  # [G, K, N] as the transpose of [G, N, K] weights
    torch.library.opcheck(ops.grouped_mm.default, (a.reshape(2, 20, 64), w_nk,
                                                   torch.tensor([20, 20], dtype=torch.int32, device=device), True))
    torch.library.opcheck(ops.matmul.default, (a, w[0], w[0, 0], 2))


def make_block():
    """A model block over tilepipe's three operators (made here: torch is optional)."""

    class Block(torch.nn.Module):
        """Attention over a fused qkv projection (strided q, k, v views), then an expert layer
        through grouped_mm and a matmul with bias and GELU."""

        def __init__(self, d_model=128, heads=2, head_dim=64, experts=3):
            super().__init__()
            self.heads, self.head_dim = heads, head_dim
            self.qkv = torch.nn.Linear(d_model, 3 * heads * head_dim, bias=False)
            self.experts = torch.nn.Parameter(torch.randn(experts, heads * head_dim, d_model) / 16)
            self.out = torch.nn.Linear(d_model, d_model)

        def forward(self, x, offs):
            b, s, _ = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, self.heads, self.head_dim).unbind(2)
            y = tilepipe.attention(q, k, v, causal=True).reshape(b * s, -1)
            y = tilepipe.grouped_mm(y, self.experts, offs=offs)
            return tilepipe.matmul(y, self.out.weight.t(), bias=self.out.bias, activation="gelu").view(b, s, -1)

    return Block()


@pytest.mark.parametrize("device", DEVICES)
def test_compile_fullgraph(device):
    torch._dynamo.reset()
    model = make_block().to(device, torch.bfloat16)
    x = torch.randn(2, 24, 128, device=device, dtype=torch.bfloat16)
    offs = torch.tensor([10, 30, 48], dtype=torch.int32, device=device)
    with torch.no_grad():
        want = model(x, offs)
        got = torch.compile(model, fullgraph=True)(x, offs)
    torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)


@requires_cuda
def test_compile_reduce_overhead_cuda_graphs():
    torch._dynamo.reset()
    model = make_block().cuda().to(torch.bfloat16)
    x = torch.randn(2, 24, 128, device="cuda", dtype=torch.bfloat16)
    offs = torch.tensor([10, 30, 48], dtype=torch.int32, device="cuda")
    with torch.no_grad():
        want = model(x, offs)
        compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
        for _ in range(3):
            got = compiled(x, offs)
    torch.testing.assert_close(got, want, atol=2e-2, rtol=2e-2)


FIRST_CALL_IN_CAPTURE = textwrap.dedent("""
    import torch, tilepipe
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 33, 4, 64, generator=g).cuda().bfloat16() for _ in range(3))
    a = torch.randn(50, 64, generator=g).cuda().bfloat16()
    w = torch.randn(2, 64, 32, generator=g).cuda().bfloat16()
    offs = torch.tensor([20, 50], dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # tilepipe's first calls in this process
        out = tilepipe.attention(q, k, v, causal=True)
        y = tilepipe.grouped_mm(a, w, offs=offs)
        z = tilepipe.matmul(a, w[0])
    for _ in range(2):
        q.copy_(torch.randn(2, 33, 4, 64, generator=g).cuda().bfloat16())
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, tilepipe.attention(q, k, v, causal=True), atol=0, rtol=0)
    torch.testing.assert_close(y, tilepipe.grouped_mm(a, w, offs=offs), atol=0, rtol=0)
    torch.testing.assert_close(z, tilepipe.matmul(a, w[0]), atol=0, rtol=0)
    print("replayed")
""")


@requires_cuda
def test_cuda_graph_first_call_inside_capture():
    """In a fresh process, so that the capture really holds tilepipe's first launches (the
    failure channel, the kernel's first-launch wait, shared-memory attributes)."""
    r = subprocess.run([sys.executable, "-c", FIRST_CALL_IN_CAPTURE], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "replayed" in r.stdout, r.stdout + r.stderr


@requires_cuda
def test_current_stream_is_used():
    """The kernel runs on the current (side) stream: it finishes while the default stream
    is still busy with a long sleep."""
    q, k, v = qkv("cuda")
    want = tilepipe.attention(q, k, v)
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    torch.cuda._sleep(2_000_000_000)  # about a second on the default stream
    with torch.cuda.stream(side):
        got = tilepipe.attention(q, k, v)
        done = torch.cuda.Event()
        done.record(side)
    done.synchronize()
    assert not torch.cuda.default_stream().query(), "the default stream finished first: the kernel may have run on it"
    torch.cuda.synchronize()
    torch.testing.assert_close(got, want, atol=0, rtol=0)


@pytest.mark.skipif(not HAS_CUDA or torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensors_on_another_gpu():
    torch.cuda.set_device(0)
    q, k, v = qkv("cuda:1")
    out = tilepipe.attention(q, k, v, causal=True)
    assert out.device == torch.device("cuda:1") and torch.cuda.current_device() == 0
    ref = [rounded(x.float().cpu().numpy(), "bfloat16") for x in (q, k, v)]
    got = out.float().cpu().numpy()
    for b in range(q.shape[0]):
        assert rel_error(got[b], attention_reference(*(x[b] for x in ref), causal=True)[0]) < 1e-2


@pytest.mark.parametrize("device", DEVICES)
def test_backward_raises_where_there_is_none(device):
    a = torch.randn(64, 64, dtype=torch.bfloat16, device=device, requires_grad=True)
    b = torch.randn(64, 64, dtype=torch.bfloat16, device=device)
    out = tilepipe.matmul(a, b)  # the forward works with inputs that require grad
    with pytest.raises(NotImplementedError, match="no backward"):
        out.float().sum().backward()


@requires_cuda
def test_device_mismatch_named():
    q, k, v = qkv("cuda")
    with pytest.raises(ValueError, match="k is on host memory but q is on a GPU"):
        tilepipe.attention(q, k.cpu(), v)
