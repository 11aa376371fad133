"""The Python API's bad-input table: every case is one wrong call through `attn.*` (a dtype, a
NaN or inf in one argument, a huge or negative size, a view the kernels cannot read, a wrong
type, a hostile string) and expects one named TypeError or ValueError, a short message that
names what is wrong, and no crash. The C++ command line has its own table
(tests/bad_inputs_test.cpp)."""
import math

import numpy as np
import pytest

import attn
import gpt2_files

MAX_MESSAGE = 1500  # characters: a message is read by a person, never an array's numbers

CASES = []


def case(name, error, match):
    """Registers the decorated call(ctx) as a case expecting `error` whose message matches."""
    def register(call):
        CASES.append(pytest.param(call, error, match, id=name))
        return call
    return register


def add(name, error, match, call):
    CASES.append(pytest.param(call, error, match, id=name))


def arrays(ctx, **replace):
    """q, k, v (1, 2, 6, 4) float32, with any of them replaced."""
    qkv = dict(q=ctx["q"], k=ctx["k"], v=ctx["v"])
    qkv.update(replace)
    return qkv["q"], qkv["k"], qkv["v"]


def with_value(array, value):
    out = array.copy()
    out.flat[out.size // 2] = value
    return out


NON_FINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}

# --- attn.sdpa, attn.reference.sdpa, attn.sdpa_backward: NaN and inf per argument ------------
for label, bad in NON_FINITE.items():
    for arg in "qkv":
        add(f"sdpa-{arg}-{label}", ValueError, rf"sdpa: {arg} holds {label}",
            lambda c, arg=arg, bad=bad: attn.sdpa(*arrays(c, **{arg: with_value(c[arg], bad)}),
                                                 causal=True))
        add(f"reference.sdpa-{arg}-{label}", ValueError, rf"reference::sdpa: {arg} holds {label}",
            lambda c, arg=arg, bad=bad: attn.reference.sdpa(
                *arrays(c, **{arg: with_value(c[arg], bad)})))
        add(f"sdpa_backward-{arg}-{label}", ValueError, rf"sdpa_backward: {arg} holds {label}",
            lambda c, arg=arg, bad=bad: attn.sdpa_backward(
                *arrays(c, **{arg: with_value(c[arg], bad)}), c["out"], c["lse"], c["out"],
                causal=True))
    for arg in ("out", "d_out"):
        add(f"sdpa_backward-{arg}-{label}", ValueError, rf"sdpa_backward: {arg} holds {label}",
            lambda c, arg=arg, bad=bad: attn.sdpa_backward(
                c["q"], c["k"], c["v"], with_value(c["out"], bad) if arg == "out" else c["out"],
                c["lse"], with_value(c["out"], bad) if arg == "d_out" else c["out"],
                causal=True))
    for arg in ("query", "key", "value"):
        add(f"scaled_dot_product_attention-{arg}-{label}", ValueError, rf"holds {label}",
            lambda c, arg=arg, bad=bad: attn.scaled_dot_product_attention(
                **{a: (with_value(c[a[0]], bad) if a == arg else c[a[0]])
                   for a in ("query", "key", "value")}))

# --- dtypes, types, ranks and views, per array argument of sdpa -----------------------------
for arg in "qkv":
    add(f"sdpa-{arg}-complex", TypeError, rf"{arg} must hold floating-point numbers",
        lambda c, arg=arg: attn.sdpa(*arrays(c, **{arg: c[arg].astype(np.complex64)})))
    add(f"sdpa-{arg}-object", TypeError, rf"{arg} must hold floating-point numbers",
        lambda c, arg=arg: attn.sdpa(*arrays(c, **{arg: c[arg].astype(object)})))
    add(f"sdpa-{arg}-strings", TypeError, rf"{arg} must hold floating-point numbers",
        lambda c, arg=arg: attn.sdpa(*arrays(c, **{arg: np.full((2, 3), "x")})))
    add(f"sdpa-{arg}-bool", TypeError, rf"{arg} must hold floating-point numbers",
        lambda c, arg=arg: attn.sdpa(*arrays(c, **{arg: c[arg] > 0})))
    add(f"sdpa-{arg}-None", TypeError, rf"{arg} is required",
        lambda c, arg=arg: attn.sdpa(*arrays(c, **{arg: None})))
    add(f"sdpa-{arg}-dict", TypeError, rf"{arg} must hold floating-point numbers, got dtype object",
        lambda c, arg=arg: attn.sdpa(*arrays(c, **{arg: {"a": 1}})))
    add(f"sdpa-{arg}-rank5", ValueError, rf"{arg} has rank 5",
        lambda c, arg=arg: attn.sdpa(*arrays(c, **{arg: np.zeros((1, 1, 1, 2, 4), np.float32)})))
    add(f"sdpa-{arg}-scalar", ValueError, rf"{arg} has rank 0",
        lambda c, arg=arg: attn.sdpa(*arrays(c, **{arg: np.float32(1.0)})))
    add(f"sdpa-{arg}-empty", ValueError, rf"{arg} is empty",
        lambda c, arg=arg: attn.sdpa(*arrays(c, **{arg: np.zeros((1, 2, 0, 4), np.float32)})))
    add(f"sdpa-{arg}-strided-last-dim", ValueError, rf"{arg}: its last dim must be contiguous",
        lambda c, arg=arg: attn.sdpa(*arrays(c, **{arg: np.zeros((1, 2, 6, 8), np.float32)[..., ::2]})))
    add(f"sdpa-{arg}-ragged-list", TypeError, rf"{arg} must be a numpy array",
        lambda c, arg=arg: attn.sdpa(*arrays(c, **{arg: [[1.0, 2.0], [3.0]]})))

