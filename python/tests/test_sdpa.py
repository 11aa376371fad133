"""attn.sdpa, attn.scaled_dot_product_attention and attn.reference.sdpa against float64 numpy."""
import threading

import numpy as np
import pytest

import attn
from conftest import reference_sdpa


def close(a, b, tol=2e-5):
    scale = max(1.0, float(np.max(np.abs(b))))
    worst = float(np.max(np.abs(np.asarray(a, np.float64) - b)))
    assert worst <= tol * scale, f"max |a - b| = {worst}"


SHAPES = [((2, 4, 7, 16), (2, 4, 7, 16)), ((1, 2, 5, 8), (1, 2, 9, 8)), ((3, 9, 8), (3, 4, 8)),
          ((2, 8, 65, 32), (2, 2, 65, 32)), ((6, 4), (6, 4))]


@pytest.mark.parametrize("q_shape,k_shape", SHAPES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("align", ["bottom-right", "top-left"])
def test_sdpa_matches_float64_numpy(rng, q_shape, k_shape, causal, align):
    q = rng.standard_normal(q_shape, dtype=np.float32)
    k = rng.standard_normal(k_shape, dtype=np.float32)
    v = rng.standard_normal(k_shape, dtype=np.float32)
    expected, weights = reference_sdpa(q, k, v, causal=causal, align=align)
    out, w, lse = attn.sdpa(q, k, v, causal=causal, causal_align=align, return_weights=True,
                            return_lse=True)
    close(out, expected)
    close(w, weights)
    assert lse.shape == q.shape[:-1]
    ref_out, ref_w = attn.reference.sdpa(q, k, v, causal=causal, causal_align=align)
    close(ref_out, expected)
    np.testing.assert_allclose(ref_w.sum(-1)[..., -1], 1.0, atol=1e-5)


def test_varlen_key_lengths_use_the_start_of_each_slot(rng):
    """attn.sdpa_varlen with key_lengths (seqused_k): each sequence against float64 numpy on the
    first key_lengths[s] keys of its slot, causal bottom-right; the slot's rest gets no
    gradient."""
    lengths_q, slots, used = [3, 6, 2], [8, 6, 5], [5, 6, 0]
    cu_q, cu_k = np.cumsum([0] + lengths_q).tolist(), np.cumsum([0] + slots).tolist()
    q = rng.standard_normal((cu_q[-1], 2, 8), dtype=np.float32)
    k = rng.standard_normal((cu_k[-1], 2, 8), dtype=np.float32)
    v = rng.standard_normal((cu_k[-1], 2, 8), dtype=np.float32)
    out, lse = attn.sdpa_varlen(q, k, v, cu_q, cu_k, causal=True, key_lengths=used)
    for s in range(3):
        rows = out[cu_q[s]:cu_q[s + 1]]
        if used[s] == 0:
            assert not rows.any()  # no key: zeros
            continue
        keys = slice(cu_k[s], cu_k[s] + used[s])
        expected, _ = reference_sdpa(*(t.transpose(1, 0, 2) for t in (
            q[cu_q[s]:cu_q[s + 1]], k[keys], v[keys])), causal=True, align="bottom-right")
        close(rows, expected.transpose(1, 0, 2))
    _, dk, dv = attn.sdpa_varlen_backward(q, k, v, out, lse, np.ones_like(out), cu_q, cu_k,
                                          causal=True, key_lengths=used)
    assert not dk[5:8].any() and not dv[5:8].any() and not dk[14:].any()
    assert dk[:5].any()


def test_masks_boolean_integer_and_additive(rng):
    q, k, v = (rng.standard_normal((2, 3, 5, 8), dtype=np.float32) for _ in range(3))
    allowed = rng.random((5, 5)) > 0.3
    allowed[:, 0] = True
    for mask in (allowed, allowed.astype(np.int64), allowed.astype(np.uint8)):
        close(attn.sdpa(q, k, v, mask=mask), reference_sdpa(q, k, v, mask=allowed)[0])
    bias = rng.standard_normal((3, 1, 5)).astype(np.float32)
    close(attn.sdpa(q, k, v, mask=bias), reference_sdpa(q, k, v, mask=bias)[0])


def test_torch_signature_is_top_left_and_checks_its_arguments(rng):
    q = rng.standard_normal((1, 2, 4, 8), dtype=np.float32)
    k = rng.standard_normal((1, 2, 6, 8), dtype=np.float32)
    v = rng.standard_normal((1, 2, 6, 8), dtype=np.float32)
    close(attn.scaled_dot_product_attention(q, k, v, is_causal=True),
          reference_sdpa(q, k, v, causal=True, align="top-left")[0])
    with pytest.raises(ValueError, match="dropout_p must be 0.0"):
        attn.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
    with pytest.raises(ValueError, match="enable_gqa"):
        attn.scaled_dot_product_attention(q, k[:, :1], v[:, :1])
    close(attn.scaled_dot_product_attention(q, k[:, :1], v[:, :1], enable_gqa=True),
          reference_sdpa(q, k[:, :1], v[:, :1])[0])


def test_against_torch_explicit_softmax(rng):
    torch = pytest.importorskip(
        "torch", reason="torch is not in this interpreter (build/venv's run has it)")
    q, k, v = (rng.standard_normal((2, 4, 33, 16), dtype=np.float32) for _ in range(3))
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    s = tq @ tk.transpose(-1, -2) / 4.0
    s = s.masked_fill(~torch.ones(33, 33, dtype=torch.bool).tril(), float("-inf"))
    close(attn.sdpa(q, k, v, causal=True), (torch.softmax(s, -1) @ tv).numpy(), 1e-5)


def test_backward_matches_finite_differences(rng):
    q, k, v = (rng.standard_normal((1, 2, 6, 4)).astype(np.float32) for _ in range(3))
    d_out = rng.standard_normal((1, 2, 6, 4)).astype(np.float32)
    out, lse = attn.sdpa(q, k, v, causal=True, return_lse=True)
    dq, dk, dv = attn.sdpa_backward(q, k, v, out, lse, d_out, causal=True)

    def loss(qq, kk, vv):
        return float(np.sum(reference_sdpa(qq, kk, vv, causal=True)[0] * d_out))

    for grad, which in ((dq, 0), (dk, 1), (dv, 2)):
        args = [x.astype(np.float64) for x in (q, k, v)]
        numeric = np.zeros_like(args[which])
        for idx in np.ndindex(args[which].shape):
            plus = [a.copy() for a in args]
            minus = [a.copy() for a in args]
            plus[which][idx] += 1e-5
            minus[which][idx] -= 1e-5
            numeric[idx] = (loss(*plus) - loss(*minus)) / 2e-5
        close(grad, numeric, 1e-3)


def test_mask_gradient_into_a_kept_array(rng):
    q, k, v, d_out = (rng.standard_normal((1, 2, 70, 16), dtype=np.float32) for _ in range(4))
    mask = rng.standard_normal((2, 70, 70), dtype=np.float32)
    out, lse = attn.sdpa(q, k, v, causal=True, mask=mask, return_lse=True)
    new = attn.sdpa_backward(q, k, v, out, lse, d_out, causal=True, mask=mask,
                             return_mask_gradient=True)
    kept = np.full(mask.shape, np.nan, np.float32)  # every element is written
    before = attn._conversions()
    got = attn.sdpa_backward(q, k, v, out, lse, d_out, causal=True, mask=mask, dmask=kept)
    assert attn._conversions() == before and got[3] is kept
    for a, b in zip(got, new):
        assert np.array_equal(a, b)
    assert np.all(kept[:, np.triu_indices(70, 1)[0], np.triu_indices(70, 1)[1]] == 0)


def test_inputs_are_used_in_place_and_outputs_not_copied(rng):
    q = rng.standard_normal((2, 4, 16, 8), dtype=np.float32)
    before = attn._conversions()
    out = attn.sdpa(q, q, q)
    assert attn._conversions() == before  # float32, C order: no copy
    # A (B, T, H, d) array viewed as (B, H, T, d): strided, last dim contiguous, no copy.
    bthd = rng.standard_normal((2, 16, 4, 8), dtype=np.float32)
    view = bthd.transpose(0, 2, 1, 3)
    close(attn.sdpa(view, view, view), reference_sdpa(view, view, view)[0])
    assert attn._conversions() == before
    attn.sdpa(q.astype(np.float64), q, q)  # float64: converted once
    assert attn._conversions() == before + 1
    # The output owns the kernel's memory: writable, C order, not a view of an input.
    assert out.flags.c_contiguous and out.flags.writeable
    assert not np.shares_memory(out, q)
    heads = attn.split_heads(rng.standard_normal((2, 5, 16), dtype=np.float32), 4)
    assert heads.shape == (2, 4, 5, 4)


def test_two_python_threads_get_the_results_of_one(rng):
    q, k, v = (rng.standard_normal((4, 8, 256, 64), dtype=np.float32) for _ in range(3))
    alone = attn.sdpa(q, k, v, causal=True)
    results = [None, None]

    def work(i):
        results[i] = attn.sdpa(q, k, v, causal=True)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        np.testing.assert_array_equal(r, alone)


@pytest.mark.parametrize("call,message,error", [
    (lambda q: attn.sdpa(q[0, 0, 0], q, q), "same rank", ValueError),
    (lambda q: attn.sdpa(q, q[..., :4], q), "k's last dim", ValueError),
    (lambda q: attn.sdpa(q, q, q, mask=np.full((7, 7), np.nan, np.float32)), "mask", ValueError),
    (lambda q: attn.sdpa(q, q, q[:, :, :, ::2].copy()[:, :, :3]), "key count", ValueError),
    (lambda q: attn.sdpa(np.ones((2, 2), dtype=np.complex64), q, q), "q must hold floating", TypeError),
    (lambda q: attn.sdpa("q", q, q), "q must hold floating", TypeError),
    (lambda q: attn.sdpa(None, q, q), "q is required", TypeError),
    (lambda q: attn.sdpa(q[..., ::2], q[..., ::2], q[..., ::2]), "q: its last dim must be contiguous", ValueError),
    (lambda q: attn.sdpa(np.zeros((1, 2, 3, 4, 5), np.float32), q, q), "has rank 5; attn's arrays have 1 to 4 dims", ValueError),
    (lambda q: attn.sdpa(q, q, q, causal_align="left"), "causal alignment", ValueError),
    (lambda q: attn.sdpa(q, q, q, window=-1), "window", ValueError),
    (lambda q: attn.set_num_threads(5000), r"n must be in \[0, 1024\]", ValueError),
])
def test_bad_input_raises_naming_the_argument(rng, call, message, error):
    q = rng.standard_normal((1, 2, 7, 8), dtype=np.float32)
    with pytest.raises(error, match=message):
        call(q)


def test_errors_are_value_errors():
    assert issubclass(attn.Error, ValueError)


def test_simd_cap_from_the_environment_and_by_call():
    import os
    import subprocess
    import sys
    with pytest.raises(ValueError, match="unknown SIMD cap"):
        attn.limit_simd("sse9")
    if "avx2" not in open("/proc/cpuinfo").read():
        pytest.skip("this CPU has no AVX2 to cap at")
    assert attn.bf16_attention_engine() in ("amx", "vdpbf16ps", "vector")
    script = ("import attn, numpy as np; q = np.ones((1, 3, 4), np.float32); "
              "print(attn.simd_target(), attn.bf16_attention_engine(), "
              "float(attn.sdpa(q, q, q, causal=True)[0].sum()))")
    env = dict(os.environ, ATTN_SIMD="avx2")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["AVX2", "vector", "12.0"]  # under a cap bf16 products take the float kernels
    env["ATTN_SIMD"] = "sse9"
    failed = subprocess.run([sys.executable, "-c", "import attn"], env=env, capture_output=True,
                            text=True)
    assert failed.returncode != 0 and "ATTN_SIMD: unknown SIMD cap 'sse9'" in failed.stderr
