#!/usr/bin/env python3
"""PyTorch peers of bench_attention_backward: the backward of F.scaled_dot_product_attention
restricted to cuDNN ("cudnn") or FlashAttention-2 ("flash2").

  python3 bench/attention_backward_peers_torch.py --shapes bench/attention_backward_shapes.txt --json OUT.json

Per input set, one forward with requires_grad runs outside the timing; a timed call is
torch.autograd.grad(out, (q, k, v), d_out, retain_graph=True): the backward alone, as
`loss.backward()` runs it. Inputs, layouts, GQA handling and causal alignment as in
attention_peers_torch.py. FLOPs = 2.5 x the forward's (FlashAttention's convention).
Timing: CUDA events around batches of 10 calls, 3 warm-up batches, median of 15, rotating
through input sets of more than 200 MB. Check: dV of batch 0, head 0 (the whole head, when
sq * sk <= 2^27) against a float32 reference.
"""
import argparse, datetime, json, math, sys, warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

from attention_peers_torch import BACKENDS, DTYPES, ROTATE_BYTES, prepare
from attention_shapes import describe, first_line, flops, read_shapes
from torch_timing import time_batches


def check_dv(dv, q, k, v, d_out, causal):
    """dv: [B, H, S, D] (the gradient of the prepared v); q, k, v, d_out: [B, S, H, D] sets."""
    sq, sk, d = q.shape[1], k.shape[1], q.shape[3]
    if sq * sk > 1 << 27:
        return "skipped: too large for the reference", None
    q0, k0, do0 = q[0, :, 0].float(), k[0, :, 0].float(), d_out[0, :, 0].float()
    s = (q0 @ k0.T) / math.sqrt(d)
    if causal:
        s.masked_fill_(torch.arange(sk, device=s.device)[None, :] > torch.arange(sq, device=s.device)[:, None], float("-inf"))
    p = torch.softmax(s, dim=-1)
    group = q.shape[2] // k.shape[2]
    ref = p.T @ do0
    if group > 1:  # dV of KV head 0 sums query heads 0..group-1
        for h in range(1, group):
            sh = (q[0, :, h].float() @ k0.T) / math.sqrt(d)
            if causal:
                sh.masked_fill_(torch.arange(sk, device=s.device)[None, :] > torch.arange(sq, device=s.device)[:, None], float("-inf"))
            ref += torch.softmax(sh, dim=-1).T @ d_out[0, :, h].float()
    err = ((dv[0, 0].float() - ref).abs().max() / ref.abs().max().clamp_min(1e-6)).item()
    return ("ok" if err <= 3e-2 else f"mismatch {err:.3g}"), err


def run_backend(name, backend, c, sets):
    row = dict(impl=name + "_backward", **c)
    group = c["hq"] // c["hkv"]
    variants = ([("bshd", "native"), ("bhsd", "native"), ("bshd", "repeat"), ("bhsd", "repeat")] if group > 1
                else [("bshd", None), ("bhsd", None)])
    rejected = []
    for layout, gqa in variants:
        kw = {"is_causal": bool(c["causal"])} | ({"enable_gqa": True} if gqa == "native" else {})
        try:
            with warnings.catch_warnings(record=True) as caught, sdpa_kernel([backend]):
                warnings.simplefilter("always")
                graphs = []
                for q, k, v, d_out in sets:
                    qkv = tuple(t.detach().requires_grad_() for t in prepare((q, k, v), layout, gqa, group))
                    out = F.scaled_dot_product_attention(*qkv, **kw)
                    graphs.append((out, qkv, d_out.transpose(1, 2) if layout == "bshd" else d_out.transpose(1, 2).contiguous()))
                grads = torch.autograd.grad(graphs[0][0], graphs[0][1], graphs[0][2], retain_graph=True)
                torch.cuda.synchronize()
            break
        except Exception as e:
            why = "; ".join(dict.fromkeys(first_line(w.message) for w in caught))
            rejected.append(f"{layout}{'/' + gqa if gqa else ''}: {first_line(e)}" + (f" ({why[:300]})" if why else ""))
            graphs = None
    else:
        row["error"] = rejected[0]
        return row
    if rejected:
        row["note"] = f"ran {layout}" + (", K/V heads repeated" if gqa == "repeat" else "") + "; rejected: " + " | ".join(rejected)
    try:
        if gqa == "repeat":
            row["check"] = "skipped: K/V heads repeated"
        else:
            row["check"], row["check_err"] = check_dv(grads[2], *sets[0], c["causal"])
    except Exception as e:
        row["check"] = f"skipped: {first_line(e)}"
    del grads
    n = len(graphs)

    def batch(j):
        for i in range(10):
            out, qkv, d_out = graphs[(j * 10 + i) % n]
            torch.autograd.grad(out, qkv, d_out, retain_graph=True)

    try:
        with sdpa_kernel([backend]):
            row["median_ms"] = time_batches(batch)
    except Exception as e:
        row["error"] = f"timing: {first_line(e)}"
        return row
    row["tflops"] = 2.5 * flops(c) / (row["median_ms"] * 1e-3) / 1e12
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="bench/attention_backward_shapes.txt")
    ap.add_argument("--json", required=True)
    ap.add_argument("--only", type=int, default=0, help="first N configurations only")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("attention_backward_peers_torch: no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    doc = {"gpu": torch.cuda.get_device_name(0), "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "results": []}
    print(f"# {doc['gpu']}, torch {torch.__version__}, cuDNN {doc['cudnn']}", flush=True)
    for c in read_shapes(a.shapes, a.only):
        b, d, dt = c["b"], c["d"], DTYPES[c["dtype"]]
        # Per set: q, d_out, their gradients, o (sq rows) and k, v and their gradients (sk rows).
        set_bytes = 2 * b * d * (5 * c["sq"] * c["hq"] + 4 * c["sk"] * c["hkv"])
        n = min(16, ROTATE_BYTES // set_bytes + 1)
        mk = lambda s, h: torch.randn(b, s, h, d, device="cuda", dtype=dt)
        sets = [(mk(c["sq"], c["hq"]), mk(c["sk"], c["hkv"]), mk(c["sk"], c["hkv"]), mk(c["sq"], c["hq"])) for _ in range(n)]
        for name, backend in BACKENDS:
            try:
                row = run_backend(name, backend, c, sets)
            except Exception as e:  # never lose the other configurations
                row = dict(impl=name + "_backward", **c, error=first_line(e))
            row["input_sets"] = n
            doc["results"].append(row)
            if "median_ms" in row:
                print(f"{name:<7}backward {describe(c)}: {row['median_ms']:.3f} ms {row['tflops']:7.1f} TFLOP/s  check {row.get('check')}"
                      + (f"  note: {row['note']}" if "note" in row else ""), flush=True)
            else:
                print(f"{name:<7}backward {describe(c)}: error: {row['error']}", flush=True)
            with open(a.json, "w") as f:
                json.dump(doc, f, indent=1)
            torch.cuda.empty_cache()
        del sets
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
