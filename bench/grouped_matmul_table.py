#!/usr/bin/env python3
"""Side by side: bench_grouped_matmul's and grouped_matmul_peers_torch.py's JSON (one or more
rounds each) as one table, TFLOP/s as the median over the rounds, with tilepipe's ratio to
torch._grouped_mm and to the dense ceiling (torch_dense: the same FLOPs, weights read once).

  python3 bench/grouped_matmul_table.py RUN.json... [--json merged.json]
"""
import argparse, json, statistics

ap = argparse.ArgumentParser()
ap.add_argument("runs", nargs="+")
ap.add_argument("--json")
a = ap.parse_args()

KEY = ("groups", "rows", "k", "n", "routing", "layout", "dtype")
tflops, meta = {}, {}
for path in a.runs:
    doc = json.load(open(path))
    meta.setdefault("gpu", doc.get("gpu")), meta.setdefault("date", doc.get("date"))
    for r in doc["results"]:
        key = tuple(r[k] for k in KEY)
        if "tflops" in r and str(r.get("check", "ok")).startswith("ok"):
            tflops.setdefault(key, {}).setdefault(r["impl"], []).append(r["tflops"])
        elif "error" in r or "check" in r:
            tflops.setdefault(key, {}).setdefault(r["impl"], [])

impls = ["tilepipe", "torch_grouped_mm", "torch_mm_loop", "torch_dense"]
print(f"grouped matmul, TFLOP/s (median of rounds), {meta.get('gpu')} {meta.get('date')}")
print(f"{'G x rows':>11} {'K':>5} {'N':>6} {'routing':>8} {'rhs':>3} | " + " ".join(f"{i:>16}" for i in impls)
      + " | vs grouped_mm | vs dense")
merged = []
for key, by in tflops.items():
    med = {i: statistics.median(v) if v else None for i, v in by.items()}
    cells = " ".join(f"{med[i]:>16.1f}" if med.get(i) else f"{'-':>16}" for i in impls)
    t, gm, dense = med.get("tilepipe"), med.get("torch_grouped_mm"), med.get("torch_dense")
    r_gm = f"{t / gm:.2f}x" if t and gm else "-"
    r_d = f"{t / dense:.2f}x" if t and dense else "-"
    print(f"{key[0]:>4} x {key[1]:<4} {key[2]:>5} {key[3]:>6} {key[4]:>8} {key[5]:>3} | {cells} | {r_gm:>13} | {r_d:>8}")
    merged.append(dict(zip(KEY, key), tflops=med, vs_grouped_mm=r_gm, vs_dense=r_d))
if a.json:
    json.dump({**meta, "rows": merged}, open(a.json, "w"), indent=1)