# --- sdpa's shapes and options ---------------------------------------------------------------
add("sdpa-rank-mismatch", ValueError, "same rank", lambda c: attn.sdpa(c["q"][0], c["k"], c["v"]))
add("sdpa-head-dim-mismatch", ValueError, "k's last dim",
    lambda c: attn.sdpa(c["q"], c["k"][..., :2].copy(), c["v"]))
add("sdpa-key-count-mismatch", ValueError, "key count",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"][:, :, :3].copy()))
add("sdpa-heads-not-dividing", ValueError, "must divide q heads",
    lambda c: attn.sdpa(np.zeros((1, 3, 6, 4), np.float32), c["k"], c["v"]))
add("sdpa-precision-q8", ValueError, 'precision must be "f32" or "bf16", got "q8"',
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], precision="q8"))
add("sdpa_backward-precision-name", ValueError, "precision must be",
    lambda c: attn.sdpa_backward(c["q"], c["k"], c["v"], c["q"],
                                 np.ascontiguousarray(c["q"][..., 0]), c["q"],
                                 precision="float"))
add("sdpa-batch-mismatch", ValueError, "leading dim 0",
    lambda c: attn.sdpa(np.zeros((2, 2, 6, 4), np.float32), c["k"], c["v"]))
add("sdpa-window-negative", ValueError, "window must be >= 0",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], window=-1))
add("sdpa-window-string", TypeError, "window=",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], window="3"))
add("sdpa-scale-nan", ValueError, "scale must be finite",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], scale=math.nan))
add("sdpa-scale-inf", ValueError, "scale must be finite",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], scale=math.inf))
add("sdpa-scale-string", TypeError, "scale=",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], scale="big"))
add("sdpa-key-length-negative", ValueError, "key length -1",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], key_lengths=[-1]))
add("sdpa-key-length-past-keys", ValueError, "key length 100",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], key_lengths=[100]))
add("sdpa-key-lengths-count", ValueError, "2 key_lengths for a batch of 1",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], key_lengths=[1, 2]))
add("sdpa-key-start-past-keys", ValueError, "key start 100",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], key_starts=[100]))
add("sdpa-key-starts-count", ValueError, "2 key_starts for a batch of 1",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], key_starts=[0, 1]))
add("sdpa-key-length-huge", TypeError, "key_lengths=",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], key_lengths=[2**70]))
add("sdpa-causal-align-unknown", ValueError, "causal alignment",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], causal_align="left"))
add("sdpa-causal-align-megabyte", ValueError, "causal alignment",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], causal_align="x" * 1_000_000))
add("sdpa-causal-align-nul", ValueError, "causal alignment",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], causal_align="top-left\0"))
add("sdpa-causal-string", TypeError, "causal=",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], causal="yes"))
for label, bad in (("nan", math.nan), ("inf", math.inf)):
    add(f"sdpa-additive-mask-{label}", ValueError, "additive mask may hold finite values or -inf",
        lambda c, bad=bad: attn.sdpa(c["q"], c["k"], c["v"], mask=with_value(
            np.zeros((6, 6), np.float32), bad)))
add("sdpa-mask-shape", ValueError, "does not broadcast",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], mask=np.ones((5, 6), bool)))
add("sdpa-mask-rank5", ValueError, "mask has rank 5",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], mask=np.ones((1, 1, 1, 6, 6), bool)))
add("sdpa-mask-complex", TypeError, "mask must hold floating-point numbers",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], mask=np.ones((6, 6), np.complex64)))
add("sdpa-mask-string", TypeError, "mask must hold floating-point numbers",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], mask="causal"))
add("sdpa-torch-is_causal", TypeError, "unexpected keyword argument 'is_causal'; attn's is causal",
    lambda c: attn.sdpa(c["big"], c["big"], c["big"], is_causal=True))
add("sdpa-torch-attn_mask", TypeError, "unexpected keyword argument 'attn_mask'; attn's is mask",
    lambda c: attn.sdpa(c["big"], c["big"], c["big"], attn_mask=None))
add("sdpa-torch-dropout_p", TypeError, "unexpected keyword argument 'dropout_p'",
    lambda c: attn.sdpa(c["big"], c["big"], c["big"], dropout_p=0.0))
add("sdpa-missing-arguments", TypeError, r"sdpa\(\): these arguments do not fit",
    lambda c: attn.sdpa(c["big"]))
add("sdpa-too-many-positional", TypeError, r"sdpa\(\): these arguments do not fit",
    lambda c: attn.sdpa(c["big"], c["big"], c["big"], True))
add("sdpa-output-past-memory", ValueError, "sdpa: the output .* needs .* more than this machine",
    lambda c: attn.sdpa(np.broadcast_to(c["q"][0, 0, :1], (2**38, 4)), c["k"][0, 0], c["v"][0, 0]))
