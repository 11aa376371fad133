"""attn: causal multi-head attention in C++20, from numpy.

The fused kernels of the C++ library (`attn::sdpa`, the attention layer, the tokenizer, the
GPT) over numpy arrays: float32 inputs whose last dim is contiguous are used in place, other
floats are converted once; outputs are numpy arrays over the memory the kernel wrote. The GIL
is released while a kernel runs. Errors are `attn.Error`, a subclass of ValueError.
"""
import codecs

from . import _arguments
from ._attn import (  # noqa: F401  (the public API)
    BpeTokenizer,
    Error,
    _conversions,
    Gpt,
    Gpt2Tokenizer,
    KVCache,
    MultiHeadAttention,
    PositionalEncoding,
    TokenEmbedding,
    __version__,
    add_positional,
    bf16_attention_engine,
    causal_mask,
    get_num_threads,
    explorer_html,
    heatmap,
    heatmap_png,
    heatmap_svg,
    limit_simd,
    merge_heads,
    multi_head_attention,
    reference,
    scaled_dot_product_attention,
    sdpa,
    sdpa_backward,
    sdpa_varlen,
    sdpa_varlen_backward,
    set_num_threads,
    simd_target,
    split_heads,
    train,
    train_bpe,
)


def _generate(self, prompt="", max_new_tokens=200, temperature=0.8, top_k=200, top_p=1.0,
              seed=0, use_cache=True, cache_dtype="f32"):
    """generate(prompt="", max_new_tokens=200, temperature=0.8, top_k=200, top_p=1.0, seed=0,
    use_cache=True, cache_dtype="f32")

    Yields the continuation of prompt as text, piece by piece (a piece may hold no character
    while a UTF-8 sequence is still incomplete, so pieces are joined as they come). The same
    seed gives the same text as `attn generate` with the same flags. cache_dtype is the KV
    cache's storage: "f32", "bf16" or "q8" (int8 rows with a bfloat16 scale each).
    """
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    for piece in self._generate_bytes(prompt, max_new_tokens, temperature, top_k, top_p, seed,
                                      use_cache, cache_dtype):
        text = decoder.decode(piece)
        if text:
            yield text
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail


Gpt.generate = _generate


# Calls whose arguments do not fit say so in a few lines (attn/_arguments.py).
_arguments.wrap_module(reference, ["sdpa"])
_arguments.wrap_module(__import__(__name__), [
    "add_positional", "causal_mask", "explorer_html", "heatmap", "heatmap_png", "heatmap_svg",
    "limit_simd", "merge_heads", "multi_head_attention", "scaled_dot_product_attention", "sdpa",
    "sdpa_backward", "sdpa_varlen", "sdpa_varlen_backward", "set_num_threads", "split_heads",
    "train", "train_bpe"])
for _cls in (BpeTokenizer, Gpt, Gpt2Tokenizer, KVCache, MultiHeadAttention, PositionalEncoding,
             TokenEmbedding):
    _arguments.wrap_class(_cls)
