#!/usr/bin/env python3
"""PyTorch peers of bench_grouped_matmul on bench/grouped_matmul_shapes.txt:

  torch_grouped_mm  torch._grouped_mm(lhs, rhs, offs=offs) (CUTLASS-based), rhs [G, K, N] as
                    the layout gives it (nk: [G, N, K] storage passed as .transpose(-2, -1))
  torch_mm_loop     one torch.mm per group into its rows of out (the sizes known on the host)
  torch_dense       one torch.mm of all M rows by one group's weights: the same FLOPs with the
                    weights read once, the ceiling a grouped matmul approaches

  python3 bench/grouped_matmul_peers_torch.py --shapes bench/grouped_matmul_shapes.txt --json OUT.json

Group sizes as examples/common/grouped_routing.hpp makes them (balanced; skewed: group 0 takes
half of the rows, the others share the rest, the last the remainder). Timing as the C++ bench:
CUDA events around batches of 10 calls, 3 warm-up batches, median of 15; each batch is also
replayed as a CUDA graph and median_ms is the faster ("timing" says which). Every shape's
inputs exceed 200 MB, so one input set. FLOPs = 2 M N K. Check: 256 sampled outputs against
float64 (relative to the sum of |products|, 1e-2).

Rows of dtype e4m3 (bench/grouped_matmul_fp8_shapes.txt) time the fp8 peers instead:

  torch_scaled_grouped_mm   torch._scaled_grouped_mm, row-wise scales (scale_a [M], scale_b [G, N],
                            the only recipe it takes on SM90), fast accumulation: fewer scale
                            multiplies than tilepipe's block scales, so a peer that is ahead of it
  torch_scaled_mm_loop      one block-scaled torch._scaled_mm per group (1 x 128 / 128 x 128, the
                            recipe tilepipe runs; scales laid out per group outside the timing)
  torch_scaled_dense        one per-tensor torch._scaled_mm of all M rows by one group's weights
"""
import argparse, datetime, json

import torch

from torch_timing import time_call

DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
E4M3 = torch.float8_e4m3fn


def read_shapes(path):
    out = []
    for line in open(path):
        f = line.split("#")[0].split()
        if len(f) == 7:
            out.append(dict(groups=int(f[0]), rows=int(f[1]), k=int(f[2]), n=int(f[3]), routing=f[4], layout=f[5],
                            dtype=f[6]))
    return out


def group_sizes(groups, rows, routing):
    total = groups * rows
    if routing != "skewed" or groups == 1:
        return [rows] * groups
    first = total // 2
    each = (total - first) // (groups - 1)
    sizes = [first] + [each] * (groups - 1)
    sizes[-1] = total - first - each * (groups - 2)
    return sizes


def check(out, lhs, rhs_kn, ends):
    """Worst |out - ref| / sum|products| over 256 sampled entries (float64 reference)."""
    gen = torch.Generator().manual_seed(11)
    m, n = out.shape
    rows = torch.randint(0, m, (256,), generator=gen).tolist()
    cols = torch.randint(0, n, (256,), generator=gen).tolist()
    ends_t = torch.tensor(ends)
    worst = 0.0
    for r, j in zip(rows, cols):
        g = int(torch.searchsorted(ends_t, r, right=True))
        p = lhs[r].double() * rhs_kn[g][:, j].double()
        worst = max(worst, abs(out[r, j].double() - p.sum()).item() / max(p.abs().sum().item(), 1e-6))
    return ("ok" if worst <= 1e-2 else f"mismatch {worst:.3g}"), worst


def time_peers(c, peers, flops, label):
    """Checks and times each (name, call, check or None); one result row per peer."""
    rows = []
    for name, call, verify in peers:
        row = dict(impl=name, **c)
        try:
            res = call()
            torch.cuda.synchronize()
            if verify:
                row["check"], row["check_err"] = verify(res)
            del res
            ms, how = time_call(lambda i: call())
            row.update(median_ms=round(ms, 5), tflops=round(flops / (ms * 1e-3) / 1e12, 2), timing=how)
            print(f"{name} {label}: {ms:.3f} ms  {row['tflops']:.1f} TFLOP/s ({how}) {row.get('check', '')}",
                  flush=True)
        except Exception as e:
            row["error"] = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
            print(f"{name} {label}: {row['error']}", flush=True)
        rows.append(row)
    return rows


def check_scaled(out, a, b_nk, ends, factor):
    """Worst |out - ref| / ||scaled products||_2 over 256 sampled entries (float64); factor(r, g, j)
    is the [K] vector of scales entry (r, j) of group g multiplies its products by."""
    gen = torch.Generator().manual_seed(11)
    m, n = out.shape
    ends_t = torch.tensor(ends)
    worst = 0.0
    for r, j in zip(torch.randint(0, m, (256,), generator=gen).tolist(),
                    torch.randint(0, n, (256,), generator=gen).tolist()):
        g = int(torch.searchsorted(ends_t, r, right=True))
        p = a[r].double() * b_nk[g, j].double() * factor(r, g, j)
        worst = max(worst, abs(out[r, j].double() - p.sum()).item() / max(p.norm().item(), 1e-6))
    return ("ok" if worst <= 5e-2 else f"mismatch {worst:.3g}"), worst


