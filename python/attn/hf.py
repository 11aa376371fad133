"""attn's kernels inside Hugging Face transformers: `import attn.hf; attn.hf.register()`, then
`AutoModelForCausalLM.from_pretrained(path, attn_implementation="attn")`.

`register()` adds attn to transformers' AttentionInterface (the function every attention layer
calls) and to its AttentionMaskInterface (the masks are the boolean ones transformers builds
for PyTorch's SDPA), so every layer of a model loaded with `attn_implementation="attn"` runs
`attn.torch.scaled_dot_product_attention`: the prompt, each cached generation step, and the
backward in training. The layer passes what the model asks for, and this honours it: causal
and padding masks (a left-padded batch), grouped K/V heads, sliding windows (they are in the
mask), `scaling`. What attn does not compute yet raises a ValueError naming the feature and the
model rather than giving another model's answer: attention sinks, logit soft-capping, a
position bias, and attention dropout while training.

Masks: a purely causal call without padding passes no mask (is_causal, nothing built); any
other call hands attn the (batch, 1, Tq, Tk) boolean mask transformers made, which attn
broadcasts over the heads. A row that sees no key — a padding position of a left-padded batch
— gives zeros, where "eager" gives the mean of the values: no real token's output depends on
it, but a loss that asks a padding position to predict the first real token does.
"""
import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from . import torch as attn_torch

__all__ = ["register", "attention_forward"]

NAME = "attn"


def _model_name(module: torch.nn.Module) -> str:
    config = getattr(module, "config", None)
    model_type = getattr(config, "model_type", None)
    return f"{type(module).__name__} ({model_type})" if model_type else type(module).__name__


def _refuse(module: torch.nn.Module, feature: str) -> None:
    raise ValueError(f"attn_implementation='attn': {_model_name(module)} asks for {feature}, "
                     "which attn does not compute yet; load the model with "
                     "attn_implementation='sdpa' or 'eager'")


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                      value: torch.Tensor, attention_mask, dropout: float = 0.0,
                      scaling=None, is_causal=None, **kwargs):
    """One attention layer's call, in transformers' convention: query (batch, heads, Tq, d), key
    and value (batch, kv_heads, Tk, d), the boolean mask or None; returns the output as
    (batch, Tq, heads, d) and no weights."""
    if kwargs.get("softcap") is not None:
        _refuse(module, f"logit soft-capping (softcap={kwargs['softcap']})")
    if kwargs.get("s_aux") is not None or kwargs.get("sinks") is not None:
        _refuse(module, "attention sinks")
    if kwargs.get("position_bias") is not None:
        _refuse(module, "a position bias added to the scores")
    if dropout and module.training:
        _refuse(module, f"attention dropout in training (p={dropout})")
    q_length, kv_length = query.shape[2], key.shape[2]
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    # One query row sees every cached key: no mask is needed. A prompt without padding is causal.
    is_causal = bool(q_length > 1 and attention_mask is None and is_causal)
    if is_causal and kv_length > q_length:
        # A prefill into an empty static cache: the keys past the prompt are not written yet,
        # and is_causal aligns top-left, as PyTorch's does.
        key, value = key[:, :, :q_length], value[:, :, :q_length]
    gqa = key.shape[1] != query.shape[1]
    out = attn_torch.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                  is_causal=is_causal, scale=scaling,
                                                  enable_gqa=gqa)
    return out.transpose(1, 2).contiguous(), None


def register(name: str = NAME) -> None:
    """Makes `attn_implementation=name` ("attn" unless given) load models onto attn's kernels."""
    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, sdpa_mask)
