"""What the Python call path adds to a launch (issue 28: at most 5 us per call over C++).

A small decode attention (the case the overhead matters for) on PyTorch CUDA tensors:
  cpp launch           tilepipe's C++ launcher alone, looped in C++ (tilepipe._C._time_attention_launches)
  cpp check + launch   the same with the host checks of every argument
  python direct        tilepipe.attention(q, k, v): the eager path (no dispatcher), output allocated by torch
  python op            torch.ops.tilepipe.attention: through PyTorch's dispatcher (what torch.compile keeps)
  torch sdpa           torch.nn.functional.scaled_dot_product_attention, for scale
Host time per call, launches only (the GPU keeps up: batches of 100 calls, synchronised
between batches; medians of 30 batches).
    python bench/python_overhead.py [--json FILE]
"""
import argparse
import json
import statistics
import time

import torch

import tilepipe
from tilepipe import _C

BATCH, BATCHES = 100, 30


def per_call(fn):
    times = []
    for _ in range(BATCHES):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(BATCH):
            fn()
        times.append((time.perf_counter() - t0) / BATCH)
    torch.cuda.synchronize()
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    q = torch.randn(1, 1, 32, 128, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, 1024, 8, 128, device="cuda", dtype=torch.bfloat16)
    v = torch.randn_like(k)
    out = torch.empty_like(q)
    stream = torch.cuda.current_stream().cuda_stream
    scale = 128 ** -0.5
    for _ in range(10):  # first launches (waited for), allocator warm
        tilepipe.attention(q, k, v)
    results = {}
    cpp = [_C._time_attention_launches(q, k, v, out, stream, BATCH) for _ in range(BATCHES)]
    results["cpp launch"] = statistics.median(r[1] for r in cpp)
    results["cpp check + launch"] = statistics.median(r[0] for r in cpp)
    results["python direct"] = per_call(lambda: tilepipe.attention(q, k, v))
    results["python op"] = per_call(lambda: torch.ops.tilepipe.attention(q, k, v, None, None, -1, scale, -1, -1, False))
    results["torch sdpa"] = per_call(lambda: torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), enable_gqa=True))
    base = results["cpp launch"]
    print(f"decode attention q {tuple(q.shape)}, k/v {tuple(k.shape)} bf16 on {torch.cuda.get_device_name()}")
    for name, t in results.items():
        print(f"  {name:20s} {t * 1e6:7.2f} us/call   ({(t - base) * 1e6:+6.2f} us over the C++ launch)")
    over = (results["python direct"] - base) * 1e6
    print(f"python call path over the C++ launch: {over:.2f} us ({'within' if over <= 5 else 'OVER'} the 5 us budget)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "us_per_call": {k: v * 1e6 for k, v in results.items()},
                       "python_over_cpp_us": over}, f, indent=1)


if __name__ == "__main__":
    main()
