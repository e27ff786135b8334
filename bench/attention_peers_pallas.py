#!/usr/bin/env python3
"""JAX Pallas (Mosaic GPU) peer of bench_attention: jax.experimental.pallas.ops.gpu.attention_mgpu,
the FlashAttention-3-style kernel, as impl "pallas".

  XLA_PYTHON_CLIENT_PREALLOCATE=false python3 bench/attention_peers_pallas.py \
      --shapes bench/attention_shapes.txt --json OUT.json [--only N]

attention_mgpu.attention(q, k, v, TuningConfig(block_q, block_kv, max_concurrent_steps, causal=...))
takes [B, S, H, D] and runs f16 (its SMEM buffers are f16), so every row runs f16 ("dtype_run").
It needs d % 64 == 0, hq % hkv == 0 (GQA: K/V head = q head // group), sq % (2 * block_q) == 0,
sk % block_kv == 0; its causal mask is top-left aligned (kept to sq == sk here). Unsupported rows
get an "error" saying why. A few tunings are tried per shape; the fastest that passes the check
is reported ("tuning", with every tried one); --tuning-from an earlier run's JSON tries only
the tuning chosen there.
FLOPs = 4*b*hq*sq*sk*d, halved when causal (the FlashAttention convention).
Timing: one jitted function makes 10 calls on 10 distinct input sets (more than 200 MB in all, so L2
holds none); 3 warm-up runs; each of 15 samples dispatches it back to back until about 5 ms of work,
then block_until_ready, timed with time.perf_counter; median per call.
Check: batch 0, head 0, the last query rows (at most 64M scores) against a float32 reference.
"""
import os

os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"

import argparse, dataclasses, datetime, json, math, statistics, sys, time

import jax
import jax.numpy as jnp

from attention_shapes import describe, first_line, flops, read_shapes

try:
    from jax.experimental.pallas.ops.gpu import attention_mgpu as am
    IMPORT_ERROR = None
except Exception as e:  # recorded in every row
    am, IMPORT_ERROR = None, f"import attention_mgpu: {type(e).__name__}: {str(e).strip()[:300]}"

CALLS, WARM, SAMPLES, SAMPLE_S = 10, 3, 15, 5e-3
TUNINGS = [(64, 128, 2), (64, 64, 2), (64, 256, 2)]  # block_q, block_kv, max_concurrent_steps (upstream tests use 2)
SMEM_BYTES = 227 * 1024




def unsupported(c):
    if IMPORT_ERROR:
        return IMPORT_ERROR
    if c["d"] % 64:
        return f"d={c['d']}: attention_mgpu needs d % 64 == 0"
    if c["hq"] % c["hkv"]:
        return f"hq={c['hq']} not a multiple of hkv={c['hkv']}"
    if c["sq"] % 128:
        return f"sq={c['sq']}: attention_mgpu needs sq % (2 * block_q) == 0, block_q a multiple of 64"
    if c["causal"] and c["sq"] != c["sk"]:
        return "causal with sq != sk: attention_mgpu's mask is top-left aligned, FlashAttention's bottom-right"
    if c["causal"] and "causal" not in {f.name for f in dataclasses.fields(am.TuningConfig)}:
        return "this attention_mgpu has no causal TuningConfig field"
    return None