add("sdpa-weights-past-memory", ValueError, "sdpa: computing the weights .* needs",
    lambda c: attn.sdpa(c["q"][0, 0], np.broadcast_to(c["k"][0, 0, :1], (2**36, 4)),
                        np.broadcast_to(c["v"][0, 0, :1], (2**36, 4)), return_weights=True))
add("sdpa_backward-lse-shape", ValueError, "lse|logsumexp",
    lambda c: attn.sdpa_backward(c["q"], c["k"], c["v"], c["out"], c["lse"][..., :3].copy(),
                                 c["out"]))
add("sdpa_backward-out-shape", ValueError, "out must be",
    lambda c: attn.sdpa_backward(c["q"], c["k"], c["v"], c["out"][:, :1].copy(), c["lse"],
                                 c["out"]))
add("sdpa_backward-d_out-shape", ValueError, "d_out must have the output's shape",
    lambda c: attn.sdpa_backward(c["q"], c["k"], c["v"], c["out"], c["lse"],
                                 c["out"][:, :1].copy()))
add("sdpa_backward-lse-nan", ValueError, "logsumexp|lse",
    lambda c: attn.sdpa_backward(c["q"], c["k"], c["v"], c["out"],
                                 with_value(c["lse"], math.nan), c["out"]))

# --- the score variants, and packed variable-length batches ----------------------------------
def packed(a):
    """(1, H, T, d) -> (T, H, d): one sequence, packed."""
    return np.ascontiguousarray(a[0].transpose(1, 0, 2))


add("sdpa-sinks-count", ValueError, "1 sinks for 2 query heads",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], sinks=[0.5]))
add("sdpa-sinks-nan", ValueError, "sinks must be finite",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], sinks=[0.5, math.nan]))
add("sdpa-alibi-inf", ValueError, "alibi_slopes must be finite",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], alibi_slopes=[math.inf, 1.0]))
add("sdpa-softcap-negative", ValueError, "softcap must be finite and >= 0",
    lambda c: attn.sdpa(c["q"], c["k"], c["v"], softcap=-2.0))
add("sdpa_backward-mask-gradient-boolean", ValueError, "needs an additive",
    lambda c: attn.sdpa_backward(c["q"], c["k"], c["v"], c["out"], c["lse"], c["out"],
                                 mask=np.ones((6, 6), bool), return_mask_gradient=True))
ADDITIVE = np.zeros((6, 6), np.float32)
add("sdpa_backward-dmask-float64", ValueError, "dmask receives the result, so it must be a writeab",
    lambda c: attn.sdpa_backward(c["q"], c["k"], c["v"], c["out"], c["lse"], c["out"],
                                 mask=ADDITIVE, dmask=np.zeros((6, 6))))
add("sdpa_backward-dmask-read-only", ValueError, "dmask receives the result",
    lambda c: attn.sdpa_backward(c["q"], c["k"], c["v"], c["out"], c["lse"], c["out"],
                                 mask=ADDITIVE,
                                 dmask=np.broadcast_to(np.float32(0), (6, 6))))
add("sdpa_backward-dmask-shape", ValueError, r"of the mask's shape \(6, 6\), got \(6, 5\)",
    lambda c: attn.sdpa_backward(c["q"], c["k"], c["v"], c["out"], c["lse"], c["out"],
                                 mask=ADDITIVE, dmask=np.zeros((6, 5), np.float32)))
add("sdpa_backward-dmask-is-the-mask", ValueError, "dmask shares memory with the mask",
    lambda c: attn.sdpa_backward(c["q"], c["k"], c["v"], c["out"], c["lse"], c["out"],
                                 mask=ADDITIVE, dmask=ADDITIVE))
add("sdpa_varlen-one-offset", ValueError, "at least 2 offsets",
    lambda c: attn.sdpa_varlen(packed(c["q"]), packed(c["k"]), packed(c["v"]), [0], [0]))
add("sdpa_varlen-offsets-past-the-rows", ValueError, "must run from 0 to 6",
    lambda c: attn.sdpa_varlen(packed(c["q"]), packed(c["k"]), packed(c["v"]), [0, 7], [0, 6]))
add("sdpa_varlen-offsets-decreasing", ValueError, "must not decrease",
    lambda c: attn.sdpa_varlen(packed(c["q"]), packed(c["k"]), packed(c["v"]), [0, 4, 2, 6],
                               [0, 4, 2, 6]))
add("sdpa_varlen-key-lengths-past-the-slot", ValueError, r"key_lengths\[1\] = 5 must be from 0",
    lambda c: attn.sdpa_varlen(packed(c["q"]), packed(c["k"]), packed(c["v"]), [0, 2, 6],
                               [0, 2, 6], key_lengths=[2, 5]))
add("sdpa_varlen-not-packed", ValueError, "must be packed",
    lambda c: attn.sdpa_varlen(c["q"], c["k"], c["v"], [0, 6], [0, 6]))
add("sdpa_varlen-q-nan", ValueError, "sdpa_varlen: q holds nan",
    lambda c: attn.sdpa_varlen(packed(with_value(c["q"], math.nan)), packed(c["k"]),
                               packed(c["v"]), [0, 6], [0, 6], causal=True))
