#!/usr/bin/python3
"""Walk-through 1 against attn: batched causal multi-head attention, the numpy way and the attn
way, and the check that a later token never moves an earlier output.

    python3 examples/python/causal_attention.py   (after the build; PYTHONPATH=build/release/python)
"""
import numpy as np

import attn


def split_heads(x, n_heads):
    """(B, T, d_model) -> (B, H, T, d_head)."""
    b, t, d = x.shape
    return x.reshape(b, t, n_heads, d // n_heads).transpose(0, 2, 1, 3)


def causal_attention(X, Wq, Wk, Wv, n_heads):
    """The walk-through's numpy program: project, split, mask, softmax, attend, merge."""
    Q, K, V = (split_heads(X @ W, n_heads) for W in (Wq, Wk, Wv))
    scores = Q @ K.transpose(0, 1, 3, 2) / np.sqrt(Q.shape[-1])
    T = X.shape[1]
    scores = np.where(np.tril(np.ones((T, T), bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = weights @ V
    return out.transpose(0, 2, 1, 3).reshape(X.shape), weights


def main():
    rng = np.random.default_rng(0)
    B, T, d_model, H = 2, 5, 16, 4
    X = rng.standard_normal((B, T, d_model)).astype(np.float32)
    Wq, Wk, Wv = (rng.standard_normal((d_model, d_model)).astype(np.float32) * 0.3 for _ in range(3))

    expected, expected_w = causal_attention(X.astype(np.float64), Wq, Wk, Wv, H)
    out, weights = attn.multi_head_attention(X, Wq, Wk, Wv, None, H, causal=True,
                                             return_weights=True)
    print("output", out.shape, "weights", weights.shape)
    worst = np.abs(out - expected).max()
    print(f"attn vs the numpy program: max |diff| = {worst:.2e}")
    assert worst < 1e-5 and np.abs(weights - expected_w).max() < 1e-6

    # Perturb the last token: every earlier position's output stays the same, bit for bit.
    X2 = X.copy()
    X2[:, -1] += 10.0
    out2 = attn.multi_head_attention(X2, Wq, Wk, Wv, None, H, causal=True)
    same = np.array_equal(out[:, :-1], out2[:, :-1])
    print("perturbed the last token; outputs at positions 0..3:",
          "bitwise identical" if same else "CHANGED")
    assert same and not np.array_equal(out[:, -1], out2[:, -1])


if __name__ == "__main__":
    main()
