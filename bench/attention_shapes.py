"""The attention benchmark's configurations (bench/attention_shapes.txt), shared by the peer
scripts and the table: one per line, `b sq sk hq hkv d causal bf16|f16`, `#` comments."""
import sys

DTYPES = ("bf16", "f16")


def read_shapes(path, only=0):
    cfgs = []
    for line in open(path):
        f = line.split("#")[0].split()
        if not f:
            continue
        if len(f) != 8 or f[7] not in DTYPES:
            sys.exit(f"{path}: bad line {line.strip()!r} (want: b sq sk hq hkv d causal bf16|f16)")
        b, sq, sk, hq, hkv, d, causal = map(int, f[:7])
        cfgs.append(dict(b=b, sq=sq, sk=sk, hq=hq, hkv=hkv, d=d, causal=causal, dtype=f[7]))
    return cfgs[:only] if only else cfgs


def flops(c):
    """4 b hq sq sk d, halved when causal (the FlashAttention convention)."""
    return 4 * c["b"] * c["hq"] * c["sq"] * c["sk"] * c["d"] / (2 if c["causal"] else 1)


def describe(c):
    s = f"s={c['sq']}" if c["sq"] == c["sk"] else f"sq={c['sq']} sk={c['sk']}"
    h = f"h={c['hq']}" if c["hq"] == c["hkv"] else f"hq={c['hq']} hkv={c['hkv']}"
    return f"b={c['b']} {s} {h} d={c['d']} causal={c['causal']} {c['dtype']}"


def first_line(e):
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