add("sdpa_varlen_backward-lse-shape", ValueError, "logsumexp must be",
    lambda c: attn.sdpa_varlen_backward(packed(c["q"]), packed(c["k"]), packed(c["v"]),
                                        packed(c["out"]), c["lse"], packed(c["out"]), [0, 6],
                                        [0, 6]))

# --- attn.scaled_dot_product_attention (PyTorch's signature) --------------------------------
add("torch-sdpa-dropout", ValueError, "dropout_p must be 0.0",
    lambda c: attn.scaled_dot_product_attention(c["q"], c["k"], c["v"], dropout_p=0.1))
add("torch-sdpa-mask-and-causal", ValueError, "attn_mask and is_causal cannot both be set",
    lambda c: attn.scaled_dot_product_attention(c["q"], c["k"], c["v"], is_causal=True,
                                                attn_mask=np.ones((6, 6), bool)))
add("torch-sdpa-gqa-without-flag", ValueError, "enable_gqa=True",
    lambda c: attn.scaled_dot_product_attention(np.zeros((1, 4, 6, 4), np.float32), c["k"],
                                                c["v"]))
add("torch-sdpa-attn-keyword", TypeError, "unexpected keyword argument 'causal'",
    lambda c: attn.scaled_dot_product_attention(c["big"], c["big"], c["big"], causal=True))

# --- attn.multi_head_attention -----------------------------------------------------------
MHA_ARGS = ("x", "w_q", "w_k", "w_v", "w_o", "b_q", "b_k", "b_v", "b_o")
MHA_NAMES = {"x": "x", "w_q": "wq", "w_k": "wk", "w_v": "wv", "w_o": "wo", "b_q": "bq",
             "b_k": "bk", "b_v": "bv", "b_o": "bo"}


def mha_call(c, **replace):
    args = dict(x=c["x"], w_q=c["w"], w_k=c["w"], w_v=c["w"], w_o=c["w"], b_q=c["b"],
                b_k=c["b"], b_v=c["b"], b_o=c["b"])
    args.update(replace)
    x = args.pop("x")
    return attn.multi_head_attention(x, args.pop("w_q"), args.pop("w_k"), args.pop("w_v"),
                                     n_heads=2, causal=True, **args)


for arg in MHA_ARGS:
    for label, bad in NON_FINITE.items():
        add(f"multi_head_attention-{arg}-{label}", ValueError,
            rf"multi_head_attention: {MHA_NAMES[arg]} holds {label}",
            lambda c, arg=arg, bad=bad: mha_call(
                c, **{arg: with_value(c["x"] if arg == "x" else c["b"] if arg[0] == "b"
                                      else c["w"], bad)}))
    add(f"multi_head_attention-{arg}-complex", TypeError, "must hold floating-point numbers",
        lambda c, arg=arg: mha_call(c, **{arg: np.ones((8, 8), np.complex64)}))
add("multi_head_attention-n_heads-zero", TypeError, "n_heads is required",
    lambda c: attn.multi_head_attention(c["x"], c["w"], c["w"], c["w"], n_heads=0))
add("multi_head_attention-n_heads-not-dividing", ValueError, r"d_model \(8\) must divide by n_heads \(3\)",
    lambda c: attn.multi_head_attention(c["x"], c["w"], c["w"], c["w"], n_heads=3))
add("multi_head_attention-n_heads-negative", ValueError, "n_heads",
    lambda c: attn.multi_head_attention(c["x"], c["w"], c["w"], c["w"], n_heads=-2))
add("multi_head_attention-n_kv_heads", ValueError, "n_kv_heads",
    lambda c: attn.multi_head_attention(c["x"], c["w"], c["w"], c["w"], n_heads=2, n_kv_heads=3))
add("multi_head_attention-w-shape", ValueError, "wq must be",
    lambda c: attn.multi_head_attention(c["x"], c["w"][:4], c["w"], c["w"], n_heads=2))
add("multi_head_attention-x-rank1", ValueError, "x must be",
    lambda c: attn.multi_head_attention(c["x"][0, 0], c["w"], c["w"], c["w"], n_heads=2))
add("multi_head_attention-bias-shape", ValueError, "bq must be",
    lambda c: attn.multi_head_attention(c["x"], c["w"], c["w"], c["w"], n_heads=2,
                                        b_q=c["b"][:3]))
add("multi_head_attention-bo-without-wo", ValueError, "bo needs wo",
    lambda c: attn.multi_head_attention(c["x"], c["w"], c["w"], c["w"], n_heads=2, b_o=c["b"]))
add("multi_head_attention-rope-odd", ValueError, "rope needs an even d_head",
    lambda c: attn.multi_head_attention(c["x"], c["w"], c["w"], c["w"], n_heads=8, rope=True))
add("multi_head_attention-past-memory", ValueError, "Q, K and V .* needs",
    lambda c: attn.multi_head_attention(np.broadcast_to(c["x"][:, :1], (1, 2**36, 8)), c["w"],
                                        c["w"], c["w"], n_heads=2))
add("multi_head_attention-torch-keyword", TypeError, "unexpected keyword argument 'is_causal'",
    lambda c: attn.multi_head_attention(c["x"], c["w"], c["w"], c["w"], n_heads=2,
                                        is_causal=True))

