#!/usr/bin/env python3
"""cuBLASLt's fp8 matmul through PyTorch: the peer of bench_scaled_matmul, on its six shapes and
under its mode names. A e4m3 [M, K] row-major, B e4m3 [N, K] row-major passed as b.t() (the
column-major [K, N] cuBLASLt needs), bf16 output:

  per_tensor            torch._scaled_mm, scales 0-dim float32, use_fast_accum=True (tilepipe's
                        per_tensor: the tensor core's accumulator over all of K)
  per_tensor_promoted   the same with use_fast_accum=False (sums promoted to f32 along K)
  row_wise              scale_a [M, 1], scale_b [1, N] float32, use_fast_accum=True (tilepipe's
                        row_wise does not promote)
  row_wise_promoted     the same with use_fast_accum=False (no tilepipe mode; for reference)
  block                 DeepSeek-V3's scaling, tilepipe's block: A 1x128 blocks, B 128x128
                        blocks, use_fast_accum=False (cuBLASLt refuses fast accumulation with
                        block scales). scale_a [M, K/128] with strides (1, M), scale_b
                        [K/128, N/128] with strides (1, K/128) (a row-major [N/128, K/128]
                        transposed); torch._scaled_mm infers the recipe from those shapes, and
                        torch.nn.functional.scaled_mm (ScalingType.BlockWise1x128 /
                        BlockWise128x128) is tried where that fails. SM90 and cuBLASLt >= 12.9.
  bf16                  torch.mm(a, b.t()) in bf16 (cuBLAS), impl cublas_bf16

  python3 bench/scaled_matmul_peers_torch.py [--json OUT.json] [--only TEXT]

--only (default $TP_BENCH_ONLY) keeps the cases whose name ("MODE_MxNxK", as
bench_scaled_matmul names them) contains TEXT. Operand sets as bench_scaled_matmul makes them:
max(2, 400 MiB / ((M + N) K 3 bytes) + 1) sets of A and B (fp8 and bf16), the calls of a batch
going round them, so that the operands a batch reads exceed the 50 MB L2. Timing as the other
PyTorch peers: CUDA events around batches of 10 calls, 3 warm-up batches, median of 15; each
batch is also replayed as a CUDA graph and ms is the faster ("timing" says which).
FLOPs = 2 M N K. Check: 256 sampled outputs against float64 with the scales applied
(relative to the 2-norm of the K scaled products, 5e-2). A mode the installed PyTorch refuses gives a
row with "error" instead of a time; the script goes on.

JSON: {"gpu", "torch", "cuda", "date", "results": [row...]}, each row
  {"impl", "case", "mode", "m", "n", "k", "use_fast_accum", "api", "ms", "tflops", "timing",
   "check", "check_err"} or, where the call failed, "error" in place of the times;
impl "cublaslt_fp8" for the fp8 modes, "cublas_bf16" for bf16. bench_scaled_matmul's rows
have no "impl" and carry "case", "m", "n", "k", "ms", "tflops", "bf16_tflops":
bench/scaled_matmul_table.py joins both on (mode, m, n, k).
"""
import argparse, datetime, json, os

import torch

from torch_timing import time_call

# bench_scaled_matmul's shapes: 4096^3, 8192^3 and DeepSeek-V3's linear shapes (N x K) at 4096 tokens.
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 7168, 2048), (4096, 2048, 7168), (4096, 4096, 7168),
          (4096, 7168, 18432)]
# mode name -> (scaling, use_fast_accum)
MODES = {"per_tensor": ("tensor", True), "per_tensor_promoted": ("tensor", False), "row_wise": ("row", True),
         "row_wise_promoted": ("row", False), "block": ("block", False)}
E4M3 = torch.float8_e4m3fn
DEV = "cuda"


