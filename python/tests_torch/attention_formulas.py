"""What the attn.torch suites compare against and how they watch the kernels: the attention
formulas written in PyTorch, and a spy on attn's module functions."""
import torch

import attn


def eager_attention(q, k, v, mask=None, is_causal=False, scale=None, softcap=0.0,
                    alibi_slopes=None, sinks=None, empty_rows_zero=False):
    """The definitions in PyTorch, as transformers' eager Gemma 2 and gpt-oss layers write them
    (sinks: one more logit in the softmax, dropped after it). Top-left positions; grouped K/V
    heads repeated. empty_rows_zero: a row that sees no key gives zeros (attn's answer) rather
    than NaN. Differentiable."""
    group = q.shape[-3] // k.shape[-3]
    k = k.repeat_interleave(group, dim=-3)
    v = v.repeat_interleave(group, dim=-3)
    scale = scale if scale is not None else q.shape[-1] ** -0.5
    s = q @ k.transpose(-1, -2) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    tq, tk = s.shape[-2], s.shape[-1]
    i = torch.arange(tq)[:, None]
    j = torch.arange(tk)[None, :]
    if alibi_slopes is not None:
        s = s - alibi_slopes.to(s.dtype)[:, None, None] * (i - j).abs().to(s.dtype)
    if is_causal:
        s = s.masked_fill(j > i, float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    if sinks is not None:
        sink = sinks.to(s.dtype).reshape(-1, 1, 1).expand(*s.shape[:-1], 1)
        p = torch.softmax(torch.cat([s, sink], dim=-1), dim=-1)[..., :-1]
    else:
        p = torch.softmax(s, dim=-1)
    if empty_rows_zero:
        p = p.nan_to_num(0.0)
    return p @ v


def masked_reference(q, k, v, mask):
    """softmax(q·kᵀ/√d) · v in float64 under a boolean mask, a row that sees no key all zeros
    (attn's answer; PyTorch's is NaN), differentiable."""
    return eager_attention(q.double(), k.double(), v.double(), mask, empty_rows_zero=True)


def record_kernel_calls(monkeypatch, entry, what, calls=None):
    """From here on, every call of attn's module function `entry` runs as before and appends
    what(args, kwargs) to `calls` (a new list when none is given, to share one between entries),
    which is returned. tests_hf uses it too."""
    calls = [] if calls is None else calls
    real = getattr(attn._attn, entry)

    def call(*args, **kwargs):
        calls.append(what(args, kwargs))
        return real(*args, **kwargs)
    monkeypatch.setattr(attn._attn, entry, call)
    return calls
