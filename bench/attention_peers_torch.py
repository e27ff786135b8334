#!/usr/bin/env python3
"""PyTorch peers of bench_attention: F.scaled_dot_product_attention restricted to cuDNN ("cudnn")
or FlashAttention-2 ("flash2").

  python3 bench/attention_peers_torch.py --shapes bench/attention_shapes.txt --json OUT.json [--only N]

Inputs are made [B, S, H, D] contiguous and passed as .transpose(1, 2) views, as FlashAttention users
do; a backend that rejects that layout gets contiguous [B, H, S, D] copies, one that rejects
enable_gqa gets K/V heads repeated outside the timed region ("note" says so). Causal is PyTorch's
is_causal (top-left aligned; the causal shapes have sq == sk). Scale 1/sqrt(d).
FLOPs = 4*b*hq*sq*sk*d, halved when causal (the FlashAttention convention, also for sq != sk).
Timing: CUDA events around batches of 10 calls, 3 warm-up batches, median of 15, the calls rotating
through input sets of more than 200 MB in all; the same batch is also replayed as a CUDA graph where
capture works (launch overhead removed). median_ms is the faster of the two ("timing" says which).
--layout restricts the inputs to one of the two layouts (default: the first a backend accepts).
Check: batch 0, head 0, the last query rows (at most 64M scores) against a float32 reference.
"""
import argparse, datetime, json, math, sys, warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from attention_shapes import describe, first_line, flops, read_shapes
from torch_timing import CALLS, time_batches

ROTATE_BYTES = 200 << 20
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
BACKENDS = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash2", SDPBackend.FLASH_ATTENTION)]