def make_scales(scaling, m, n, k, gen_seed):
    """(scale_a, scale_b) as torch._scaled_mm takes them, and per-element factors for the check:
    fa(rows) -> [len(rows), K] and fb(cols) -> [len(cols), K] (float64, on the GPU)."""
    g = torch.Generator(device=DEV).manual_seed(gen_seed)

    def rand(*shape):
        return torch.rand(*shape, device=DEV, generator=g) + 0.5

    kb, nb = (k + 127) // 128, (n + 127) // 128
    if scaling == "tensor":
        sa, sb = rand(()), rand(())
        return sa, sb, (lambda r: sa.double().expand(len(r), k)), (lambda c: sb.double().expand(len(c), k))
    if scaling == "row":
        sa, sb = rand(m, 1), rand(1, n)
        return sa, sb, (lambda r: sa[r].double().expand(len(r), k)), (lambda c: sb[0, c].double()[:, None].expand(len(c), k))
    # block: A 1x128 ([M, K/128], M-major), B 128x128 (a row-major [N/128, K/128], transposed)
    sa = rand(kb, m).t()
    sb_nk = rand(nb, kb)
    sb = sb_nk.t()
    kidx = torch.arange(k, device=DEV) // 128
    return (sa, sb, (lambda r: sa[r].double()[:, kidx]), (lambda c: sb_nk[torch.div(c, 128, rounding_mode="floor")].double()[:, kidx]))


def check(out, a, b, fa, fb):
    """Worst |out - ref| / ||scaled products||_2 over 256 sampled entries (float64 reference): the
    norm of the K products is the size of a sum's rounding (bf16 output, fast accumulation)
    without the sqrt(K) slack of sum |products|, so a scale applied to the wrong block shows."""
    gen = torch.Generator().manual_seed(11)
    m, n = out.shape
    rows = torch.randint(0, m, (256,), generator=gen).to(DEV)
    cols = torch.randint(0, n, (256,), generator=gen).to(DEV)
    p = a[rows].double() * fa(rows) * b[cols].double() * fb(cols)
    ref = p.sum(1)
    err = ((out[rows, cols].double() - ref).abs() / p.norm(dim=1).clamp_min(1e-6)).max().item()
    return ("ok" if err <= 5e-2 else f"mismatch {err:.3g}"), err


def block_call(a8, b8, sa, sb):
    """The block-scaled call: torch._scaled_mm (recipe from the scales' shapes), else
    torch.nn.functional.scaled_mm with explicit recipes. (api name, call(i)) or raises."""
    errors = []
    try:
        torch._scaled_mm(a8[0], b8[0].t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=False)
        torch.cuda.synchronize()
        return "torch._scaled_mm", lambda i: torch._scaled_mm(a8[i % len(a8)], b8[i % len(b8)].t(), sa, sb,
                                                              out_dtype=torch.bfloat16, use_fast_accum=False)
    except Exception as e:
        errors.append(f"torch._scaled_mm: {first_line(e, 250)}")
    try:
        F = torch.nn.functional
        ST = F.ScalingType
        torch.cuda.synchronize()
        F.scaled_mm(a8[0], b8[0].t(), sa, ST.BlockWise1x128, sb, ST.BlockWise128x128, output_dtype=torch.bfloat16,
                    use_fast_accum=False)
        torch.cuda.synchronize()
        return "torch.nn.functional.scaled_mm", lambda i: F.scaled_mm(
            a8[i % len(a8)], b8[i % len(b8)].t(), sa, ST.BlockWise1x128, sb, ST.BlockWise128x128,
            output_dtype=torch.bfloat16, use_fast_accum=False)
    except Exception as e:
        errors.append(f"torch.nn.functional.scaled_mm: {first_line(e, 250)}")
    raise RuntimeError(" | ".join(errors))


def first_line(e, limit=300):
    s = str(e).strip()
    return (s.splitlines()[0][:limit] if s else type(e).__name__)


