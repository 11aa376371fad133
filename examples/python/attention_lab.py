#!/usr/bin/python3
"""Walk-through 2 against attn, the lab: attention returns output and weights; rows sum to 1;
a query built to match a key picks it (the known answer); the causal matrix; two heads.

    python3 examples/python/attention_lab.py   (after the build; PYTHONPATH=build/release/python)
"""
import numpy as np

import attn


def main():
    rng = np.random.default_rng(3)
    # (a) 2 queries over 5 keys: each row of weights sums to 1.
    q = rng.standard_normal((2, 4)).astype(np.float32)
    k = rng.standard_normal((5, 4)).astype(np.float32)
    v = rng.standard_normal((5, 3)).astype(np.float32)
    out, weights = attn.reference.sdpa(q, k, v)
    print("(a) weights rows sum to", weights.sum(-1))
    assert np.allclose(weights.sum(-1), 1, atol=1e-6)
    assert np.allclose(attn.sdpa(q, k, v), out, atol=1e-6)

    # (b) The known answer: q = (5, 5, 0, 0) matches key 2 = (1, 1, 0, 0).
    q = np.array([[5, 5, 0, 0]], np.float32)
    k = np.array([[1, 0, 0, 0], [-1, -1, 0, 0], [1, 1, 0, 0], [0, 1, 0, 0], [1, 0, 1, 0]],
                 np.float32)
    v = np.array([[1], [2], [99], [4], [5]], np.float32)
    out, weights = attn.reference.sdpa(q, k, v)
    print("(b) weights", np.round(weights[0], 4), "output", round(float(out[0, 0]), 2))
    assert weights[0].argmax() == 2 and abs(weights[0, 2] - 0.8024) < 1e-4
    assert abs(out[0, 0] - 80.09) < 0.01  # key 2 dominates, yet the output is not 99

    # (c) The causal weight matrix: zeros above the diagonal.
    x = rng.standard_normal((6, 8)).astype(np.float32)
    _, weights = attn.reference.sdpa(x, x, x, causal=True)
    print("(c) causal weights above the diagonal:", np.triu(weights, 1).max())
    assert np.all(np.triu(weights, 1) == 0)

    # (d) Two heads on a (6, 8) input: each head is attention on its own columns.
    w_q, w_k, w_v = (rng.standard_normal((8, 8)).astype(np.float32) * 0.3 for _ in range(3))
    y, heads = attn.multi_head_attention(x, w_q, w_k, w_v, None, 2, causal=True,
                                         return_weights=True)
    for h in range(2):
        cols = slice(4 * h, 4 * h + 4)
        head_out, head_w = attn.reference.sdpa(x @ w_q[:, cols], x @ w_k[:, cols], x @ w_v[:, cols],
                                               causal=True)
        assert np.allclose(y[:, cols], head_out, atol=1e-5)
        assert np.allclose(heads[h], head_w, atol=1e-6)
    print("(d) 2 heads: each equals attention on its own column block")


if __name__ == "__main__":
    main()
