"""attn's kernels inside Hugging Face transformers: `import attn.hf; attn.hf.register()`, then
`AutoModelForCausalLM.from_pretrained(path, attn_implementation="attn")`.

`register()` adds attn to transformers' AttentionInterface (the function every attention layer
calls) and to its AttentionMaskInterface (the masks are the boolean ones transformers builds
for PyTorch's SDPA), so every layer of a model loaded with `attn_implementation="attn"` runs
`attn.torch.scaled_dot_product_attention`: the prompt, each cached generation step, and the
backward in training. The layer passes what the model asks for, and this honours it: causal
and padding masks (a left-padded batch), grouped K/V heads, sliding windows (they are in the
mask), `scaling`. What attn does not compute yet raises a ValueError naming the feature and the
model rather than giving another model's answer: attention dropout while training; and, at its
first forward, a model whose layers compute attention in their own code (BLOOM, MPT, XGLM),
which transformers would load, never call attn for, and hand a mask of the wrong kind. T5's
learned position bias is folded into one float mask, as transformers' SDPA integration does,
and gets its gradient through attn's backward.

Masks: a purely causal call without padding passes no mask (is_causal, nothing built). A
left-padded batch — the prompt (Tq = Tk) or a cached step of one row — arrives as the
(batch, 1, Tq, Tk) boolean mask transformers made; when that mask is exactly causal (or, for one
row, full) apart from each entry's leading padding, attn runs it as causal with a first real key
per entry (SdpaOptions::key_starts), skipping the padding and the keys past the diagonal block
by block, and never reads the mask again (checked once per mask object, not per layer: a
left-padded 2048-token prompt's attention ran 4.4x slower through the dense mask). Any other mask
(a sliding window, a chunked prefill with Tq < Tk, a custom one) is handed to attn as it is,
which broadcasts it over the heads; the first such call logs it once (INFO, logger
"attn.hf"). A row that sees no key — a padding position of a left-padded batch
— gives zeros, where "eager" gives the mean of the values: no real token's output depends on
it, but a loss that asks a padding position to predict the first real token does.
"""
import logging
import weakref

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.models.auto.modeling_auto import MODEL_MAPPING

from . import torch as attn_torch

__all__ = ["register", "attention_forward", "mask_for_attn"]

NAME = "attn"
_log = logging.getLogger(__name__)
_said_dense = False  # whether the dense-mask fallback was logged (once a process)
_said_no_weights = False  # whether output_attentions' missing weights were logged (once)


def _model_name(module: torch.nn.Module) -> str:
    config = getattr(module, "config", None)
    model_type = getattr(config, "model_type", None)
    return f"{type(module).__name__} ({model_type})" if model_type else type(module).__name__


def _refuse(module: torch.nn.Module, feature: str) -> None:
    raise ValueError(f"attn_implementation='attn': {_model_name(module)} asks for {feature}, "
                     "which attn does not compute yet; load the model with "
                     "attn_implementation='sdpa' or 'eager'")


# Per live mask tensor (by id, with a weak reference that removes the entry when the mask goes),
# what _left_padding found: (the reference, the mask's _version then, key_starts or None). Every
# layer of a forward gets the same mask object, so only the first pays for the check. (A
# WeakKeyDictionary compares keys with ==, which a tensor answers elementwise.)
_padding_of_mask: dict = {}


def _left_padding(mask: torch.Tensor):
    """For a boolean (batch, 1, Tq, Tk) mask that is causal (Tq = Tk) or full (Tq = 1) apart from
    each entry's leading padding keys: the first real key of each entry, an int64 tensor.
    Otherwise None."""
    if (mask.dtype is not torch.bool or mask.dim() != 4 or mask.shape[1] != 1
            or torch.compiler.is_compiling()):  # traced: the dense mask, no data-dependent test
        return None
    q_length, kv_length = mask.shape[2], mask.shape[3]
    if q_length not in (1, kv_length):
        return None
    cached = _padding_of_mask.get(id(mask))
    if cached is not None and cached[0]() is mask and cached[1] == mask._version:
        return cached[2]
    last_row = mask[:, 0, -1, :]  # the last query sees every real key
    real = last_row.any(dim=1)
    starts = torch.where(real, last_row.int().argmax(dim=1),
                         torch.full_like(real, kv_length, dtype=torch.long))
    keys = torch.arange(kv_length)
    expected = keys[None, :] >= starts[:, None]  # (batch, Tk)
    expected = expected[:, None, None, :]
    if q_length > 1:
        expected = expected & torch.ones(q_length, kv_length, dtype=torch.bool).tril()
    found = starts if torch.equal(mask, expected.expand_as(mask)) else None
    key = id(mask)
    _padding_of_mask[key] = (weakref.ref(mask, lambda _: _padding_of_mask.pop(key, None)),
                             mask._version, found)
    return found


def _say_dense(module: torch.nn.Module, mask) -> None:
    """Logs once (INFO, logger "attn.hf") that a mask is read as it is, not as key_starts."""
    global _said_dense
    if not _said_dense:
        _said_dense = True
        _log.info("attn.hf: %s passed a %s mask of shape %s that is not causal apart from left "
                  "padding (a sliding window, a chunked prefill or a custom mask): attn reads it "
                  "as it is, block by block", _model_name(module), mask.dtype, tuple(mask.shape))


