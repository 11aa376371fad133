"""attn.torch.varlen_attention (PyTorch's varlen_attn signature) against PyTorch 2.13's own
scaled_dot_product_attention run on each sequence alone: outputs, logsumexp and gradients,
causal, sliding-window and full, GQA, the variants; opcheck; torch.compile."""
import pytest
import torch
import torch.nn.functional as F

import attn.torch as at
from torch.nn.attention.varlen import AuxRequest

LENGTHS = [37, 5, 120, 1, 64]
TOL = dict(atol=2e-5, rtol=2e-5)


def packed(heads=4, kv_heads=2, d=16, lengths=LENGTHS, seed=0):
    g = torch.Generator().manual_seed(seed)
    total = sum(lengths)
    q = torch.randn(total, heads, d, generator=g).requires_grad_()
    k = torch.randn(total, kv_heads, d, generator=g).requires_grad_()
    v = torch.randn(total, kv_heads, d, generator=g).requires_grad_()
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32)
    return q, k, v, cu


def per_sequence(q, k, v, cu, window_size):
    """Each sequence through PyTorch's own SDPA, (H, L, D) at a time, then packed again."""
    outs = []
    for s in range(len(cu) - 1):
        a, b = int(cu[s]), int(cu[s + 1])
        qs, ks, vs = (t[a:b].transpose(0, 1) for t in (q, k, v))
        mask = None
        left, right = window_size
        if right == 0:
            i = torch.arange(b - a)[:, None]
            j = torch.arange(b - a)[None, :]
            mask = j <= i
            if left >= 0:
                mask &= j >= i - left
        outs.append(F.scaled_dot_product_attention(qs[None], ks[None], vs[None], attn_mask=mask,
                                                   enable_gqa=True)[0].transpose(0, 1))
    return torch.cat(outs)


@pytest.mark.parametrize("window_size", [(-1, -1), (-1, 0), (7, 0)])
def test_each_sequence_is_pytorchs_sdpa_alone(window_size):
    q, k, v, cu = packed()
    out, lse = at.varlen_attention(q, k, v, cu, cu, max(LENGTHS), max(LENGTHS),
                                   window_size=window_size, enable_gqa=True,
                                   return_aux=AuxRequest(lse=True))
    expected = per_sequence(q, k, v, cu, window_size)
    torch.testing.assert_close(out, expected, **TOL)
    assert lse.shape == (sum(LENGTHS), 4)
    grad = torch.randn_like(out)
    ours = torch.autograd.grad(out, (q, k, v), grad)
    theirs = torch.autograd.grad(expected, (q, k, v), grad)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b, **TOL)


def test_sinks_get_their_gradient_through_varlen():
    q, k, v, cu = packed()
    sinks = torch.tensor([0.5, -1.0, 0.0, 1.5], requires_grad=True)
    out = at.varlen_attention(q, k, v, cu, cu, 120, 120, window_size=(-1, 0), enable_gqa=True,
                              sinks=sinks)
    grads = torch.autograd.grad(out.sum(), (q, sinks))
    # The same sequences one by one through attn.torch.attention (checked against the formula).
    expected, start = [], 0
    for length in LENGTHS:
        rows = slice(start, start + length)
        expected.append(at.attention(q[rows].transpose(0, 1)[None], k[rows].transpose(0, 1)[None],
                                     v[rows].transpose(0, 1)[None], is_causal=True,
                                     enable_gqa=True, sinks=sinks)[0].transpose(0, 1))
        start += length
    expected = torch.cat(expected)
    torch.testing.assert_close(out, expected, **TOL)
    for a, b in zip(grads, torch.autograd.grad(expected.sum(), (q, sinks))):
        torch.testing.assert_close(a, b, **TOL)


def test_the_operator_passes_opcheck_and_compiles():
    q, k, v, cu = packed(kv_heads=4)
    torch.library.opcheck(torch.ops.attn.varlen.default, (q, k, v, cu, cu, True, 0, None))

    def layer(q, k, v):
        return at.varlen_attention(q, k, v, cu, cu, 120, 120, window_size=(-1, 0)).sum()

    assert torch._dynamo.explain(layer)(q, k, v).graph_break_count == 0
    torch.testing.assert_close(torch.compile(layer, fullgraph=True)(q, k, v), layer(q, k, v))


@pytest.mark.parametrize("kwargs, match", [
    (dict(window_size=(3, 3)), "window_size"),
    (dict(enable_gqa=False), "enable_gqa=True"),
])
def test_bad_calls_are_value_errors(kwargs, match):
    q, k, v, cu = packed()
    with pytest.raises(ValueError, match=match):
        at.varlen_attention(q, k, v, cu, cu, 120, 120, **kwargs)
    with pytest.raises(ValueError, match="cu_seqlens_q must run from 0"):
        at.varlen_attention(q, k, v, cu[:-1], cu[:-1], 120, 120, enable_gqa=True)
