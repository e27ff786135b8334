#!/usr/bin/env python3
"""Side by side: bench_scaled_matmul's and scaled_matmul_peers_torch.py's JSON (one or more
rounds each) as one table, TFLOP/s as the median over the rounds.

  python3 bench/scaled_matmul_table.py RUN.json... [--json summary.json]

One line per shape and mode. "cuBLASLt" is torch._scaled_mm in the same mode (per_tensor: per-tensor
scales with use_fast_accum=True; per_tensor_promoted: use_fast_accum=False; row_wise: row-wise
scales, use_fast_accum=True; block: 1x128 x 128x128 blocks), "ratio" tilepipe over it. "vs pt"
is tilepipe over cuBLASLt's per-tensor fp8 with fast accumulation, the fastest cuBLASLt fp8 there
is: on the block line it is issue 32's bar (block-scaled at least 0.90x of per-tensor cuBLAS).
The bf16 columns are the bf16 matmuls on the same shape (tilepipe's tp::matmul, timed beside each
mode by bench_scaled_matmul, median over all its modes and rounds; cuBLAS's torch.mm).
row_wise_promoted is cuBLASLt only (tilepipe's row_wise does not promote). A cell reads "err"
where every round failed, "bad" where a round's check failed (such rounds are left out), "-"
where nothing was measured.

Rows of bench_scaled_matmul have no "impl": case "MODE_MxNxK", m, n, k, tflops, bf16_tflops.
"""
import argparse, json, math, statistics

ap = argparse.ArgumentParser()
ap.add_argument("runs", nargs="+")
ap.add_argument("--json")
a = ap.parse_args()

MODES = ["per_tensor", "per_tensor_promoted", "row_wise", "row_wise_promoted", "block"]
# shape -> column -> list of TFLOP/s over rounds; columns: ("tilepipe", mode), ("cublaslt", mode), "tilepipe_bf16", "cublas_bf16"
cells, flags, meta, shapes, errors = {}, {}, {}, [], {}


def add(shape, col, value=None, flag=None):
    if shape not in shapes:
        shapes.append(shape)
    cells.setdefault(shape, {}).setdefault(col, [])
    if value is not None:
        cells[shape][col].append(value)
    if flag:
        flags.setdefault(shape, {}).setdefault(col, set()).add(flag)


def mode_of(r):
    if r.get("mode"):
        return r["mode"]
    suffix = f"_{r['m']}x{r['n']}x{r['k']}"
    return r["case"][: -len(suffix)] if r["case"].endswith(suffix) else r["case"]


for path in a.runs:
    doc = json.load(open(path))
    if "results" not in doc:  # not a run (this script's own --json, say)
        print(f"(skipped {path}: no results)")
        continue
    for key in ("gpu", "date", "torch", "cuda"):
        if doc.get(key):
            meta.setdefault(key, doc[key])
    for r in doc["results"]:
        shape = (r["m"], r["n"], r["k"])
        impl = r.get("impl", "tilepipe")
        mode = mode_of(r)
        if impl == "tilepipe":
            add(shape, ("tilepipe", mode), r.get("tflops"))
            if r.get("bf16_tflops") is not None:
                add(shape, "tilepipe_bf16", r["bf16_tflops"])
            continue
        col = "cublas_bf16" if impl == "cublas_bf16" else ("cublaslt", mode)
        if "error" in r:
            add(shape, col, flag="err")
            errors.setdefault((impl, r["case"], r["error"]), 0)
            errors[(impl, r["case"], r["error"])] += 1
        elif not str(r.get("check", "ok")).startswith("ok"):
            add(shape, col, flag="bad")
        else:
            add(shape, col, r.get("tflops"))
            if impl != "cublas_bf16" and r.get("api") and r["api"] != "torch._scaled_mm":
                meta.setdefault("apis", {})[mode] = r["api"]


def med(shape, col):
    v = cells.get(shape, {}).get(col, [])
    return statistics.median(v) if v else None