# --- attn.MultiHeadAttention and attn.KVCache ----------------------------------------------
add("MultiHeadAttention-d_model-negative", ValueError, "d_model",
    lambda c: attn.MultiHeadAttention(-8, 2))
add("MultiHeadAttention-n_heads-zero", ValueError, "n_heads",
    lambda c: attn.MultiHeadAttention(8, 0))
add("MultiHeadAttention-d_model-huge", ValueError, "too large",
    lambda c: attn.MultiHeadAttention(1 << 62, 1))
add("MultiHeadAttention-d_model-past-int64", TypeError, r"MultiHeadAttention\(\): these arguments",
    lambda c: attn.MultiHeadAttention(1 << 64, 1))
add("MultiHeadAttention-n_kv_heads", ValueError, "n_kv_heads",
    lambda c: attn.MultiHeadAttention(8, 2, n_kv_heads=3))
add("MultiHeadAttention-precision", ValueError, "precision|dtype",
    lambda c: attn.MultiHeadAttention(8, 2, precision="f64"))
add("MultiHeadAttention-d_model-string", TypeError, r"MultiHeadAttention\(\): these arguments",
    lambda c: attn.MultiHeadAttention("8", 2))
add("MultiHeadAttention-rope-odd", ValueError, "rope",
    lambda c: attn.MultiHeadAttention(8, 8, rope=True))
for label, bad in NON_FINITE.items():
    add(f"MultiHeadAttention.forward-x-{label}", ValueError, rf"MultiHeadAttention: x holds {label}",
        lambda c, bad=bad: c["layer"].forward(with_value(c["x"], bad), causal=True))
    add(f"MultiHeadAttention.decode-x-{label}", ValueError, rf"MultiHeadAttention: x holds {label}",
        lambda c, bad=bad: c["layer"].decode(with_value(c["x"], bad), c["layer"].make_cache(1, 16)))
    add(f"MultiHeadAttention.backward-d_y-{label}", ValueError, rf"d_y holds {label}",
        lambda c, bad=bad: (c["layer"].forward(c["x"]),
                            c["layer"].backward(with_value(c["x"], bad))))
add("MultiHeadAttention.forward-x-width", ValueError, r"x must be \(B, T, d_model = 8\)",
    lambda c: c["layer"].forward(np.zeros((1, 3, 5), np.float32)))
add("MultiHeadAttention.forward-x-rank2", ValueError, r"x must be \(B, T, d_model = 8\)",
    lambda c: c["layer"].forward(np.zeros((3, 8), np.float32)))
add("MultiHeadAttention.forward-window", ValueError, "window",
    lambda c: c["layer"].forward(c["x"], window=-3))
add("MultiHeadAttention.backward-first", ValueError, r"call forward\(x\) first",
    lambda c: attn.MultiHeadAttention(8, 2).backward(c["x"]))
add("MultiHeadAttention.backward-shape", ValueError, "d_y must be",
    lambda c: (c["layer"].forward(c["x"]), c["layer"].backward(c["x"][:, :2].copy())))
add("MultiHeadAttention.decode-past-capacity", ValueError, "capacity",
    lambda c: c["layer"].decode(c["x"], c["layer"].make_cache(1, 2)))
add("MultiHeadAttention.decode-wrong-cache", ValueError, "cache",
    lambda c: c["layer"].decode(c["x"], attn.KVCache(batch=1, n_kv_heads=2, head_dim=8,
                                                     capacity=16)))
add("MultiHeadAttention.decode-cache-not-a-cache", TypeError, "decode",
    lambda c: c["layer"].decode(c["x"], "cache"))
add("MultiHeadAttention.make_cache-batch", ValueError, "batch",
    lambda c: c["layer"].make_cache(-1, 16))
add("MultiHeadAttention.make_cache-capacity-huge", ValueError, "too large",
    lambda c: c["layer"].make_cache(1, 2**60 + 1))
add("MultiHeadAttention.make_cache-dtype", ValueError, "dtype",
    lambda c: c["layer"].make_cache(1, 16, dtype="int8"))
add("MultiHeadAttention.wqkv-wrong-shape", ValueError, "wqkv must be",
    lambda c: (setattr(c["fresh_layer"], "wqkv", np.zeros((3, 3), np.float32)),
               c["fresh_layer"].forward(c["x"])))
add("MultiHeadAttention.wqkv-string", TypeError, "wqkv must hold floating-point numbers",
    lambda c: setattr(c["fresh_layer"], "wqkv", "weights"))
for name, kwargs, match in (
        ("batch-negative", dict(batch=-1), "batch"),
        ("kv-heads-zero", dict(n_kv_heads=0), "n_kv_heads"),
        ("head-dim-zero", dict(head_dim=0), "head_dim"),
        ("capacity-negative", dict(capacity=-5), "capacity"),
        ("capacity-2^60+1", dict(head_dim=16, capacity=2**60 + 1), "too large"),
        ("all-2^31", dict(batch=2**31, n_kv_heads=2**31, head_dim=2**31, capacity=2**31),
         "too large"),
        ("window-negative", dict(window=-1), "window"),
        ("dtype", dict(dtype="int8"), "dtype"),
        ("dtype-type", dict(dtype=16), r"KVCache\(\): these arguments"),
        ("kv_heads-and-n_kv_heads", dict(n_kv_heads=2, kv_heads=2), "not both")):
    add(f"KVCache-{name}", TypeError if "these arguments" in match else ValueError, match,
        lambda c, kwargs=kwargs: attn.KVCache(**{"capacity": 16, **kwargs}))