def reference(q, k, v, causal):
    """All [B, S, H, D]; float32 attention of batch 0, head 0 (K/V head 0), the last query rows."""
    sq, sk, d = q.shape[1], k.shape[1], q.shape[3]
    rows = min(sq, max(1, (64 << 20) // sk))
    q0, k0, v0 = (x.astype(jnp.float32) for x in (q[0, sq - rows:, 0], k[0, :, 0], v[0, :, 0]))
    # attention_mgpu applies no softmax scale (its own attention_reference has none either).
    s = jnp.matmul(q0, k0.T, precision=jax.lax.Precision.HIGHEST)
    if causal:  # top-left: query i sees keys j <= i
        s = jnp.where(jnp.arange(sk)[None, :] > jnp.arange(sq - rows, sq)[:, None], -jnp.inf, s)
    return jnp.matmul(jax.nn.softmax(s, axis=-1), v0, precision=jax.lax.Precision.HIGHEST)


def check(out, ref):
    """max abs error / max abs reference over the reference's rows (the last ones of head 0)."""
    got = out[0, out.shape[1] - ref.shape[0]:, 0].astype(jnp.float32)
    err = float(jnp.max(jnp.abs(got - ref))) / max(float(jnp.max(jnp.abs(ref))), 1e-6)
    return ("ok" if err <= 2e-2 else f"mismatch {err:.3g}"), err


def batched(cfg):
    """One jitted function making CALLS calls, one per input set (distinct operands: nothing to dedupe)."""
    return jax.jit(lambda sets: tuple(am.attention(q, k, v, cfg) for q, k, v in sets))


def time_calls(batch, sets):
    """ms per call: batch(sets) makes CALLS calls; samples of back-to-back dispatches, median."""
    for _ in range(WARM):
        jax.block_until_ready(batch(sets))
    t = time.perf_counter()
    jax.block_until_ready(batch(sets))
    reps = max(1, math.ceil(SAMPLE_S / max(time.perf_counter() - t, 1e-6)))
    samples = []
    for _ in range(SAMPLES):
        t = time.perf_counter()
        for _ in range(reps):
            out = batch(sets)
        jax.block_until_ready(out)
        samples.append((time.perf_counter() - t) / (reps * CALLS))
    return statistics.median(samples) * 1e3


def key(c):
    return tuple(c[k] for k in ("b", "sq", "sk", "hq", "hkv", "d", "causal", "dtype"))


def run_config(c, known):
    row = dict(impl="pallas", **c, dtype_run="f16")
    if why := unsupported(c):
        return row | {"error": why}
    d, causal = c["d"], bool(c["causal"])
    tunings = [known[key(c)]] if key(c) in known else TUNINGS
    tunings = [t for t in tunings if c["sq"] % (2 * t[0]) == 0 and c["sk"] % t[1] == 0]
    if not tunings:
        return row | {"error": f"sk={c['sk']} not a multiple of any block_kv in {sorted({t[1] for t in TUNINGS})}"}
    keys = iter(jax.random.split(jax.random.key(0), 3 * CALLS))
    mk = lambda s, h: jax.random.normal(next(keys), (c["b"], s, h, d), jnp.float16)
    sets = [(mk(c["sq"], c["hq"]), mk(c["sk"], c["hkv"]), mk(c["sk"], c["hkv"])) for _ in range(CALLS)]
    try:
        ref, no_ref = reference(*sets[0], causal), None
    except Exception as e:
        ref, no_ref = None, f"skipped: {first_line(e)}"
    tried, best = {}, None
    for bq, bkv, steps in tunings:
        name = f"block_q={bq} block_kv={bkv} max_concurrent_steps={steps}"
        if (2 * bq + 2 * steps * bkv) * d * 2 > SMEM_BYTES:  # Q/O of 2 warpgroups + K and V slots, f16
            tried[name] = "skipped: SMEM estimate over 227 KiB"
            continue
        try:
            cfg = am.TuningConfig(block_q=bq, block_kv=bkv, max_concurrent_steps=steps, **({"causal": True} if causal else {}))
            batch = batched(cfg)
            outs = jax.block_until_ready(batch(sets))
            chk, err = check(outs[0], ref) if no_ref is None else (no_ref, None)
            del outs
            ms = time_calls(batch, sets)
        except Exception as e:
            tried[name] = f"error: {first_line(e)}"
            continue
        tried[name] = round(ms, 5) if chk == "ok" else f"{ms:.5f} ms, check {chk}"
        cand = (chk != "ok", ms, dict(block_q=bq, block_kv=bkv, max_concurrent_steps=steps), chk, err)
        best = cand if best is None or cand[:2] < best[:2] else best
    del sets, ref
    if best is None:
        return row | {"error": "no tuning ran: " + "; ".join(f"{k}: {v}" for k, v in tried.items())[:600], "tuning": {"tried": tried}}
    _, ms, tuning, chk, err = best
    return row | {"median_ms": ms, "tflops": flops(c) / (ms * 1e-3) / 1e12, "check": chk, "check_err": err,
                  "tuning": tuning | {"tried": tried}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="bench/attention_shapes.txt")
    ap.add_argument("--json", required=True)
    ap.add_argument("--only", type=int, default=0, help="first N configurations only")
    ap.add_argument("--tuning-from", help="an earlier run's JSON: try only the tuning it chose per configuration")
    a = ap.parse_args()
    cfgs = read_shapes(a.shapes, a.only)
    known = {}
    if a.tuning_from:
        try:
            for r in json.load(open(a.tuning_from))["results"]:
                if "median_ms" in r:
                    t = r["tuning"]
                    known[key(r)] = (t["block_q"], t["block_kv"], t["max_concurrent_steps"])
        except Exception as e:
            print(f"# --tuning-from {a.tuning_from} not used: {first_line(e)}", flush=True)
    try:
        gpu = jax.devices()[0].device_kind
    except Exception as e:
        gpu = f"unknown ({first_line(e)})"
    doc = {"gpu": gpu, "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "jax": jax.__version__, "results": []}
    print(f"# {gpu}, jax {jax.__version__}" + (f"; {IMPORT_ERROR}" if IMPORT_ERROR else ""), flush=True)
    for c in cfgs:
        try:
            row = run_config(c, known)
        except Exception as e:  # last resort: never lose the other configurations
            row = dict(impl="pallas", **c, dtype_run="f16", error=first_line(e))
        doc["results"].append(row)
        if "median_ms" in row:
            t = row["tuning"]
            print(f"pallas {describe(c)} (ran f16): {row['median_ms']:.3f} ms {row['tflops']:7.1f} TFLOP/s  check {row['check']}"
                  f"  [block_q={t['block_q']} block_kv={t['block_kv']} steps={t['max_concurrent_steps']}]", flush=True)
        else:
            print(f"pallas {describe(c)}: error: {row['error']}", flush=True)
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