starred = []


def cell(shape, col):
    v = med(shape, col)
    if v is not None:
        if flags.get(shape, {}).get(col):
            starred.append((shape, col))
            return f"{v:.1f}*"
        return f"{v:.1f}"
    f = flags.get(shape, {}).get(col, set())
    return "bad" if "bad" in f else "err" if "err" in f else "-"


def rnd(v):
    return None if v is None else round(v, 2)


def ratio(x, y):
    return x / y if x and y else None


def fmt(r):
    return f"{r:.2f}x" if r else "-"


print(f"fp8 matmul with scales, TFLOP/s (median of rounds), {meta.get('gpu')} {meta.get('date')}"
      + (f", torch {meta['torch']} (CUDA {meta.get('cuda')})" if meta.get("torch") else ""))
print()
print("| M x N x K | mode | tilepipe | cuBLASLt | ratio | vs pt | tilepipe bf16 | cuBLAS bf16 |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
rows, by_mode = [], {}
for shape in shapes:
    pt = med(shape, ("cublaslt", "per_tensor"))
    for mode in MODES:
        tp, cl = ("tilepipe", mode), ("cublaslt", mode)
        if tp not in cells[shape] and cl not in cells[shape]:
            continue
        t, c = med(shape, tp), med(shape, cl)
        r, r_pt = ratio(t, c), ratio(t, pt)
        if r:
            by_mode.setdefault(mode, []).append(r)
        if mode == "block" and r_pt:
            by_mode.setdefault("block_vs_per_tensor", []).append(r_pt)
        print(f"| {shape[0]} x {shape[1]} x {shape[2]} | {mode} | {cell(shape, tp)} | {cell(shape, cl)} | {fmt(r)} "
              f"| {fmt(r_pt)} | {cell(shape, 'tilepipe_bf16')} | {cell(shape, 'cublas_bf16')} |")
        rows.append(dict(m=shape[0], n=shape[1], k=shape[2], mode=mode, tilepipe=rnd(t), cublaslt=rnd(c),
                         cublaslt_per_tensor=rnd(pt), ratio=r and round(r, 4), vs_per_tensor=r_pt and round(r_pt, 4),
                         tilepipe_bf16=rnd(med(shape, "tilepipe_bf16")), cublas_bf16=rnd(med(shape, "cublas_bf16")),
                         rounds=dict(tilepipe=len(cells[shape].get(tp, [])), cublaslt=len(cells[shape].get(cl, []))),
                         flags=sorted(flags.get(shape, {}).get(tp, set()) | flags.get(shape, {}).get(cl, set()))))
print()
summary = {}
for mode, rs in by_mode.items():
    g = math.exp(sum(math.log(x) for x in rs) / len(rs))
    summary[mode] = dict(geomean=round(g, 4), min=round(min(rs), 4), max=round(max(rs), 4), shapes=len(rs))
    label = "block vs cuBLASLt per-tensor" if mode == "block_vs_per_tensor" else f"{mode} vs cuBLASLt {mode}"
    print(f"{label}: geometric mean {g:.2f}x, {min(rs):.2f}-{max(rs):.2f}x over {len(rs)} shapes"
          + (f"; issue 32's bar (0.90x) met on {sum(x >= 0.90 for x in rs)} of {len(rs)}" if mode == "block_vs_per_tensor" else ""))
if meta.get("apis"):
    print("peer through: " + ", ".join(f"{m} {api}" for m, api in meta["apis"].items()))
if starred:
    print("* some rounds failed or were left out; the median is over the others")
for (impl, case, err), n in errors.items():
    print(f"{impl} {case}: error in {n} round(s): {err}")
if a.json:
    json.dump({**meta, "rows": rows, "summary": summary,
               "errors": [dict(impl=i, case=c, error=e, rounds=n) for (i, c, e), n in errors.items()]},
              open(a.json, "w"), indent=1)