# --- embeddings, positions, masks, heads, threads --------------------------------------------
add("TokenEmbedding-vocab-negative", ValueError, "vocab", lambda c: attn.TokenEmbedding(-1, 8))
add("TokenEmbedding-d_model-zero", ValueError, "d_model", lambda c: attn.TokenEmbedding(8, 0))
add("TokenEmbedding-huge", ValueError, "too large|needs",
    lambda c: attn.TokenEmbedding(2**40, 2**20))
add("TokenEmbedding-id-past-vocab", ValueError, "97|vocab",
    lambda c: attn.TokenEmbedding(97, 8)([97]))
add("TokenEmbedding-id-negative", ValueError, "-1",
    lambda c: attn.TokenEmbedding(97, 8)([-1]))
add("TokenEmbedding-ids-string", TypeError, "these arguments",
    lambda c: attn.TokenEmbedding(97, 8)("abc"))
add("PositionalEncoding-negative", ValueError, "max_len", lambda c: attn.PositionalEncoding(-1, 8))
add("PositionalEncoding-length-negative", ValueError, "length|max_len",
    lambda c: attn.PositionalEncoding(8, 4).forward(-1))
add("PositionalEncoding-huge", ValueError, "too large|needs",
    lambda c: attn.PositionalEncoding(2**40, 2**20))
add("PositionalEncoding-past-max-len", ValueError, "max_len|length",
    lambda c: attn.PositionalEncoding(8, 4).forward(9))
add("PositionalEncoding-add_to-width", ValueError, "d_model|x",
    lambda c: attn.PositionalEncoding(8, 4).add_to(np.zeros((3, 5), np.float32)))
add("add_positional-shape", ValueError, "pe|x",
    lambda c: attn.add_positional(np.zeros((3, 4), np.float32), np.zeros((2, 4), np.float32)))
add("causal_mask-negative", ValueError, "", lambda c: attn.causal_mask(-1))
add("causal_mask-past-memory", ValueError, "needs|too large", lambda c: attn.causal_mask(2**40))
add("causal_mask-align", ValueError, "causal alignment",
    lambda c: attn.causal_mask(4, align="middle"))
add("split_heads-zero", ValueError, "n_heads", lambda c: attn.split_heads(c["x"], 0))
add("split_heads-not-dividing", ValueError, "divide", lambda c: attn.split_heads(c["x"], 3))
add("merge_heads-rank2", ValueError, "merge_heads|rank",
    lambda c: attn.merge_heads(np.zeros((3, 4), np.float32)))
add("set_num_threads-negative", ValueError, r"n must be in \[0, 1024\]",
    lambda c: attn.set_num_threads(-1))
add("set_num_threads-huge", ValueError, r"n must be in \[0, 1024\]",
    lambda c: attn.set_num_threads(5000))
add("set_num_threads-string", TypeError, r"set_num_threads\(\): these arguments",
    lambda c: attn.set_num_threads("2"))
add("limit_simd-unknown", ValueError, "avx9", lambda c: attn.limit_simd("avx9"))

# --- pictures ------------------------------------------------------------------------------
add("heatmap-rank3", ValueError, "weights", lambda c: attn.heatmap(np.zeros((2, 3, 3), np.float32)))
add("heatmap-nan", ValueError, "nan|NaN|finite",
    lambda c: attn.heatmap(with_value(np.zeros((3, 3), np.float32), math.nan)))
add("heatmap-scale", ValueError, "scale", lambda c: attn.heatmap(c["w"], scale="loud"))
add("heatmap-tokens-count", ValueError, "2 column labels for 8 columns",
    lambda c: attn.heatmap(c["w"], tokens=["a", "b"]))
add("heatmap-width-negative", ValueError, "width",
    lambda c: attn.heatmap(c["w"], max_width=-1))
add("heatmap_png-cells", ValueError, "max_cells|cells",
    lambda c: attn.heatmap_png(c["w"], max_cells=0))
add("heatmap_svg-tokens-type", TypeError, "these arguments",
    lambda c: attn.heatmap_svg(c["w"], tokens=[1, 2]))
add("explorer_html-tokens", ValueError, "tokens",
    lambda c: attn.explorer_html(np.zeros((1, 1, 3, 3), np.float32), ["a"]))

# --- tokenizers: hostile strings and paths ---------------------------------------------------
add("BpeTokenizer.train-vocab-negative", ValueError, "vocab_size",
    lambda c: attn.BpeTokenizer.train("abc abc", vocab_size=-1))
add("BpeTokenizer.train-vocab-huge", ValueError, "vocab_size",
    lambda c: attn.BpeTokenizer.train("abc abc", vocab_size=2**62))
add("BpeTokenizer.train-corpus-None", TypeError, "corpus",
    lambda c: attn.BpeTokenizer.train(None))