def run_fp8(c):
    sizes = group_sizes(c["groups"], c["rows"], c["routing"])
    ends = [sum(sizes[: g + 1]) for g in range(len(sizes))]
    starts = [0] + ends[:-1]
    m, k, n, g = ends[-1], c["k"], c["n"], c["groups"]
    kb, nb = (k + 127) // 128, (n + 127) // 128
    a = torch.randn(m, k, device="cuda").to(E4M3)
    b_nk = torch.randn(g, n, k, device="cuda").to(E4M3)
    b = b_nk.transpose(-2, -1)                                   # [G, K, N], column-major as required
    offs = torch.tensor(ends, device="cuda", dtype=torch.int32)
    sa_row = torch.rand(m, device="cuda") + 0.5
    sb_row = torch.rand(g, n, device="cuda") + 0.5
    sa_blk = [(torch.rand(kb, e - s, device="cuda") + 0.5).t() for s, e in zip(starts, ends)]  # M-major
    sb_blk = [(torch.rand(nb, kb, device="cuda") + 0.5).t() for _ in range(g)]  # [K/128, N/128] as _scaled_mm takes it
    one = torch.ones((), device="cuda")
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    kidx = torch.arange(k, device="cuda") // 128

    def loop():
        for i in range(g):
            if sizes[i]:
                out[starts[i]:ends[i]] = torch._scaled_mm(a[starts[i]:ends[i]], b_nk[i].t(), sa_blk[i], sb_blk[i],
                                                          out_dtype=torch.bfloat16, use_fast_accum=False)

    def loop_factor(r, gi, j):
        return sa_blk[gi][r - starts[gi]].double()[kidx] * sb_blk[gi][:, j // 128].double()[kidx]

    def run_loop():
        loop()
        return out

    peers = [("torch_scaled_grouped_mm",
              lambda: torch._scaled_grouped_mm(a, b, sa_row, sb_row, offs=offs, out_dtype=torch.bfloat16,
                                               use_fast_accum=True),
              lambda res: check_scaled(res, a, b_nk, ends, lambda r, gi, j: sa_row[r].double() * sb_row[gi, j].double())),
             ("torch_scaled_mm_loop", run_loop, lambda res: check_scaled(res, a, b_nk, ends, loop_factor)),
             ("torch_scaled_dense",
              lambda: torch._scaled_mm(a, b_nk[0].t(), one, one, out_dtype=torch.bfloat16, use_fast_accum=True), None)]
    label = f"G={g} rows={c['rows']} K={k} N={n} {c['routing']} rhs {c['layout']} e4m3"
    rows = time_peers(c, peers, 2.0 * m * n * k, label)
    del a, b_nk, out
    torch.cuda.empty_cache()
    return rows


def run(c):
    if c["dtype"] == "e4m3":
        return run_fp8(c)
    dt = DTYPES[c["dtype"]]
    sizes = group_sizes(c["groups"], c["rows"], c["routing"])
    ends = [sum(sizes[: g + 1]) for g in range(len(sizes))]
    m, k, n, g = ends[-1], c["k"], c["n"], c["groups"]
    flops = 2.0 * m * n * k
    lhs = torch.randn(m, k, device="cuda", dtype=dt)
    if c["layout"] == "nk":
        rhs_kn = torch.randn(g, n, k, device="cuda", dtype=dt).transpose(-2, -1)
    else:
        rhs_kn = torch.randn(g, k, n, device="cuda", dtype=dt)
    offs = torch.tensor(ends, device="cuda", dtype=torch.int32)
    out = torch.empty(m, n, device="cuda", dtype=dt)
    starts = [0] + ends[:-1]

    def mm_loop():
        for i in range(g):
            if sizes[i]:
                torch.mm(lhs[starts[i]:ends[i]], rhs_kn[i], out=out[starts[i]:ends[i]])

    verify = lambda res: check(out if res is None else res, lhs, rhs_kn, ends)
    peers = [("torch_grouped_mm", lambda: torch._grouped_mm(lhs, rhs_kn, offs=offs), verify),
             ("torch_mm_loop", mm_loop, verify),
             ("torch_dense", lambda: torch.mm(lhs, rhs_kn[0]), None)]
    rows = time_peers(c, peers, flops, f"G={g} rows={c['rows']} K={k} N={n} {c['routing']} rhs {c['layout']} {c['dtype']}")
    del lhs, rhs_kn, out
    torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="bench/grouped_matmul_shapes.txt")
    ap.add_argument("--json")
    a = ap.parse_args()
    results = [r for c in read_shapes(a.shapes) for r in run(c)]
    if a.json:
        json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                   "results": results}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
