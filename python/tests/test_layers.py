"""Heads, multi-head attention, the layer object, the cache, embeddings and positions."""
import numpy as np
import pytest

import attn
from conftest import reference_sdpa


def split(x, h):
    b, t, d = x.shape
    return x.reshape(b, t, h, d // h).transpose(0, 2, 1, 3)


def test_split_and_merge_heads_are_the_walkthrough_reshapes(rng):
    x = rng.standard_normal((2, 5, 12), dtype=np.float32)
    heads = attn.split_heads(x, 3)
    np.testing.assert_array_equal(heads, split(x, 3))
    assert np.shares_memory(heads, x)  # a view
    np.testing.assert_array_equal(attn.merge_heads(heads), x)


def test_causal_mask_is_tril():
    np.testing.assert_array_equal(attn.causal_mask(4), np.tril(np.ones((4, 4), bool)))
    np.testing.assert_array_equal(attn.causal_mask(2, 4, align="top-left"),
                                  np.tril(np.ones((2, 4), bool)))


def test_multi_head_attention_follows_the_textbook(rng):
    x = rng.standard_normal((2, 6, 16), dtype=np.float32)
    w_q, w_k, w_v, w_o = (rng.standard_normal((16, 16), dtype=np.float32) * 0.25 for _ in range(4))
    heads = [split(x.astype(np.float64) @ w, 4) for w in (w_q, w_k, w_v)]
    out, weights = reference_sdpa(*heads, causal=True)
    expected = out.transpose(0, 2, 1, 3).reshape(2, 6, 16) @ w_o
    for y, w in (attn.multi_head_attention(x, w_q, w_k, w_v, w_o, 4, causal=True,
                                           return_weights=True),
                 attn.reference.multi_head_attention(x, w_q, w_k, w_v, w_o, 4, causal=True)):
        np.testing.assert_allclose(y, expected, atol=1e-4)
        np.testing.assert_allclose(w, weights, atol=1e-5)
    # The fast path's default: the output alone, the same as with the weights.
    fast = attn.multi_head_attention(x, w_q, w_k, w_v, w_o, 4, causal=True)
    assert isinstance(fast, np.ndarray)
    np.testing.assert_allclose(fast, expected, atol=1e-4)
    # The walk-through's form: a boolean mask, no w_o.
    y = attn.multi_head_attention(x, w_q, w_k, w_v, None, 4, mask=attn.causal_mask(6))
    np.testing.assert_allclose(y, out.transpose(0, 2, 1, 3).reshape(2, 6, 16), atol=1e-4)
    with pytest.raises(ValueError, match="must divide by n_heads"):
        attn.multi_head_attention(x, w_q, w_k, w_v, w_o, 3)


def test_the_layer_object_forward_backward_and_decode(rng):
    layer = attn.MultiHeadAttention(16, 4, n_kv_heads=2, bias=True, rope=True, seed=3)
    assert layer.wqkv.shape == (16, 32) and layer.wo.shape == (16, 16)
    x = rng.standard_normal((1, 9, 16), dtype=np.float32)
    y = layer.forward(x, causal=True)
    grads = layer.backward(np.ones_like(y))
    assert set(grads) == {"dx", "dwqkv", "dwo", "dbqkv", "dbo"}
    np.testing.assert_allclose(grads["dbo"], np.full(16, 9.0), rtol=1e-6)  # Σ over 9 rows of 1
    # Decoding token by token through a cache gives the whole sequence's outputs.
    cache = layer.make_cache(1, 16)
    steps = [layer.decode(x[:, t:t + 1], cache) for t in range(9)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), y, atol=1e-5)
    assert cache.position == 9
    layer.wo = np.zeros((16, 16), np.float32)  # the weights are assignable
    np.testing.assert_array_equal(layer.forward(x, causal=True), np.broadcast_to(layer.bo, (1, 9, 16)))
    with pytest.raises(ValueError, match="call forward"):
        attn.MultiHeadAttention(16, 4).backward(y)


def test_embeddings_and_positions(rng):
    emb = attn.TokenEmbedding(10, 8, seed=1)
    ids = [3, 1, 3]
    x = emb.forward(ids)
    np.testing.assert_array_equal(x, emb.weight[ids])
    pe = attn.PositionalEncoding(16, 8)
    p = np.arange(16)[:, None]
    i = np.arange(0, 8, 2)[None, :]
    expected = np.zeros((16, 8))
    expected[:, 0::2] = np.sin(p / 10000 ** (i / 8))
    expected[:, 1::2] = np.cos(p / 10000 ** (i / 8))
    np.testing.assert_allclose(pe.forward(16), expected, atol=1e-6)
    np.testing.assert_allclose(attn.add_positional(x, pe), x + expected[:3], atol=1e-6)
    with pytest.raises(ValueError, match="id 10"):
        emb.forward([10])


def test_caches_take_f32_bf16_or_q8(rng):
    layer = attn.MultiHeadAttention(16, 4, seed=1)
    x = rng.standard_normal((1, 3, 16), dtype=np.float32)
    exact = layer.decode(x, layer.make_cache(1, 8))
    rounded = layer.decode(x, attn.KVCache(1, 4, 4, 8, dtype="bf16"))
    np.testing.assert_allclose(rounded, exact, atol=2e-2)
    cache = layer.make_cache(1, 8, dtype="q8")
    assert cache.dtype == "q8"
    quantized = layer.decode(x, cache)
    # q8: each value within max|row| / 254; the output within 2e-2 · max|V| (docs/library.md).
    np.testing.assert_allclose(quantized, exact, atol=2e-2 * np.abs(exact).max())
    assert not np.array_equal(quantized, exact)  # it did round
    with pytest.raises(ValueError, match='dtype must be "f32", "bf16" or "q8", got "f16"'):
        layer.make_cache(1, 8, dtype="f16")
    with pytest.raises(ValueError, match='precision must be "f32" or "bf16", got "q8"'):
        attn.MultiHeadAttention(16, 4, precision="q8")


@pytest.mark.parametrize("batch,n_kv_heads,head_dim,capacity", [
    (1, 1, 16, 2**60 + 1),  # wrapped to a 16-float buffer that decoding overran
    (2**31, 2**31, 2**31, 2**31),
    (1, 2**20, 1, 2**20),
])
def test_cache_sizes_that_would_wrap_are_refused(batch, n_kv_heads, head_dim, capacity):
    with pytest.raises(attn.Error, match="batch·n_kv_heads·capacity·head_dim is too large"):
        attn.KVCache(batch, n_kv_heads, head_dim, capacity)


def test_a_layer_too_wide_to_hold_is_refused_with_its_size():
    with pytest.raises(attn.Error, match=r"d_model² is too large: more than \d+ elements"):
        attn.MultiHeadAttention(1 << 62, 1)


def test_the_old_cache_keyword_still_works_for_a_release(rng):
    layer = attn.MultiHeadAttention(16, 4, n_kv_heads=2, seed=3)
    x = rng.standard_normal((1, 1, 16), dtype=np.float32)
    with pytest.warns(DeprecationWarning, match="now n_kv_heads"):
        old = attn.KVCache(1, kv_heads=2, head_dim=4, capacity=4)
    new = attn.KVCache(1, n_kv_heads=2, head_dim=4, capacity=4)
    assert np.array_equal(layer.decode(x, old), layer.decode(x, new))
    with pytest.raises(attn.Error, match="the cache holds 1 heads"):
        layer.decode(x, attn.KVCache(1, head_dim=4, capacity=4))
