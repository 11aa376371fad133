"""`with attn.torch.replace_sdpa():` — unchanged PyTorch code that calls
F.scaled_dot_product_attention runs attn's kernels: the same results and gradients as PyTorch's
own function, attn's kernels counted as called, torch.compile tracing it, and what attn does not
compute left to PyTorch."""
import logging
import threading

import pytest
import torch
import torch.nn.functional as F

import attn._torch_mode as torch_mode
import attn.torch as at
from attention_formulas import record_kernel_calls

TOL = dict(atol=2e-5, rtol=2e-5)


def count_kernel_calls(monkeypatch):
    """From here on, every call into attn's module that computes attention (the quick path, the
    operator's forward) is counted; returns the list they are appended to."""
    calls = []
    for entry in ("_torch_plain_sdpa", "sdpa"):
        record_kernel_calls(monkeypatch, entry, lambda args, kwargs, entry=entry: entry, calls)
    return calls


class CausalSelfAttention(torch.nn.Module):
    """nanoGPT's attention block, as its users write it: F.scaled_dot_product_attention with
    is_causal=True and dropout only in training."""

    def __init__(self, width=64, heads=4, dropout=0.0):
        super().__init__()
        self.qkv, self.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
        self.heads, self.dropout = heads, dropout

    def forward(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        return self.proj(y.transpose(1, 2).reshape(batch, length, width))


def run(model, x):
    """The output and every parameter's and the input's gradient."""
    x = x.detach().requires_grad_()
    model.zero_grad()
    out = model(x)
    out.square().sum().backward()
    return out.detach(), [x.grad] + [p.grad.clone() for p in model.parameters()]


def test_a_models_own_sdpa_call_runs_on_attn_with_pytorchs_results(monkeypatch):
    torch.manual_seed(0)
    model = CausalSelfAttention()
    x = torch.randn(2, 37, 64)
    theirs = run(model, x)
    calls = count_kernel_calls(monkeypatch)
    with at.replace_sdpa():
        ours = run(model, x)
    assert calls  # attn computed it
    torch.testing.assert_close(ours[0], theirs[0], **TOL)
    for a, b in zip(ours[1], theirs[1]):
        torch.testing.assert_close(a, b, **TOL)
    calls.clear()
    run(model, x)  # outside the block: PyTorch's again
    assert not calls


@pytest.mark.parametrize("masks", ["none", "attn_mask", "key_padding_mask"])
def test_multihead_attention_without_weights_runs_on_attn(monkeypatch, masks):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(64, 4, batch_first=True)
    x = torch.randn(2, 11, 64)
    kwargs = dict(need_weights=False)
    if masks == "attn_mask":
        kwargs["attn_mask"] = torch.ones(11, 11, dtype=torch.bool).triu(1)  # True = blocked
    elif masks == "key_padding_mask":
        padding = torch.zeros(2, 11, dtype=torch.bool)
        padding[1, 8:] = True
        kwargs["key_padding_mask"] = padding
    theirs = mha(x, x, x, **kwargs)[0]
    calls = count_kernel_calls(monkeypatch)
    with at.replace_sdpa():
        ours = mha(x, x, x, **kwargs)[0]
    assert calls
    torch.testing.assert_close(ours, theirs, **TOL)


def test_a_compiled_model_gets_attns_operator_in_its_graph(monkeypatch):
    torch.manual_seed(0)
    model = CausalSelfAttention()
    x = torch.randn(2, 37, 64)
    theirs = run(model, x)
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    calls = count_kernel_calls(monkeypatch)
    with at.replace_sdpa():
        ours = run(compiled, x)
    assert calls
    torch.testing.assert_close(ours[0], theirs[0], **TOL)
    for a, b in zip(ours[1], theirs[1]):
        torch.testing.assert_close(a, b, **TOL)


def test_what_attn_does_not_compute_goes_to_pytorch_and_says_so_once(monkeypatch, caplog):
    """Attention dropout in training: PyTorch's function, its own random draws (the same
    seed gives the same output as outside the block), and one INFO line."""
    monkeypatch.setattr(torch_mode, "_said_passed_on", False)
    caplog.set_level(logging.INFO, logger="attn.torch")
    torch.manual_seed(0)
    model = CausalSelfAttention(dropout=0.5).train()
    x = torch.randn(2, 9, 64)
    torch.manual_seed(1)
    theirs = model(x)
    calls = count_kernel_calls(monkeypatch)
    with at.replace_sdpa():
        torch.manual_seed(1)
        ours = model(x)
        model(x)
    assert not calls
    assert torch.equal(ours, theirs)
    said = [r.getMessage() for r in caplog.records if r.name == "attn.torch"]
    assert len(said) == 1 and "attention dropout" in said[0], said
    q = torch.randn(1, 2, 5, 8, device="meta")
    with at.replace_sdpa():  # another device: PyTorch's (its meta kernel gives the shape)
        assert F.scaled_dot_product_attention(q, q, q).shape == (1, 2, 5, 8)


def test_the_block_holds_for_its_own_thread_only(monkeypatch):
    calls = count_kernel_calls(monkeypatch)
    q = torch.randn(1, 2, 16, 8)
    other = []
    with at.replace_sdpa():
        thread = threading.Thread(target=lambda: other.append(
            F.scaled_dot_product_attention(q, q, q, is_causal=True)))
        thread.start()
        thread.join()
    assert other and not calls
    with at.replace_sdpa():
        F.scaled_dot_product_attention(q, q, q, is_causal=True)
    assert calls
