"""attn.torch.attention's score variants (soft-capping, ALiBi, sinks) against the same formulas
written in PyTorch (float64, autograd for the gradients — the sinks' too), the operator's
registration with them (opcheck), torch.compile, and attn.sdpa / attn.sdpa_backward on numpy."""
import numpy as np
import pytest
import torch

import attn
import attn.torch as at
from attention_formulas import eager_attention


def inputs(heads=4, kv_heads=2, tq=37, tk=37, d=16, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, heads, tq, d, generator=g, dtype=dtype)
    k = torch.randn(2, kv_heads, tk, d, generator=g, dtype=dtype)
    v = torch.randn(2, kv_heads, tk, d, generator=g, dtype=dtype)
    return q, k, v


VARIANTS = {
    "softcap": dict(softcap=1.5),
    "alibi": dict(alibi_slopes=torch.tensor([0.5, 0.25, 0.125, 0.0625])),
    "sinks": dict(sinks=torch.tensor([0.3, -1.0, 2.0, 0.0])),
    "all three": dict(softcap=3.0, alibi_slopes=torch.tensor([0.5, 0.25, 0.125, 0.0625]),
                      sinks=torch.tensor([0.3, -1.0, 2.0, 0.0])),
}
SHAPES = {"causal": dict(is_causal=True), "plain Tq<Tk": dict(shape=dict(tq=9, tk=40)),
          "bool mask": dict(mask=True)}


def case(variant, shape, grad=False):
    s = SHAPES[shape]
    q, k, v = inputs(**s.get("shape", {}))
    kwargs = dict(VARIANTS[variant])
    if "sinks" in kwargs:
        kwargs["sinks"] = kwargs["sinks"].clone().requires_grad_(grad)
    if s.get("is_causal"):
        kwargs["is_causal"] = True
    if s.get("mask"):
        mask = torch.rand(q.shape[-2], k.shape[-2], generator=torch.Generator().manual_seed(3)) > 0.4
        mask[:, 0] = True
        kwargs["attn_mask"] = mask
    return [t.requires_grad_(grad) for t in (q, k, v)], kwargs


def in_float64(kwargs):
    return {key: value.detach().double().requires_grad_(value.requires_grad)
            if isinstance(value, torch.Tensor) and value.is_floating_point() else value
            for key, value in kwargs.items()}


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_forward_and_gradients_are_the_definitions(variant, shape):
    (q, k, v), kwargs = case(variant, shape, grad=True)
    out = at.attention(q, k, v, enable_gqa=True, **kwargs)
    ref_args = [t.detach().double().requires_grad_() for t in (q, k, v)]
    ref_kwargs = in_float64(kwargs)
    mask = ref_kwargs.pop("attn_mask", None)
    expected = eager_attention(*ref_args, mask=mask, **ref_kwargs)
    torch.testing.assert_close(out.double(), expected, atol=2e-5, rtol=2e-5)

    grad = torch.randn_like(out)
    wrt = [q, k, v] + ([kwargs["sinks"]] if "sinks" in kwargs else [])
    ref_wrt = ref_args + ([ref_kwargs["sinks"]] if "sinks" in kwargs else [])
    ours = torch.autograd.grad(out, wrt, grad)
    theirs = torch.autograd.grad(expected, ref_wrt, grad.double())
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a.double(), b, atol=5e-5, rtol=5e-5)


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_the_operator_passes_opcheck_with_the_variants(variant):
    (q, k, v), kwargs = case(variant, "causal", grad=True)
    torch.library.opcheck(torch.ops.attn.sdpa.default,
                          (q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), None, True,
                           None, None, float(kwargs.get("softcap", 0.0)),
                           kwargs.get("alibi_slopes"), kwargs.get("sinks")))


class SinkAttention(torch.nn.Module):
    """A gpt-oss-style layer: learned sinks, a soft cap."""

    def __init__(self):
        super().__init__()
        self.sinks = torch.nn.Parameter(torch.zeros(4))
        self.proj = torch.nn.Linear(16, 16)

    def forward(self, q, k, v):
        return self.proj(at.attention(q, k, v, is_causal=True, enable_gqa=True, softcap=5.0,
                                      sinks=self.sinks))


def test_torch_compile_traces_the_variants_without_a_graph_break():
    torch.manual_seed(0)
    model = SinkAttention()
    q, k, v = [t.requires_grad_() for t in inputs()]
    assert torch._dynamo.explain(model)(q, k, v).graph_break_count == 0
    eager = model(q, k, v)
    eager_grads = torch.autograd.grad(eager.sum(), (q, k, v, model.sinks))
    compiled = torch.compile(model, fullgraph=True)
    out = compiled(q, k, v)
    torch.testing.assert_close(out, eager, atol=2e-5, rtol=2e-5)
    for a, b in zip(torch.autograd.grad(out.sum(), (q, k, v, model.sinks)), eager_grads):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=2e-5)


def test_the_numpy_functions_take_the_variants():
    q, k, v = (t.numpy() for t in inputs(heads=2, kv_heads=2))
    sinks = [0.5, -0.5]
    out, lse = attn.sdpa(q, k, v, causal=True, softcap=2.0, alibi_slopes=[0.1, 0.2], sinks=sinks,
                         return_lse=True)
    ref, _ = attn.reference.sdpa(q, k, v, causal=True, softcap=2.0, alibi_slopes=[0.1, 0.2],
                                 sinks=sinks)
    np.testing.assert_allclose(out, ref, atol=2e-6)
    d_out = np.ones_like(out)
    dq, dk, dv, dsinks = attn.sdpa_backward(q, k, v, out, lse, d_out, causal=True, softcap=2.0,
                                            alibi_slopes=[0.1, 0.2], sinks=sinks)
    assert dq.shape == q.shape and dsinks.shape == (2,)
    assert len(attn.sdpa_backward(q, k, v, *attn.sdpa(q, k, v, return_lse=True), d_out)) == 3


@pytest.mark.parametrize("kwargs, match", [
    (dict(sinks=[1.0]), "1 sinks for 2 query heads"),
    (dict(alibi_slopes=[1.0, float("nan")]), "alibi_slopes must be finite"),
    (dict(softcap=-1.0), "softcap must be finite and >= 0"),
])
def test_bad_variants_are_value_errors(kwargs, match):
    q, k, v = (t.numpy() for t in inputs(heads=2, kv_heads=2))
    with pytest.raises(ValueError, match=match):
        attn.sdpa(q, k, v, **kwargs)
    with pytest.raises(ValueError, match=match):
        at.attention(*(torch.from_numpy(t) for t in (q, k, v)),
                     **{key: torch.tensor(val) if isinstance(val, list) else val
                        for key, val in kwargs.items()})
