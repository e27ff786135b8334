"""A real client: a Hugging Face transformers Llama-style model (random weights from a
config; nothing is downloaded) with tilepipe attention registered through
AttentionInterface, against the same model on the sdpa implementation: logits within
bfloat16 tolerance at prefill and at every decode step (KV cache, one query row)."""
import importlib.util

import pytest

from conftest import HAS_CUDA

pytestmark = pytest.mark.skipif(not HAS_CUDA or importlib.util.find_spec("transformers") is None,
                                reason="needs a CUDA GPU, PyTorch and transformers")


def tilepipe_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """transformers' attention interface: query [B, Hq, S, D], key / value [B, Hkv, S_k, D] ->
    ([B, S, Hq, D], no weights). Causal, aligned to the bottom right: prefill and decode alike
    (the test batch has no padding, so the mask adds nothing)."""
    import tilepipe
    assert dropout == 0.0
    q, k, v = (x.transpose(1, 2) for x in (query, key, value))
    return tilepipe.attention(q, k, v, causal=True, softmax_scale=scaling), None


def test_llama_logits_match_sdpa():
    import torch
    from transformers import AttentionInterface, LlamaConfig, LlamaForCausalLM

    AttentionInterface.register("tilepipe", tilepipe_attention)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=512, hidden_size=512, intermediate_size=1024, num_hidden_layers=2,
                         num_attention_heads=8, num_key_value_heads=2, head_dim=64, max_position_embeddings=256)
    model = LlamaForCausalLM(config).to("cuda", torch.bfloat16).eval()
    ids = torch.randint(0, config.vocab_size, (2, 77), device="cuda")
    following = torch.randint(0, config.vocab_size, (2, 4), device="cuda")

    def run(implementation):
        if hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation(implementation)
        else:
            model.config._attn_implementation = implementation
        with torch.no_grad():
            out = model(ids, use_cache=True)
            logits, cache = [out.logits.float()], out.past_key_values
            for t in range(following.shape[1]):  # decode: one new token per step, the KV cache growing
                out = model(following[:, t:t + 1], past_key_values=cache, use_cache=True)
                logits.append(out.logits.float())
                cache = out.past_key_values
        return logits

    want, got = run("sdpa"), run("tilepipe")
    for step, (g, w) in enumerate(zip(got, want)):
        err = (g - w).norm() / w.norm()
        assert err < 2e-2, f"{'prefill' if step == 0 else f'decode step {step}'}: relative error {err:.3g}"