add("BpeTokenizer.train-corpus-number", TypeError, "corpus",
    lambda c: attn.BpeTokenizer.train(123))
add("BpeTokenizer.train-corpus-surrogate", ValueError, "corpus|Unicode|UTF-8",
    lambda c: attn.BpeTokenizer.train("abc\ud800def"))
add("BpeTokenizer.train-empty-special", ValueError, "special",
    lambda c: attn.BpeTokenizer.train("abc abc", special_tokens=[""]))
add("BpeTokenizer.load-missing", ValueError, "cannot open|No such file",
    lambda c: attn.BpeTokenizer.load(str(c["tmp"] / "missing.json")))
add("BpeTokenizer.load-None", TypeError, "path must be a path",
    lambda c: attn.BpeTokenizer.load(None))
add("BpeTokenizer.load-nul", ValueError, "path holds a NUL character",
    lambda c: attn.BpeTokenizer.load("a\0b"))
add("BpeTokenizer.load-directory", ValueError, "directory|cannot|not a",
    lambda c: attn.BpeTokenizer.load(str(c["tmp"])))
add("BpeTokenizer.load-not-json", ValueError, "JSON|json",
    lambda c: (c["tmp"].joinpath("t.json").write_text("{nope"),
               attn.BpeTokenizer.load(str(c["tmp"] / "t.json"))))
add("BpeTokenizer.load-surrogate-path", ValueError, "path|Unicode|UTF-8",
    lambda c: attn.BpeTokenizer.load("\ud800.json"))
add("BpeTokenizer.decode-negative", ValueError, "-1", lambda c: c["bpe"].decode([-1]))
add("BpeTokenizer.decode-past-vocab", ValueError, "1000000000",
    lambda c: c["bpe"].decode([10**9]))
add("BpeTokenizer.decode-string", TypeError, "these arguments", lambda c: c["bpe"].decode("abc"))
add("BpeTokenizer.decode-huge-id", TypeError, "these arguments",
    lambda c: c["bpe"].decode([2**70]))
add("BpeTokenizer.encode-None", TypeError, "text", lambda c: c["bpe"].encode(None))
add("BpeTokenizer.encode-number", TypeError, "text", lambda c: c["bpe"].encode(123))
add("BpeTokenizer.encode-surrogate", ValueError, "text|Unicode|UTF-8",
    lambda c: c["bpe"].encode("a\udc80b"))
add("BpeTokenizer.tokens-negative", ValueError, "-1", lambda c: c["bpe"].tokens([-1]))
add("BpeTokenizer.save-directory-missing", ValueError, "cannot|No such",
    lambda c: c["bpe"].save(str(c["tmp"] / "no" / "such" / "t.json")))
add("Gpt2Tokenizer.load-empty-dir", ValueError, "tokenizer|found",
    lambda c: attn.Gpt2Tokenizer.load(str(c["empty"])))
add("Gpt2Tokenizer.load-None", TypeError, "path must be a path",
    lambda c: attn.Gpt2Tokenizer.load(None))
add("Gpt2Tokenizer.special_id-None", TypeError, "these arguments",
    lambda c: c["gpt2_tokenizer"].special_id(None))
add("Gpt2Tokenizer.decode-past-vocab", ValueError, "50257|vocab",
    lambda c: c["gpt2_tokenizer"].decode([50257]))
add("train_bpe-vocab-negative", ValueError, "vocab_size",
    lambda c: attn.train_bpe("abc abc", vocab_size=-1))

# --- Gpt ---------------------------------------------------------------------------------------
add("Gpt.load-None", TypeError, "checkpoint must be a path|path must be a path",
    lambda c: attn.Gpt.load(None))
add("Gpt.load-missing", ValueError, "cannot open|No such file",
    lambda c: attn.Gpt.load(str(c["tmp"] / "missing.safetensors")))
add("Gpt.load-not-safetensors", ValueError, "safetensors|header|too short",
    lambda c: (c["tmp"].joinpath("bad.safetensors").write_bytes(b"\x01\x02"),
               attn.Gpt.load(str(c["tmp"] / "bad.safetensors"))))
add("Gpt.load-weights-dtype", ValueError, "weights",
    lambda c: attn.Gpt.load(str(c["tmp"] / "missing.safetensors"), weights="f64"))
add("Gpt.from_hf-empty-dir", ValueError, "config.json",
    lambda c: attn.Gpt.from_hf(str(c["empty"])))
add("Gpt.from_hf-None", TypeError, "must be a path", lambda c: attn.Gpt.from_hf(None))
add("Gpt.logits-empty", ValueError, "ids|empty", lambda c: c["gpt"].logits([]))
add("Gpt.logits-negative-id", ValueError, "-1", lambda c: c["gpt"].logits([1, -1]))
add("Gpt.logits-id-past-vocab", ValueError, "50257", lambda c: c["gpt"].logits([50257]))
add("Gpt.logits-batch-zero", ValueError, "batch", lambda c: c["gpt"].logits([1, 2], batch=0))
add("Gpt.logits-batch-negative", ValueError, "batch", lambda c: c["gpt"].logits([1, 2], batch=-2))
add("Gpt.logits-batch-not-dividing", ValueError, "batch", lambda c: c["gpt"].logits([1, 2, 3], batch=2))
add("Gpt.logits-past-block", ValueError, "block_size|16",
    lambda c: c["gpt"].logits(list(range(17))))
