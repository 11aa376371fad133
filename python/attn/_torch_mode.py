"""`attn.torch.replace_sdpa()`: PyTorch code that calls `F.scaled_dot_product_attention` runs
attn's kernels inside a `with` block, unchanged — a nanoGPT, a timm ViT, transformers' "sdpa"
models, `nn.MultiheadAttention` in training.

It is a torch.overrides.TorchFunctionMode, the hook PyTorch gives every call of its Python API:
it sees the call however the caller reached the function (`F.…`, `torch.nn.functional.…`, a name
imported before the block began), which replacing the module attribute would not, and
torch.compile traces through it, so a compiled model gets attn's operator in its graph.

A call attn takes — CPU tensors, dropout_p 0 — goes to `attn.torch.scaled_dot_product_attention`
(PyTorch's arguments and meaning; a row that sees no key gives zeros where PyTorch's CPU kernel
does too, NaN and ±inf inputs are a ValueError). Any other call — attention dropout in
training, another device, nested or subclassed tensors — goes to PyTorch's own function, and
the first such call says why, once (INFO, logger "attn.torch").
"""
import logging

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode, redispatch_function

_log = logging.getLogger("attn.torch")
_said_passed_on = False  # whether a call left to PyTorch was logged (once a process)

# F.scaled_dot_product_attention's parameters after query, key and value, in order.
_PARAMETERS = ("attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")


def _why_not_attn(args, kwargs):
    """None when attn takes this call of F.scaled_dot_product_attention, else the reason."""
    named = dict(zip(_PARAMETERS, args[3:]), **kwargs)
    if named.get("dropout_p", 0.0) != 0.0:
        return f"attention dropout (dropout_p={named['dropout_p']})"
    for name, t in zip(("query", "key", "value", "attn_mask"),
                       (*args[:3], named.get("attn_mask"))):
        if t is None:
            continue
        if type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter):
            return f"{name} is a {type(t).__name__}"
        if t.is_nested:
            return f"{name} is a nested tensor"
        if not t.is_cpu:
            return f"{name} is on {t.device}"
    return None


def _say_passed_on(reason: str) -> None:
    global _said_passed_on
    if not _said_passed_on and not torch.compiler.is_compiling():
        _said_passed_on = True
        _log.info("attn.torch.replace_sdpa: a call with %s went to PyTorch's own "
                  "scaled_dot_product_attention (attn computes it not)", reason)


class replace_sdpa(TorchFunctionMode):  # noqa: N801 (used as a function: `with replace_sdpa():`)
    """Inside `with attn.torch.replace_sdpa():` every call of `F.scaled_dot_product_attention`
    on CPU tensors runs attn's fused kernels (forward, and backward through autograd), those
    made inside `F.multi_head_attention_forward` (nn.MultiheadAttention without weights) too;
    anything attn does not compute goes to PyTorch's (see the module's docstring). Like every
    torch function mode it holds for the thread that entered it. Other torch calls pass
    straight through, at the cost of a Python call each while the block is open."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.scaled_dot_product_attention:
            reason = _why_not_attn(args, kwargs)
            if reason is None:
                from .torch import scaled_dot_product_attention
                return scaled_dot_product_attention(*args, **kwargs)
            _say_passed_on(reason)
            return func(*args, **kwargs)
        if func is F.multi_head_attention_forward:  # it calls F.scaled_dot_product_attention
            with self:
                return redispatch_function(func, types, args, kwargs)
        return func(*args, **kwargs)
