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


# PyTorch 2.13's varlen_attn also takes seqused_k, block_table and num_splits (CUDA only there):
# each checked against PyTorch's SDPA on every sequence alone, with the keys it should see.

def per_sequence_keys(q, keys, values, cu_q, window_size):
    """Sequence s of q against keys[s] and values[s] (L_s, Hkv, D) through PyTorch's own SDPA,
    causal bottom-right aligned as FlashAttention's, packed again."""
    outs = []
    for s in range(len(cu_q) - 1):
        qs = q[int(cu_q[s]):int(cu_q[s + 1])].transpose(0, 1)[None]
        ks, vs = keys[s].transpose(0, 1)[None], values[s].transpose(0, 1)[None]
        lq, lk = qs.shape[2], ks.shape[2]
        mask = None
        if window_size[1] == 0:
            mask = torch.arange(lk)[None, :] <= torch.arange(lq)[:, None] + (lk - lq)
        if lk == 0:  # no key: attn gives zeros
            outs.append(torch.zeros(lq, q.shape[1], q.shape[2]))
            continue
        outs.append(F.scaled_dot_product_attention(qs, ks, vs, attn_mask=mask,
                                                   enable_gqa=True)[0].transpose(0, 1))
    return torch.cat(outs)


@pytest.mark.parametrize("window_size", [(-1, -1), (-1, 0)])
def test_seqused_k_reads_only_the_keys_in_use(window_size):
    g = torch.Generator().manual_seed(3)
    lengths_q, slots, used = [5, 1, 30, 4], [40, 17, 64, 9], [33, 0, 64, 4]
    q = torch.randn(sum(lengths_q), 4, 16, generator=g, requires_grad=True)
    k = torch.randn(sum(slots), 2, 16, generator=g, requires_grad=True)
    v = torch.randn(sum(slots), 2, 16, generator=g, requires_grad=True)
    cu_q = torch.tensor([0, 5, 6, 36, 40], dtype=torch.int32)
    cu_k = torch.tensor([0, 40, 57, 121, 130], dtype=torch.int32)
    out = at.varlen_attention(q, k, v, cu_q, cu_k, 30, 64, window_size=window_size,
                              enable_gqa=True, seqused_k=torch.tensor(used, dtype=torch.int32))
    starts = cu_k[:-1].tolist()
    expected = per_sequence_keys(q, [k[a:a + n] for a, n in zip(starts, used)],
                                 [v[a:a + n] for a, n in zip(starts, used)], cu_q, window_size)
    torch.testing.assert_close(out, expected, **TOL)
    grad = torch.randn_like(out)
    ours = torch.autograd.grad(out, (q, k, v), grad)
    theirs = torch.autograd.grad(expected, (q, k, v), grad, allow_unused=True)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, torch.zeros_like(a) if b is None else b, **TOL)
    # rows 33 … 56 (the first slot's tail, the second slot whole) were never read
    assert ours[1][33:57].abs().sum() == 0 and ours[2][33:57].abs().sum() == 0
    assert ours[1][:33].abs().sum() > 0


def test_block_table_reads_a_paged_cache():
    g = torch.Generator().manual_seed(4)
    pages, page_size = 9, 8
    key = torch.randn(pages, page_size, 2, 16, generator=g, requires_grad=True)
    value = torch.randn(pages, page_size, 2, 16, generator=g, requires_grad=True)
    # Three sequences over pages in any order; page 4 holds the shared start of the first two.
    table = torch.tensor([[4, 0, 7], [4, 2, 0], [8, 1, 5]], dtype=torch.int32)
    used = [19, 8, 24]
    lengths_q = [3, 8, 1]
    q = torch.randn(sum(lengths_q), 4, 16, generator=g, requires_grad=True)
    cu_q = torch.tensor([0, 3, 11, 12], dtype=torch.int32)
    out, lse = at.varlen_attention(q, key, value, cu_q, None, 8, 24, window_size=(-1, 0),
                                   enable_gqa=True, seqused_k=torch.tensor(used),
                                   block_table=table, return_aux=AuxRequest(lse=True))
    assert lse.shape == (12, 4)

    def sequence_keys(pages_tensor):
        return [pages_tensor[table[s, :3].long()].reshape(-1, 2, 16)[:n]
                for s, n in enumerate(used)]
    expected = per_sequence_keys(q, sequence_keys(key), sequence_keys(value), cu_q, (-1, 0))
    torch.testing.assert_close(out, expected, **TOL)
    grad = torch.randn_like(out)
    ours = torch.autograd.grad(out, (q, key, value), grad)
    theirs = torch.autograd.grad(expected, (q, key, value), grad)
    for a, b in zip(ours, theirs):  # page 4's gradient sums both sequences'
        torch.testing.assert_close(a, b, **TOL)
    assert ours[1][3].abs().sum() == 0 and ours[1][6].abs().sum() == 0  # pages nobody reads