add("Gpt.logits-ids-string", TypeError, "these arguments", lambda c: c["gpt"].logits("hello"))
add("Gpt.logits-ids-floats", TypeError, "these arguments", lambda c: c["gpt"].logits([1.5]))
add("Gpt.attention_weights-empty", ValueError, "ids|empty",
    lambda c: c["gpt"].attention_weights([]))
add("Gpt.generate-max-new-negative", ValueError, "max_new_tokens",
    lambda c: "".join(c["gpt"].generate("a", max_new_tokens=-1)))
add("Gpt.generate-temperature-nan", ValueError, "temperature",
    lambda c: "".join(c["gpt"].generate("a", temperature=math.nan)))
add("Gpt.generate-temperature-negative", ValueError, "temperature",
    lambda c: "".join(c["gpt"].generate("a", temperature=-1.0)))
add("Gpt.generate-top_k-negative", ValueError, "top_k",
    lambda c: "".join(c["gpt"].generate("a", top_k=-1)))
add("Gpt.generate-top_p-above-one", ValueError, "top_p",
    lambda c: "".join(c["gpt"].generate("a", top_p=2.0)))
add("Gpt.generate-prompt-number", TypeError, "prompt|these arguments",
    lambda c: "".join(c["gpt"].generate(123)))
add("Gpt.encode-None", TypeError, "text", lambda c: c["gpt"].encode(None))

# --- attn.train ---------------------------------------------------------------------------------
for name, kwargs, match in (
        ("max_iters-negative", dict(max_iters=-1), "max_iters"),
        ("n_layer-negative", dict(n_layer=-1), "n_layer"),
        ("n_embd-not-dividing", dict(n_embd=30, n_head=4), "n_embd"),
        ("lr-nan", dict(lr=math.nan), "lr"),
        ("lr-string", dict(lr="fast"), "lr"),
        ("dropout-above-one", dict(dropout=1.5), "dropout"),
        ("block_size-zero", dict(block_size=0), "block_size"),
        ("positions-unknown", dict(positions="alibi"), "positions"),
        ("precision-unknown", dict(precision="f8"), "precision"),
        ("unknown-setting", dict(n_layers=2), "unexpected keyword argument 'n_layers'"),
        ("min_lr-above-lr", dict(lr=1e-4, min_lr=1e-3), "min_lr"),
        ("resume-without-out", dict(resume=True), "resume")):
    add(f"train-{name}", TypeError if name in ("lr-string", "unknown-setting") else ValueError,
        match,
        lambda c, kwargs=kwargs: attn.train("to be or not to be " * 50, **kwargs))
add("train-corpus-missing-file", ValueError, "cannot open|No such|empty",
    lambda c: attn.train(c["tmp"] / "missing.txt", max_iters=1))
add("train-corpus-None", TypeError, "corpus", lambda c: attn.train(None))
add("train-empty-corpus", ValueError, "empty", lambda c: attn.train("", max_iters=1))
add("train-out-is-a-file", ValueError, "out|directory|not a",
    lambda c: (c["tmp"].joinpath("file").write_text("x"),
               attn.train("abc " * 100, out=c["tmp"] / "file", max_iters=1)))


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    rng = np.random.default_rng(42)
    tmp = tmp_path_factory.mktemp("bad_inputs")
    q, k, v = (rng.standard_normal((1, 2, 6, 4), dtype=np.float32) for _ in range(3))
    out, lse = attn.sdpa(q, k, v, causal=True, return_lse=True)
    model_dir = tmp / "gpt2"
    model_dir.mkdir()
    gpt2_files.write_gpt2_dir(model_dir, gpt2_files.random_gpt2(6, layers=1, embd=16,
                                                                positions=16), heads=2)
    (tmp / "empty").mkdir()
    return {
        "q": q, "k": k, "v": v, "out": out, "lse": lse,
        "big": rng.standard_normal((4, 8, 64, 64), dtype=np.float32),  # 131 072 numbers
        "x": rng.standard_normal((1, 3, 8), dtype=np.float32),
        "w": rng.standard_normal((8, 8), dtype=np.float32),
        "b": rng.standard_normal(8, dtype=np.float32),
        "layer": attn.MultiHeadAttention(8, 2, seed=1),
        "fresh_layer": attn.MultiHeadAttention(8, 2, seed=2),
        "bpe": attn.BpeTokenizer.train("the cat sat on the mat " * 20, vocab_size=300),
        "gpt2_tokenizer": attn.Gpt2Tokenizer.load(model_dir),
        "gpt": attn.Gpt.from_hf(model_dir),
        "tmp": tmp,
        "empty": tmp / "empty",
    }


def test_the_table_holds_at_least_150_cases():
    assert len(CASES) >= 150
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("call,error,match", CASES)
def test_a_bad_input_is_one_named_error(ctx, call, error, match):
    with pytest.raises(error, match=match) as raised:
        call(ctx)
    message = str(raised.value)
    assert len(message) <= MAX_MESSAGE, message[:300]
    assert "Invoked with" not in message
    assert "incompatible function arguments" not in message
