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
left-padded 2048-token prompt's attention ran 4.4x slower through the dense mask). Packed
sequences — documents laid end to end in one row, their `position_ids` restarting at each, which
transformers turns into a block-diagonal causal mask for SDPA and eager — and sliding windows
(with or without packing) give masks in which each query row sees one run of keys ending at
itself: such a mask runs as `attn.torch.varlen_attention` over the batch's rows, causal within
each document, with the window, never computing or reading the blocks between documents or
outside the window (checked once per mask object too; 8 documents in a 4096-token row: 10x less
attention time than through the dense mask). transformers' `cu_seq_lens_q`/`cu_seq_lens_k`
keyword arguments are not read: the mask, built from `position_ids` as for SDPA, says the same.
Any other mask (a chunked prefill with Tq < Tk, a left-padded windowed batch, a custom one) is
handed to attn as it is, which broadcasts it over the heads; the first such call logs it once
(INFO, logger "attn.hf"). A row that sees no key — a padding position of a left-padded batch
— gives zeros, where "eager" gives the mean of the values: no real token's output depends on
it, but a loss that asks a padding position to predict the first real token does.

Inside `torch.autocast("cpu")` every layer runs as transformers' SDPA does there: query, key
and value (a Llama's come out of its rotary embedding in float32 and its value in bfloat16) and
a float mask cast to the autocast dtype, so the layers run attn's bf16 products.

output_attentions=True returns each layer's weights, as "eager" does (transformers' SDPA gives
none): attn's kernel forms them under the same mask, window, cap and sinks, apart from the
output, and a loss on them has eager's gradients (the softmax's backward, in PyTorch).
"""
import logging

import torch
from transformers import AttentionInterface
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.models.auto.modeling_auto import MODEL_MAPPING

from . import torch as attn_torch

try:  # what a model's forward is collecting (transformers 5's output recorder): a private name
    from transformers.utils.output_capturing import _active_collector
except ImportError:  # another transformers: the layers' output_attentions keyword alone
    _active_collector = None

__all__ = ["register", "attention_forward", "mask_for_attn"]

NAME = "attn"
_log = logging.getLogger(__name__)
_said_dense = False  # whether the dense-mask fallback was logged (once a process)


def _model_name(module: torch.nn.Module) -> str:
    config = getattr(module, "config", None)
    model_type = getattr(config, "model_type", None)
    return f"{type(module).__name__} ({model_type})" if model_type else type(module).__name__


def _refuse(module: torch.nn.Module, feature: str) -> None:
    raise ValueError(f"attn_implementation='attn': {_model_name(module)} asks for {feature}, "
                     "which attn does not compute yet; load the model with "
                     "attn_implementation='sdpa' or 'eager'")


def _readable(mask: torch.Tensor) -> bool:
    """A boolean (batch, 1, Tq, Tk) mask whose values may be read (not while tracing, where no
    test may depend on data: there the mask goes on as it is, and attn.torch's operator, when it
    runs, reads left padding as key starts and packed documents as a varlen call)."""
    return (mask.dtype is torch.bool and mask.dim() == 4 and mask.shape[1] == 1
            and not torch.compiler.is_compiling())


def _left_padding(mask: torch.Tensor):
    """For a boolean (batch, 1, Tq, Tk) mask that is causal (Tq = Tk) or full (Tq = 1) apart from
    each entry's leading padding keys: the first real key of each entry, an int64 tensor.
    Otherwise None."""
    if not _readable(mask) or mask.shape[2] not in (1, mask.shape[3]):
        return None
    return attn_torch._once_per_mask(mask, attn_torch._key_starts)


def _packed_sequences(mask: torch.Tensor):
    """For a boolean (batch, 1, T, T) mask in which every query row sees one run of keys that
    ends at itself and starts at its document's first token, or W − 1 keys back if that is
    later (documents packed end to end, each causal, with or without a sliding window of W):
    (the documents' offsets over the batch's batch·T rows as an int32 tensor, W or 0).
    Otherwise None."""
    if not _readable(mask) or mask.shape[2] != mask.shape[3] or mask.shape[2] < 2:
        return None
    return attn_torch._once_per_mask(mask, attn_torch._documents)


def _say_dense(module: torch.nn.Module, mask) -> None:
    """Logs once (INFO, logger "attn.hf") that a mask is handed on as it is, not as key_starts;
    not while torch.compile traces (every mask is handed on there, and a logging call breaks the
    graph, which fullgraph=True refuses)."""
    global _said_dense
    if not _said_dense and not torch.compiler.is_compiling():
        _said_dense = True
        _log.info("attn.hf: %s passed a %s mask of shape %s that is not causal apart from left "
                  "padding (a sliding window, a static cache, a chunked prefill or a custom "
                  "mask): attn.hf hands it on as it is; attn.torch runs a static cache's as key "
                  "starts and lengths and reads any other block by block", _model_name(module),
                  mask.dtype, tuple(mask.shape))


def _weights_wanted(kwargs) -> bool:
    """Whether the model asked for its attention weights: output_attentions among the layer's
    keywords (Llama, T5), or the model's forward collecting attentions, which is how transformers
    records them when a model keeps the keyword from its layers (GPT-2)."""
    if kwargs.get("output_attentions"):
        return True
    collecting = _active_collector.get() if _active_collector is not None else None
    return bool(collecting) and any(key.endswith("attentions") for key in collecting)


def _weights(query, key, value, attention_mask, is_causal, scaling, softcap, sinks, kv_length):
    """The attention weights (batch, heads, Tq, kv_length) that "eager" returns for
    output_attentions=True, from attn's kernel asked for them (the mask, the window, the cap and
    the sinks as the output had them), in query's dtype, with the softmax's gradient to query,
    key, the sinks and T5's bias (attn.torch._weights). A row that sees no key (a padding
    position) gets zeros, where eager spreads it evenly over the keys."""
    weights = attn_torch._weights(query, key, value, attention_mask, is_causal, scaling, softcap,
                                  sinks)
    if weights.shape[-1] < kv_length:  # keys past a static cache's prompt: never seen
        weights = torch.nn.functional.pad(weights, (0, kv_length - weights.shape[-1]))
    return weights


def attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                      value: torch.Tensor, attention_mask, dropout: float = 0.0,
                      scaling=None, is_causal=None, **kwargs):
    """One attention layer's call, in transformers' convention: query (batch, heads, Tq, d), key
    and value (batch, kv_heads, Tk, d), the boolean mask or None; returns the output as
    (batch, Tq, heads, d), and the weights when the model asks for them (output_attentions)."""
    softcap = kwargs.get("softcap") or 0.0  # Gemma 2's logit soft-capping
    sinks = kwargs.get("s_aux")  # gpt-oss's attention sinks, one logit per query head
    if sinks is None:
        sinks = kwargs.get("sinks")
    if dropout and module.training:
        _refuse(module, f"attention dropout in training (p={dropout})")
    # Under autocast, every route below in the autocast dtype, as SDPA's.
    query, key, value, attention_mask = attn_torch._autocast(query, key, value, attention_mask)
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
    weights = None
    if _weights_wanted(kwargs):
        mask = attention_mask if position_bias is None else _bias_mask(attention_mask,
                                                                        position_bias)
        weights = _weights(query, key, value, mask, is_causal, scaling, softcap, sinks, kv_length)
    if position_bias is not None:  # T5's learned relative bias: a float mask, with its gradient
        return _attend_with_bias(query, key, value, attention_mask, position_bias, is_causal,
                                 scaling), weights
    gqa = key.shape[1] != query.shape[1]
    key_starts = None if attention_mask is None else _left_padding(attention_mask)
    packed = None
    if attention_mask is not None and key_starts is None:
        packed = _packed_sequences(attention_mask)
        if packed is None:
            _say_dense(module, attention_mask)
    if packed is not None:  # documents packed end to end, or a sliding window: no mask to read
        return _attend_packed(query, key, value, packed, scaling, softcap, sinks), weights
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
    return out.transpose(1, 2).contiguous(), weights


def _attend_packed(query, key, value, packed, scaling, softcap, sinks):
    """Attention over packed documents (what _packed_sequences found) as one varlen call on the
    batch's rows laid end to end: (batch, heads, T, d) → (batch·T, heads, d) and back to
    transformers' (batch, T, heads, d)."""
    offsets, window = packed
    batch, heads, length = query.shape[:3]

    def rows(x):
        return x.transpose(1, 2).reshape(batch * length, x.shape[1], x.shape[3])

    out = attn_torch.varlen_attention(
        rows(query), rows(key), rows(value), offsets, offsets, length, length, scale=scaling,
        window_size=(window - 1 if window else -1, 0), enable_gqa=key.shape[1] != heads,
        softcap=softcap, sinks=sinks)
    return out.reshape(batch, length, heads, value.shape[3])


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


def _bias_mask(attention_mask, position_bias):
    """T5's position bias and the padding or causal mask as one float mask: the bias where the
    mask allows, -inf elsewhere."""
    if attention_mask is None:
        return position_bias
    if attention_mask.dtype == torch.bool:
        return torch.where(attention_mask, position_bias, float("-inf"))
    return position_bias + attention_mask


def _attend_with_bias(query, key, value, attention_mask, position_bias, is_causal, scaling):
    """Attention with T5's position bias (batch or 1, heads, Tq, Tk) added to the scores: the bias
    where the mask allows, -inf elsewhere, as one float mask (the same fold as transformers'
    SDPA integration), causal besides when no mask came. attn.torch's autograd gives the float
    mask its gradient, and torch.where hands it on to the bias where the mask allowed."""
    mask = _bias_mask(attention_mask, position_bias)
    attn_torch._check_devices(query, key, value, mask)
    out = attn_torch._attend(query, key, value, mask, is_causal, scaling)
    return out.transpose(1, 2).contiguous()


def register(name: str = NAME) -> None:
    """Makes `attn_implementation=name` ("attn" unless given) load models onto attn's kernels."""
    AttentionInterface.register(name, attention_forward)
    AttentionMaskInterface.register(name, mask_for_attn)
