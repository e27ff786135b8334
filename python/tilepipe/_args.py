"""Argument normalisation shared by the frontends (PyTorch, NumPy, CuPy, JAX): the
conventions of FlashAttention and PyTorch turned into what the extension takes."""
import math

# Query rows per sequence up to which attention runs its decode kernel (kernels/attention_decode.cuh),
# which may split the keys over CTAs and then needs a workspace.
DECODE_MAX_SEQLEN_Q = 16


def split_slots(default_slots, q_shape, heads_kv, num_splits):
    """Slots of the split-KV workspace: the kernel's own choices fit default_slots; an explicit
    num_splits needs one per (batch, KV head, 64-row tile of packed query heads) and split."""
    if num_splits <= 1 or len(q_shape) != 4:
        return default_slots
    batch, sq, hq = q_shape[0], q_shape[1], q_shape[2]
    tiles = batch * heads_kv * -(-sq * (hq // max(heads_kv, 1)) // 64)
    return max(default_slots, tiles * num_splits)

# tilepipe._C's activation codes (python/src/ops.hpp), by PyTorch's names.
ACTIVATIONS = {None: 0, "none": 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4}


def activation_code(activation):
    try:
        return ACTIVATIONS[activation]
    except (KeyError, TypeError):
        names = ", ".join(repr(k) for k in ACTIVATIONS if k is not None)
        raise ValueError(f"tilepipe.matmul: activation={activation!r} is not one of None, {names}") from None


def window(causal, window_size):
    """(left, right) key window of FlashAttention: -1 (or None, FlashAttention 4's spelling)
    is unbounded; causal is right = 0 (a window's left edge still applies)."""
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise ValueError(f"tilepipe.attention: window_size must be a pair (left, right), got {window_size!r}") from None
    left = -1 if left is None else int(left)
    right = -1 if right is None else int(right)
    if left < -1 or right < -1:
        raise ValueError(f"tilepipe.attention: window_size must hold -1 (unbounded) or sizes >= 0, got {window_size!r}")
    if causal:
        right = 0 if right < 0 else min(right, 0)
    return left, right


def softmax_scale(head_dim, scale):
    """FlashAttention's default 1 / sqrt(head_dim); the extension rejects 0 and non-finite values."""
    return 1.0 / math.sqrt(head_dim) if scale is None else float(scale)


def lse_shape(q_shape, varlen):
    """FlashAttention's log-sum-exp layouts: [batch, heads, seqlen_q], or [heads, total_q] for varlen."""
    return (q_shape[1], q_shape[0]) if varlen else (q_shape[0], q_shape[2], q_shape[1])


def grouped_mm_case(a_dim, b_dim, offs, masked_m, op="tilepipe.grouped_mm"):
    """Which grouped matmul torch._grouped_mm's (and torch._scaled_grouped_mm's) shapes ask for:
    'ragged' (2-D a, 3-D b, offs: the MoE layer), 'batched' (3-D a and b) or 'masked' (3-D a
    and b with masked_m). op: the caller's name, for messages."""
    if a_dim == 2 and b_dim == 3:
        if offs is None:
            raise ValueError(f"{op}: a 2-D a with a 3-D b needs offs (the groups' cumulative row ends)")
        if masked_m is not None:
            raise ValueError(f"{op}: masked_m goes with a 3-D a ([groups, rows, K]), not a 2-D one")
        return "ragged"
    if a_dim == 3 and b_dim == 3:
        if offs is not None:
            raise ValueError(f"{op}: offs goes with a 2-D a; a 3-D a is one row block per group "
                             "(use masked_m for the valid rows of each)")
        return "batched" if masked_m is None else "masked"
    raise NotImplementedError(
        f"{op}: a {a_dim}-D a with a {b_dim}-D b is not supported; tilepipe has a 2-D a with a 3-D b "
        "and offs (the MoE layer) and a 3-D a with a 3-D b (batched, or with masked_m); "
        f"torch._{op.split('.')[-1]}'s 2-D x 2-D (K-grouped) and 3-D x 2-D cases are not built")


def check_out_dtype(op, out_dtype, dtype):
    if out_dtype is not None and out_dtype != dtype:
        raise NotImplementedError(f"{op}: out_dtype={out_dtype} differs from the inputs' {dtype}; tilepipe writes the "
                                  "inputs' dtype (f32 accumulation inside)")


# tilepipe._C's fp8 format codes (python/src/ops.hpp), by the frameworks' dtype names.
FP8_FORMATS = {"float8_e4m3fn": 0, "float8_e5m2": 1}


def fp8_format(name, dtype, op="tilepipe.scaled_mm"):
    """The format code of a scaled_mm / scaled_grouped_mm operand; anything but float8_e4m3fn /
    float8_e5m2 raises."""
    text = str(dtype)
    code = FP8_FORMATS.get(text[6:] if text.startswith("torch.") else text)
    if code is None:
        raise TypeError(f"{op}: {name} must be fp8 (float8_e4m3fn or float8_e5m2), got {text}")
    return code


def scaled_mm_out_dtype(out_dtype, scale_result=None):
    """'bfloat16' or 'float32' from out_dtype as a string, a torch dtype or a NumPy / ml_dtypes dtype."""
    if scale_result is not None:
        raise NotImplementedError("tilepipe.scaled_mm: scale_result (torch._scaled_mm's scale of an fp8 output) is not "
                                  "supported; tilepipe writes bfloat16 or float32")
    if out_dtype is None:
        raise NotImplementedError("tilepipe.scaled_mm: out_dtype=None (torch._scaled_mm's default, an fp8 output of "
                                  "a's dtype) is not supported; pass bfloat16 (the default) or float32")
    text = _dtype_name(out_dtype)
    if text not in ("bfloat16", "float32"):
        raise NotImplementedError(f"tilepipe.scaled_mm: out_dtype must be bfloat16 or float32, got {out_dtype!r}")
    return text


def _dtype_name(dtype):
    """A dtype's name from a string, a torch dtype or a NumPy / ml_dtypes dtype (else its str)."""
    text = dtype if isinstance(dtype, str) else str(dtype)
    if text.startswith("torch."):
        return text[6:]
    if not isinstance(dtype, str):
        try:
            import numpy as np
            return np.dtype(dtype).name
        except TypeError:
            pass
    return text


def scaled_grouped_mm_out_dtype(out_dtype):
    """'bfloat16' from out_dtype as a string, a torch dtype or a NumPy / ml_dtypes dtype; None is
    bfloat16 (torch._scaled_grouped_mm's default); anything else raises."""
    if out_dtype is None:
        return "bfloat16"
    text = _dtype_name(out_dtype)
    if text != "bfloat16":
        raise NotImplementedError(f"tilepipe.scaled_grouped_mm: out_dtype must be bfloat16 (torch._scaled_grouped_mm's "
                                  f"only output), got {out_dtype!r}")
    return text