def test_block_table_compiles_without_a_graph_break():
    g = torch.Generator().manual_seed(5)
    key = torch.randn(4, 16, 2, 8, generator=g)
    value = torch.randn(4, 16, 2, 8, generator=g)
    q = torch.randn(2, 2, 8, generator=g)
    table = torch.tensor([[2, 0], [3, 1]], dtype=torch.int32)
    used = torch.tensor([20, 9])
    cu_q = torch.tensor([0, 1, 2], dtype=torch.int32)

    def decode(q, key, value):  # one new token per sequence against its pages
        return at.varlen_attention(q, key, value, cu_q, None, 1, 32, window_size=(-1, 0),
                                   seqused_k=used, block_table=table)
    torch.library.opcheck(torch.ops.attn.varlen.default,
                          (q, key, value, cu_q, None, True, 0, None, 0.0, None, None, used,
                           table))
    torch.testing.assert_close(torch.compile(decode, fullgraph=True)(q, key, value),
                               decode(q, key, value))


def test_num_splits_and_the_out_variant():
    q, k, v, cu = packed()
    expected = at.varlen_attention(q, k, v, cu, cu, 120, 120, enable_gqa=True)
    for splits in (None, 0, 1, 4):  # attn's result does not depend on it
        assert torch.equal(at.varlen_attention(q, k, v, cu, cu, 120, 120, enable_gqa=True,
                                               num_splits=splits), expected)
    with torch.no_grad():
        out = torch.empty_like(q)
        written, lse = at.varlen_attention_out(out, q, k, v, cu, cu, 120, 120, enable_gqa=True,
                                               return_aux=AuxRequest(lse=True))
    assert written is out and torch.equal(out, expected) and lse.shape == (sum(LENGTHS), 4)
    with pytest.raises(ValueError, match="does not take part in autograd"):
        at.varlen_attention_out(torch.empty_like(q), q, k, v, cu, cu, 120, 120, enable_gqa=True)


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_splits=-1), "num_splits"),
    (dict(seqused_k=torch.tensor([1, 2])), "seqused_k must be a 1-D integer tensor of 5"),
    (dict(seqused_k=torch.tensor([38, 5, 120, 1, 64])), "key_lengths\\[0\\] = 38"),
    (dict(block_table=torch.zeros(5, 1, dtype=torch.int32)), "block_table needs seqused_k"),
])
def test_bad_paging_arguments_are_value_errors(kwargs, match):
    q, k, v, cu = packed()
    with pytest.raises(ValueError, match=match):
        at.varlen_attention(q, k, v, cu, cu, 120, 120, enable_gqa=True, **kwargs)


def test_bad_pages_are_value_errors():
    q = torch.randn(2, 2, 8)
    pages = torch.randn(3, 4, 2, 8)
    cu_q = torch.tensor([0, 1, 2])
    call = lambda table, used: at.varlen_attention(  # noqa: E731
        q, pages, pages, cu_q, None, 1, 8, seqused_k=torch.tensor(used), block_table=table)
    with pytest.raises(ValueError, match="outside the 3 pages"):
        call(torch.tensor([[0, 3], [1, 2]]), [8, 4])
    with pytest.raises(ValueError, match="does not fit in the 2 pages of 4 tokens"):
        call(torch.tensor([[0, 1], [1, 2]]), [9, 4])
    with pytest.raises(ValueError, match="cu_seq_k is needed"):
        at.varlen_attention(q, q, q, cu_q, None, 1, 1)
