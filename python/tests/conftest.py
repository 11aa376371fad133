"""Shared helpers: float64 numpy references of the textbook formulas."""
import numpy as np
import pytest


def softmax(s):
    """Row softmax, max-subtracted; a row of all -inf gives zeros (as attn does)."""
    m = np.max(s, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def reference_sdpa(q, k, v, causal=False, align="bottom-right", mask=None, scale=None):
    """softmax(q·kᵀ·scale + mask)·v in float64, GQA by repeating K/V heads."""
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    if q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        group = q.shape[-3] // k.shape[-3]
        k = np.repeat(k, group, axis=-3)
        v = np.repeat(v, group, axis=-3)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    tq, tk = s.shape[-2], s.shape[-1]
    if causal:
        offset = 0 if align == "top-left" else tk - tq
        allowed = np.arange(tk)[None, :] <= np.arange(tq)[:, None] + offset
        s = np.where(allowed, s, -np.inf)
    if mask is not None:
        mask = np.asarray(mask)
        s = np.where(mask != 0, s, -np.inf) if mask.dtype.kind in "biu" else s + mask
    w = softmax(s)
    return w @ v, w


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
