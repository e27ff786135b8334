"""FlashAttention 3's Python interface (hopper/flash_attn_interface.py) on tilepipe:

    from tilepipe.flash_attn_interface import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache

Same signatures, argument order and results (out, or (out, softmax_lse) with
return_attn_probs, which in FlashAttention 3 returns the log-sum-exp, not probabilities).
Arguments tilepipe does not support raise NotImplementedError naming them when they are not
at their defaults: qv, q_descale / k_descale / v_descale (fp8), attention_chunk, softcap,
seqused_q / seqused_k. Scheduling hints that do not change the result are accepted and
ignored: num_splits, pack_gqa, deterministic (tilepipe's forward is deterministic), sm_margin.
flash_attn_with_kvcache reads a cache (cache_seqlens, page_table, num_splits honoured); appending
k / v, rotary embeddings, cache_batch_idx, cache_leftpad and cu_seqlens_q raise NotImplementedError.
The backward runs through PyTorch autograd (tilepipe.attention_backward; head dims 64, 128 and 256)
and is deterministic, as FlashAttention 3 with deterministic=True."""
from ._api import attention


def _unsupported(**given):
    names = [name for name, (value, default) in given.items()
             if (value is not None if default is None else value != default)]
    if names:
        raise NotImplementedError(f"tilepipe's flash_attn interface does not support {', '.join(names)} (tilepipe has "
                                  "causal and local masks, GQA / MQA, varlen and the LSE; no fp8, softcap, qv, "
                                  "attention chunks or seqused)")


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, qv=None, q_descale=None, k_descale=None,
                    v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0, num_splits=1,
                    pack_gqa=None, deterministic=False, sm_margin=0, return_attn_probs=False):
    _unsupported(qv=(qv, None), q_descale=(q_descale, None), k_descale=(k_descale, None),
                 v_descale=(v_descale, None), attention_chunk=(attention_chunk, 0), softcap=(softcap, 0.0))
    return attention(q, k, v, causal=causal, softmax_scale=softmax_scale, window_size=window_size,
                     return_lse=return_attn_probs)


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, seqused_q=None,
                           seqused_k=None, softmax_scale=None, causal=False, qv=None, q_descale=None,
                           k_descale=None, v_descale=None, window_size=(-1, -1), attention_chunk=0, softcap=0.0,
                           num_splits=1, pack_gqa=None, deterministic=False, sm_margin=0, return_attn_probs=False):
    _unsupported(seqused_q=(seqused_q, None), seqused_k=(seqused_k, None), qv=(qv, None),
                 q_descale=(q_descale, None), k_descale=(k_descale, None), v_descale=(v_descale, None),
                 attention_chunk=(attention_chunk, 0), softcap=(softcap, 0.0))
    return attention(q, k, v, causal=causal, softmax_scale=softmax_scale, window_size=window_size,
                     cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                     max_seqlen_k=max_seqlen_k, return_lse=return_attn_probs)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, qv=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, page_table=None,
                            cu_seqlens_q=None, cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            q_descale=None, k_descale=None, v_descale=None, softmax_scale=None, causal=False,
                            window_size=(-1, -1), attention_chunk=0, softcap=0.0, rotary_interleaved=True,
                            scheduler_metadata=None, num_splits=0, pack_gqa=None, sm_margin=0,
                            return_softmax_lse=False):
    _unsupported(k=(k, None), v=(v, None), qv=(qv, None), rotary_cos=(rotary_cos, None),
                 rotary_sin=(rotary_sin, None), cache_batch_idx=(cache_batch_idx, None),
                 cache_leftpad=(cache_leftpad, None), cu_seqlens_q=(cu_seqlens_q, None),
                 cu_seqlens_k_new=(cu_seqlens_k_new, None), q_descale=(q_descale, None),
                 k_descale=(k_descale, None), v_descale=(v_descale, None), attention_chunk=(attention_chunk, 0),
                 softcap=(softcap, 0.0))
    if cache_seqlens is None:  # FlashAttention's default: every sequence uses the whole cache
        if page_table is not None:
            raise ValueError("flash_attn_with_kvcache: a page_table needs cache_seqlens")
    elif isinstance(cache_seqlens, int):
        import torch
        cache_seqlens = torch.full((q.shape[0],), cache_seqlens, dtype=torch.int32, device=q.device)
    return attention(q, k_cache, v_cache, causal=causal, softmax_scale=softmax_scale, window_size=window_size,
                     seqused_k=cache_seqlens, page_table=page_table, num_splits=num_splits or 0,
                     return_lse=return_softmax_lse)
