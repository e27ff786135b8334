#!/usr/bin/env python3
"""Combines attention benchmark JSON files (bench_attention's and the peers', several rounds each)
into one table.

  python3 bench/attention_table.py RUN.json... [--json SUMMARY.json] [--ours tilepipe]

Per configuration and implementation: the median over rounds of median_ms, the TFLOP/s of that
(FLOPs = 4*b*hq*sq*sk*d, halved when causal; 2.5 times that with --backward), and ratio = TFLOP/s of tilepipe (the best of the impls
named --ours or starting with it) / TFLOP/s of the best peer: > 1 means tilepipe is faster.
A cell reads "ms / TFLOP/s"; "—" where an implementation has no row, "err" where it only failed;
"(ran f16)" where the implementation ran another dtype; "!" marks a failed correctness check in some round.
"""
import argparse, json, math, statistics, sys

from attention_shapes import flops

KEYS = ("b", "sq", "sk", "hq", "hkv", "d", "causal", "dtype")


def label(c):
    s = f"s{c['sq']}" if c["sq"] == c["sk"] else f"sq{c['sq']} sk{c['sk']}"
    h = f"h{c['hq']}" if c["hq"] == c["hkv"] else f"hq{c['hq']} hkv{c['hkv']}"
    return f"b{c['b']} {s} {h} d{c['d']}"


def geomean(xs):
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--json", help="write the summary here")
    ap.add_argument("--ours", default="tilepipe")
    ap.add_argument("--backward", action="store_true", help="the runs time the backward (FLOPs 2.5 x the forward's)")
    a = ap.parse_args()
    runs, gpus, used = {}, [], []  # runs: config key -> impl -> {"ms": [...], "errors": [...], "checks": [...]}
    for path in a.files:
        try:
            doc = json.load(open(path))
            results = doc["results"]
        except Exception as e:
            print(f"attention_table: skipping {path}: {e}", file=sys.stderr)
            continue
        used.append(path)
        if doc.get("gpu") not in gpus:
            gpus.append(doc.get("gpu"))
        for r in results:
            try:
                k = tuple(str(r[x]) if x == "dtype" else int(r[x]) for x in KEYS)
            except (KeyError, TypeError, ValueError):
                print(f"attention_table: {path}: row without a configuration: {r}", file=sys.stderr)
                continue
            e = runs.setdefault(k, {}).setdefault(str(r.get("impl", "?")), {"ms": [], "errors": [], "checks": [], "ran": set()})
            if r.get("dtype_run", k[-1]) != k[-1]:
                e["ran"].add(str(r["dtype_run"]))
            if isinstance(r.get("median_ms"), (int, float)) and r["median_ms"] > 0:
                e["ms"].append(float(r["median_ms"]))
            elif "error" in r:
                e["errors"].append(str(r["error"]))
            if "check" in r:
                e["checks"].append(str(r["check"]))
    is_ours = lambda i: i == a.ours or i.startswith(a.ours)
    impls = sorted({i for v in runs.values() for i in v}, key=lambda i: (not is_ours(i), i))
    if not any(map(is_ours, impls)):
        impls.insert(0, a.ours)
    peers = [i for i in impls if not is_ours(i)]

    summary, lines, problems = [], [], []
    head = ["config", "causal", "dtype"] + [f"{i} ms / TFLOP/s" for i in impls] + ["best peer", f"{a.ours} / best peer"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k, by_impl in runs.items():
        c = dict(zip(KEYS, k))
        f = flops(c) * (2.5 if a.backward else 1)
        row = dict(c, flops=f, impls={})
        cells = []
        for i in impls:
            e = by_impl.get(i)
            if e is None:
                cells.append("—")
                continue
            bad = [x for x in e["checks"] if x != "ok" and not x.startswith("skipped")]
            s = {"rounds": len(e["ms"]), "ms_rounds": e["ms"], "checks": e["checks"]} | ({"dtype_run": sorted(e["ran"])} if e["ran"] else {})
            if e["ms"]:
                s["median_ms"] = statistics.median(e["ms"])
                s["tflops"] = f / (s["median_ms"] * 1e-3) / 1e12
                cells.append(f"{s['median_ms']:.3f} / {s['tflops']:.0f}" + (f" (ran {'/'.join(sorted(e['ran']))})" if e["ran"] else "")
                             + (" !" if bad else ""))
            else:
                cells.append("err" if e["errors"] else "—")
            if e["errors"]:
                s["errors"] = sorted(set(e["errors"]))
                problems.append(f"- {i}, {label(c)} causal={c['causal']} {c['dtype']}: {s['errors'][0][:200]}"
                                + (f" ({len(e['errors'])} of {len(e['errors']) + len(e['ms'])} rounds)" if e["ms"] else ""))
            if bad:
                problems.append(f"- {i}, {label(c)} causal={c['causal']} {c['dtype']}: check {bad[0]}")
            row["impls"][i] = s
        tf = lambda names: max((row["impls"][i]["tflops"] for i in names if "tflops" in row["impls"].get(i, {})), default=None)
        ours, best = tf([i for i in impls if is_ours(i)]), tf(peers)
        row["best_peer"] = max((i for i in peers if "tflops" in row["impls"].get(i, {})),
                               key=lambda i: row["impls"][i]["tflops"], default=None)
        row["ratio"] = ours / best if ours and best else None
        row["ratio_per_peer"] = {p: ours / row["impls"][p]["tflops"] for p in peers
                                 if ours and "tflops" in row["impls"].get(p, {})}
        summary.append(row)
        lines.append("| " + " | ".join([label(c), str(c["causal"]), c["dtype"]] + cells
                                       + [row["best_peer"] or "—", f"{row['ratio']:.3f}" if row["ratio"] else "—"]) + " |")

    gm = geomean([r["ratio"] for r in summary if r["ratio"]])
    gm_peer = {p: geomean([r["ratio_per_peer"][p] for r in summary if p in r["ratio_per_peer"]]) for p in peers}
    print(f"Attention {'backward' if a.backward else 'forward'}, {', '.join(map(str, gpus)) or 'no GPU named'}; {len(used)} files; medians over rounds.\n")
    print("\n".join(lines))
    n = sum(1 for r in summary if r["ratio"])
    print(f"\n{a.ours} / best peer, geometric mean over {n} configurations: " + (f"{gm:.3f}" if gm else "—"))
    for p, g in gm_peer.items():
        if g:
            print(f"{a.ours} / {p}, geometric mean over {sum(1 for r in summary if p in r['ratio_per_peer'])} configurations: {g:.3f}")
    if problems:
        print("\nErrors and failed checks:\n" + "\n".join(problems))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"gpus": gpus, "files": used, "ours": a.ours, "impls": impls, "geomean_ratio": gm,
                       "geomean_ratio_per_peer": gm_peer, "configs": summary}, f, indent=1)


if __name__ == "__main__":
    main()