def check(out, q, k, v, causal):
    """out: [B, H, S, D] from the set q, k, v ([B, S, H, D]); batch 0, head 0 (K/V head 0), last rows."""
    sq, sk, d = q.shape[1], k.shape[1], q.shape[3]
    rows = min(sq, max(1, (64 << 20) // sk))
    q0, k0, v0 = q[0, sq - rows:, 0].float(), k[0, :, 0].float(), v[0, :, 0].float()
    s = (q0 @ k0.T) / math.sqrt(d)
    if causal:  # top-left: query i sees keys j <= i
        qi = torch.arange(sq - rows, sq, device=s.device)[:, None]
        s.masked_fill_(torch.arange(sk, device=s.device)[None, :] > qi, float("-inf"))
    ref = torch.softmax(s, dim=-1) @ v0
    err = ((out[0, 0, sq - rows:].float() - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()
    return ("ok" if err <= 2e-2 else f"mismatch {err:.3g}"), err


def prepare(qkv, layout, gqa, group):
    q, k, v = qkv
    if gqa == "repeat":
        k, v = k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    return tuple(t.contiguous() for t in (q, k, v)) if layout == "bhsd" else (q, k, v)


def time_graph(call, args):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for i in range(CALLS):
            call(args[i % len(args)])
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(CALLS):
            call(args[i % len(args)])
    ms = time_batches(lambda j: g.replay())
    del g
    return ms


def run_backend(name, backend, c, sets, layout="auto"):
    row = dict(impl=name, **c)
    group = c["hq"] // c["hkv"]
    variants = ([("bshd", "native"), ("bhsd", "native"), ("bshd", "repeat"), ("bhsd", "repeat")] if group > 1
                else [("bshd", None), ("bhsd", None)])
    if layout != "auto":
        variants = [x for x in variants if x[0] == layout]
        row["layout"] = layout
    rejected = []
    for layout, gqa in variants:
        kw = {"is_causal": bool(c["causal"])} | ({"enable_gqa": True} if gqa == "native" else {})
        call = lambda a, kw=kw: F.scaled_dot_product_attention(*a, **kw)
        try:
            with warnings.catch_warnings(record=True) as caught, sdpa_kernel([backend]):
                warnings.simplefilter("always")
                out = call(prepare(sets[0], layout, gqa, group))
                torch.cuda.synchronize()
            break
        except Exception as e:
            why = "; ".join(dict.fromkeys(first_line(w.message) for w in caught))
            rejected.append(f"{layout}{'/' + gqa if gqa else ''}: {first_line(e)}" + (f" ({why[:300]})" if why else ""))
    else:
        row["error"] = rejected[0]
        return row
    if rejected:
        ran = "contiguous [B,H,S,D]" if layout == "bhsd" else "[B,S,H,D] transposed views"
        row["note"] = (f"ran {ran}" + (", K/V heads repeated (enable_gqa rejected)" if gqa == "repeat" else "")
                       + "; rejected: " + " | ".join(rejected))
    try:
        row["check"], row["check_err"] = check(out, *sets[0], c["causal"])
    except Exception as e:
        row["check"] = f"skipped: {first_line(e)}"
    del out
    try:
        args = [prepare(s, layout, gqa, group) for s in sets]
        n = len(args)

        def batch(j):
            for i in range(CALLS):
                call(args[(j * CALLS + i) % n])

        with sdpa_kernel([backend]):
            row["eager_ms"] = time_batches(batch)
            try:
                row["graph_ms"] = time_graph(call, args)
            except Exception as e:
                row["graph_error"] = first_line(e)
    except Exception as e:
        row["error"] = f"timing: {first_line(e)}"
        return row
    row["timing"] = "graph" if row.get("graph_ms", math.inf) < row["eager_ms"] else "eager"
    row["median_ms"] = row[row["timing"] + "_ms"]
    row["tflops"] = flops(c) / (row["median_ms"] * 1e-3) / 1e12
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="bench/attention_shapes.txt")
    ap.add_argument("--json", required=True)
    ap.add_argument("--only", type=int, default=0, help="first N configurations only")
    ap.add_argument("--layout", choices=["auto", "bshd", "bhsd"], default="auto",
                    help="bshd: [B,S,H,D] transposed views only; bhsd: contiguous [B,H,S,D] only; auto: the first accepted")
    a = ap.parse_args()
    cfgs = read_shapes(a.shapes, a.only)
    if not torch.cuda.is_available():
        sys.exit("attention_peers_torch: no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    doc = {"gpu": torch.cuda.get_device_name(0), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "results": []}
    print(f"# {doc['gpu']}, torch {torch.__version__}, cuDNN {doc['cudnn']}", flush=True)
    for c in cfgs:
        b, d, dt = c["b"], c["d"], DTYPES[c["dtype"]]
        set_bytes = 2 * b * d * (c["sq"] * c["hq"] + 2 * c["sk"] * c["hkv"])
        n = min(64, ROTATE_BYTES // set_bytes + 1)
        try:
            mk = lambda s, h: torch.randn(b, s, h, d, device="cuda", dtype=dt)
            sets, err = [(mk(c["sq"], c["hq"]), mk(c["sk"], c["hkv"]), mk(c["sk"], c["hkv"])) for _ in range(n)], None
        except Exception as e:
            sets, err = None, f"inputs: {first_line(e)}"
        for name, backend in BACKENDS:
            if err:
                row = dict(impl=name, **c, error=err)
            else:
                try:
                    row = run_backend(name, backend, c, sets, a.layout)
                except Exception as e:  # last resort: never lose the other configurations
                    row = dict(impl=name, **c, error=first_line(e))
                row["input_sets"] = n
            doc["results"].append(row)
            if "median_ms" in row:
                print(f"{name:<7}{describe(c)}: {row['median_ms']:.3f} ms {row['tflops']:7.1f} TFLOP/s"
                      f"  ({row['timing']}; eager {row['eager_ms']:.3f} ms)  check {row.get('check')}"
                      + (f"  note: {row['note']}" if "note" in row else ""), flush=True)
            else:
                print(f"{name:<7}{describe(c)}: error: {row['error']}", flush=True)
            with open(a.json, "w") as f:
                json.dump(doc, f, indent=1)
        del sets
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
