#!/usr/bin/env python3
"""Side by side: bench_grouped_matmul's and grouped_matmul_peers_torch.py's JSON (one or more
rounds each) as tables, TFLOP/s as the median over the rounds. 16-bit rows: tilepipe's ratio to
torch._grouped_mm and to the dense ceiling (torch_dense: the same FLOPs, weights read once);
fp8 rows: tilepipe's row-wise kernel against torch._scaled_grouped_mm (row-wise) and its
block-scaled kernel against a block-scaled torch._scaled_mm per group.

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

# Per family: the columns, and the ratios (tilepipe's kernel, its peer) each row reports.
FAMILIES = {
    "16-bit": (["tilepipe", "torch_grouped_mm", "torch_mm_loop", "torch_dense"],
               [("tilepipe", "torch_grouped_mm"), ("tilepipe", "torch_dense")]),
    "fp8 (e4m3)": (["tilepipe_row_wise", "tilepipe_block", "torch_scaled_grouped_mm", "torch_scaled_mm_loop",
                    "torch_scaled_dense"],
                   [("tilepipe_row_wise", "torch_scaled_grouped_mm"), ("tilepipe_block", "torch_scaled_mm_loop")]),
}
merged = []
for family, (impls, ratios) in FAMILIES.items():
    keys = [k for k in tflops if (k[6] == "e4m3") == family.startswith("fp8")]
    if not keys:
        continue
    print(f"grouped matmul, {family}, TFLOP/s (median of rounds), {meta.get('gpu')} {meta.get('date')}")
    print(f"{'G x rows':>11} {'K':>5} {'N':>6} {'routing':>8} {'rhs':>3} | " + " ".join(f"{i:>16}" for i in impls)
          + " | " + " | ".join(f"{a} / {b}" for a, b in ratios))
    for key in keys:
        med = {i: statistics.median(v) if v else None for i, v in tflops[key].items()}
        cells = " ".join(f"{med[i]:>16.1f}" if med.get(i) else f"{'-':>16}" for i in impls)
        r = [f"{med[x] / med[y]:.2f}x" if med.get(x) and med.get(y) else "-" for x, y in ratios]
        print(f"{key[0]:>4} x {key[1]:<4} {key[2]:>5} {key[3]:>6} {key[4]:>8} {key[5]:>3} | {cells} | " + " | ".join(r))
        merged.append(dict(zip(KEY, key), tflops=med, ratios=dict(zip([f"{x}/{y}" for x, y in ratios], r))))
if a.json:
    json.dump({**meta, "rows": merged}, open(a.json, "w"), indent=1)