def run_shape(m, n, k, only):
    cases = [md for md in list(MODES) if not only or only in f"{md}_{m}x{n}x{k}"]
    with_bf16 = not only or only in f"bf16_{m}x{n}x{k}" or bool(cases)
    if not cases and not with_bf16:
        return []
    sets = max(2, (400 << 20) // ((m + n) * k * 3) + 1)
    flops = 2.0 * m * n * k
    rows = []
    a8, b8 = [], []
    for s in range(sets):
        g = torch.Generator(device=DEV).manual_seed(2 * s)
        a8.append(torch.randn(m, k, device=DEV, generator=g).to(E4M3))
        b8.append(torch.randn(n, k, device=DEV, generator=g).to(E4M3))

    def record(row, call, verify):
        try:
            res = call(0)
            torch.cuda.synchronize()
            if verify:
                row["check"], row["check_err"] = verify(res)
            del res
            ms, how = time_call(call)
            row.update(ms=round(ms, 5), tflops=round(flops / (ms * 1e-3) / 1e12, 2), timing=how)
            print(f"{row['impl']:<13} {row['case']:<40} {ms:.4f} ms {row['tflops']:7.1f} TFLOP/s ({how}) "
                  f"{row.get('check', '')}", flush=True)
        except Exception as e:
            row["error"] = first_line(e)
            print(f"{row['impl']:<13} {row['case']:<40} error: {row['error']}", flush=True)
        rows.append(row)

    for md in cases:
        scaling, fast = MODES[md]
        row = dict(impl="cublaslt_fp8", case=f"{md}_{m}x{n}x{k}", mode=md, m=m, n=n, k=k, use_fast_accum=fast)
        try:
            sa, sb, fa, fb = make_scales(scaling, m, n, k, 7)
            if scaling == "block":
                api, call = block_call(a8, b8, sa, sb)
            else:
                api = "torch._scaled_mm"

                def call(i, sa=sa, sb=sb, fast=fast):
                    return torch._scaled_mm(a8[i % sets], b8[i % sets].t(), sa, sb, out_dtype=torch.bfloat16,
                                            use_fast_accum=fast)
            row["api"] = api
        except Exception as e:
            row["error"] = first_line(e, 600)
            print(f"{row['impl']:<13} {row['case']:<40} error: {row['error']}", flush=True)
            rows.append(row)
            continue
        record(row, call, lambda res, fa=fa, fb=fb: check(res, a8[0], b8[0], fa, fb))
        del sa, sb, fa, fb, call
    del a8, b8
    torch.cuda.empty_cache()

    if with_bf16:
        a16, b16 = [], []
        for s in range(sets):
            g = torch.Generator(device=DEV).manual_seed(2 * s)
            a16.append(torch.randn(m, k, device=DEV, generator=g, dtype=torch.bfloat16))
            b16.append(torch.randn(n, k, device=DEV, generator=g, dtype=torch.bfloat16))
        one = lambda r: torch.ones(len(r), k, device=DEV, dtype=torch.float64)
        record(dict(impl="cublas_bf16", case=f"bf16_{m}x{n}x{k}", mode="bf16", m=m, n=n, k=k, api="torch.mm"),
               lambda i: torch.mm(a16[i % sets], b16[i % sets].t()),
               lambda res: check(res, a16[0], b16[0], one, one))
        del a16, b16
        torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--only", default=os.environ.get("TP_BENCH_ONLY", ""))
    a = ap.parse_args()
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) on {torch.cuda.get_device_name()}", flush=True)
    results = []
    for m, n, k in SHAPES:
        try:
            results += run_shape(m, n, k, a.only)
        except Exception as e:  # out of memory or the like: record it, go on with the next shape
            print(f"{m}x{n}x{k}: {first_line(e)}", flush=True)
            results.append(dict(impl="cublaslt_fp8", case=f"shape_{m}x{n}x{k}", mode="shape", m=m, n=n, k=k,
                                error=first_line(e)))
            torch.cuda.empty_cache()
    if a.json:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
                   "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                   "results": results}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