def _say_no_weights(module: torch.nn.Module) -> None:
    """Logs once (WARNING, logger "attn.hf") that output_attentions gets no weights, as
    transformers' own SDPA does: the fused kernels never form them."""
    global _said_no_weights
    if not _said_no_weights:
        _said_no_weights = True
        _log.warning("attn.hf: %s was asked for its attention weights (output_attentions=True); "
                     "attn's fused kernels never form them, so none are returned: load the model "
                     "with attn_implementation='eager' for them", _model_name(module))


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                      value: torch.Tensor, attention_mask, dropout: float = 0.0,
                      scaling=None, is_causal=None, **kwargs):
    """One attention layer's call, in transformers' convention: query (batch, heads, Tq, d), key
    and value (batch, kv_heads, Tk, d), the boolean mask or None; returns the output as
    (batch, Tq, heads, d) and no weights."""
    softcap = kwargs.get("softcap") or 0.0  # Gemma 2's logit soft-capping
    sinks = kwargs.get("s_aux")  # gpt-oss's attention sinks, one logit per query head
    if sinks is None:
        sinks = kwargs.get("sinks")
    if dropout and module.training:
        _refuse(module, f"attention dropout in training (p={dropout})")
    if kwargs.get("output_attentions"):
        _say_no_weights(module)
    q_length, kv_length = query.shape[2], key.shape[2]
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    # One query row sees every cached key: no mask is needed. A prompt without padding is causal.
    is_causal = bool(q_length > 1 and attention_mask is None and is_causal)
    position_bias = kwargs.get("position_bias")
    if is_causal and kv_length > q_length:
        # A prefill into an empty static cache: the keys past the prompt are not written yet,
        # and is_causal aligns top-left, as PyTorch's does.
        key, value = key[:, :, :q_length], value[:, :, :q_length]
        if position_bias is not None:
            position_bias = position_bias[..., :q_length]
    if position_bias is not None:  # T5's learned relative bias: a float mask, with its gradient
        return _attend_with_bias(query, key, value, attention_mask, position_bias, is_causal,
                                 scaling), None
    gqa = key.shape[1] != query.shape[1]
    key_starts = None if attention_mask is None else _left_padding(attention_mask)
    if attention_mask is not None and key_starts is None:
        _say_dense(module, attention_mask)
    if key_starts is not None:  # causal (or one row) apart from the padding: no mask to read
        attn_torch._check_devices(query, key, value, None)
        out = attn_torch._attend(query, key, value, None, q_length > 1, scaling, key_starts,
                                 softcap, None, sinks)
    elif not softcap and sinks is None:
        out = attn_torch.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                      is_causal=is_causal, scale=scaling,
                                                      enable_gqa=gqa)
    else:
        out = attn_torch.attention(query, key, value, attn_mask=attention_mask,
                                   is_causal=is_causal, scale=scaling, enable_gqa=gqa,
                                   softcap=softcap, sinks=sinks)
    return out.transpose(1, 2).contiguous(), None


# Per config class, whether its model's attention layers call transformers' AttentionInterface.
_calls_the_interface: dict = {}


def _check_uses_the_interface(config) -> None:
    """A ValueError for a model whose attention layers compute attention in their own code (BLOOM,
    MPT, XGLM: transformers' own test, `_can_set_attn_implementation`, finds no call of
    the interface in the model's source). transformers loads such a model with any registered
    implementation, never calls attn, and hands those layers attn's boolean mask, which their
    code adds to the scores as 0 and 1: a left-padded batch came out 1.5 % off eager's logits
    (BLOOM). A model transformers does not map, or a transformers without the test, passes."""
    verdict = _calls_the_interface.get(type(config))
    if verdict is None:
        try:
            model_class = MODEL_MAPPING[type(config)]
        except (KeyError, ValueError):
            model_class = None
        test = getattr(model_class, "_can_set_attn_implementation", None)
        verdict = _calls_the_interface[type(config)] = bool(test()) if test else True
    if not verdict:
        name = getattr(config, "model_type", type(config).__name__)
        raise ValueError(f"attn_implementation='attn': {name} computes attention in its own code, "
                         "not through transformers' AttentionInterface, so attn would never run "
                         "(and its layers would get a mask made for attn); load the model with "
                         "attn_implementation='eager'")


def mask_for_attn(*args, config=None, **kwargs):
    """The mask for layers on attn: PyTorch SDPA's boolean one (transformers' sdpa_mask), after
    checking that the model's layers call attn at all."""
    if config is not None:
        _check_uses_the_interface(config)
    return sdpa_mask(*args, config=config, **kwargs)


def _attend_with_bias(query, key, value, attention_mask, position_bias, is_causal, scaling):
    """Attention with T5's position bias (batch or 1, heads, Tq, Tk) added to the scores: the bias
    where the mask allows, -inf elsewhere, as one float mask (the same fold as transformers'
    SDPA integration), causal besides when no mask came. attn.torch's autograd gives the float
    mask its gradient, and torch.where hands it on to the bias where the mask allowed."""
    if attention_mask is None:
        mask = position_bias
    elif attention_mask.dtype == torch.bool:
        mask = torch.where(attention_mask, position_bias, float("-inf"))
    else:
        mask = position_bias + attention_mask
    attn_torch._check_devices(query, key, value, mask)
    out = attn_torch._attend(query, key, value, mask, is_causal, scaling)
    return out.transpose(1, 2).contiguous()


def register(name: str = NAME) -> None:
    """Makes `attn_implementation=name` ("attn" unless given) load models onto attn's kernels."""
    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, mask_for_attn)
