"""GPT-2 from Python: its tokenizer against tiktoken's and GPT2TokenizerFast's ids, and Gpt.from_hf against
GPT-2's forward written out in numpy (float64) on a small model in Hugging Face's layout."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import attn

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
GPT2_FILES = FIXTURES / "gpt2"
import gpt2_files


def test_gpt2_tokenizer_gives_the_oracles_ids():
    tok = attn.Gpt2Tokenizer.load(GPT2_FILES)
    cases = json.loads((GPT2_FILES / "cases.json").read_text(encoding="utf-8"))
    assert len(cases) > 10
    for case in cases:
        assert tok.encode(case["text"]) == case["ids"], case["text"]
        assert tok.decode(case["ids"]) == case["text"]
    texts = [case["text"] for case in cases]
    assert tok.encode_batch(texts) == [case["ids"] for case in cases]
    assert tok.vocab_size == 50257
    assert tok.special_id("<|endoftext|>") == 50256
    assert tok.special_id("<|nope|>") is None
    assert tok.encode("Hello world<|endoftext|>") == [15496, 995, 50256]
    assert tok.tokens([15496, 995]) == ["Hello", "Ġworld"]
    assert tok.decode_bytes(tok.encode(b"\xff\xfe caf\xc3\xa9")) == b"\xff\xfe caf\xc3\xa9"
    # A megabyte of mixed scripts, emoji and whitespace, against the oracles' ids.
    text = (GPT2_FILES / "mixed_1mb.txt").read_bytes()
    want = np.fromfile(GPT2_FILES / "mixed_1mb.ids", dtype="<u2").tolist()
    assert tok.encode(text) == want
    for threads in (1, 2, 3):
        attn.set_num_threads(threads)
        assert tok.encode_parallel(text) == want, threads
    attn.set_num_threads(0)
    with pytest.raises(ValueError, match="vocabulary|tokenizer"):
        attn.Gpt2Tokenizer.load(Path(__file__).parent)
    with pytest.raises(TypeError, match="str or bytes"):
        tok.encode(7)


# ---- a small GPT-2 in Hugging Face's layout, and its forward in numpy ----------------------

LAYERS, HEADS, EMBD, POSITIONS, VOCAB = 2, 2, 8, 16, 50257


def random_gpt2(seed=7):
    return gpt2_files.random_gpt2(seed, LAYERS, EMBD, POSITIONS)


def layer_norm(x, w, b):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * w + b


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def gpt2_forward(w, ids):
    """Hugging Face's GPT2LMHeadModel forward, float64: the (T, vocab) logits of one sequence
    and every layer's attention weights (n_layer, n_head, T, T)."""
    w = {k: v.astype(np.float64) for k, v in w.items()}
    t, d = len(ids), EMBD // HEADS
    x = w["wte.weight"][ids] + w["wpe.weight"][:t]
    causal = np.triu(np.full((t, t), -np.inf), k=1)
    attention = []
    for i in range(LAYERS):
        p = lambda name: w[f"h.{i}.{name}"]
        h = layer_norm(x, p("ln_1.weight"), p("ln_1.bias"))
        q, k, v = np.split(h @ p("attn.c_attn.weight") + p("attn.c_attn.bias"), 3, axis=-1)
        heads = lambda m: m.reshape(t, HEADS, d).transpose(1, 0, 2)
        s = heads(q) @ heads(k).transpose(0, 2, 1) / np.sqrt(d) + causal
        e = np.exp(s - s.max(-1, keepdims=True))
        attention.append(e / e.sum(-1, keepdims=True))
        y = attention[-1] @ heads(v)
        x = x + y.transpose(1, 0, 2).reshape(t, EMBD) @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        h = layer_norm(x, p("ln_2.weight"), p("ln_2.bias"))
        h = gelu_new(h @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias"))
        x = x + h @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
    return layer_norm(x, w["ln_f.weight"], w["ln_f.bias"]) @ w["wte.weight"].T, np.stack(attention)


def gpt2_logits(w, ids):
    return gpt2_forward(w, ids)[0]


@pytest.fixture
def gpt2_dir(tmp_path):
    weights = random_gpt2()
    gpt2_files.write_gpt2_dir(tmp_path, weights, heads=HEADS)
    return tmp_path, weights


def test_from_hf_matches_gpt2s_forward_and_greedy_tokens(gpt2_dir):
    path, weights = gpt2_dir
    model = attn.Gpt.from_hf(path)
    assert (model.vocab_size, model.block_size, model.weights) == (VOCAB, POSITIONS, "f32")
    ids = model.encode("Hello world, hello")
    assert ids == [15496, 995, 11, 23748]
    expected = gpt2_logits(weights, ids)
    logits = model.logits(ids)
    assert logits.shape == (1, len(ids), VOCAB)
    # float32 sums over at most 4·EMBD terms of values of a few units: 1e-4 of the largest
    np.testing.assert_allclose(logits[0], expected, atol=1e-4 * np.abs(expected).max())
    np.testing.assert_allclose(model.attention_weights(ids), gpt2_forward(weights, ids)[1],
                               atol=1e-5)
    # Greedy continuation; without a prompt GPT-2 starts after <|endoftext|>.
    for prompt, start in [("Hello world, hello", ids), ("", [50256])]:
        tokens = list(start)
        for _ in range(5):
            tokens.append(int(np.argmax(gpt2_logits(weights, tokens)[-1])))
        text = "".join(model.generate(prompt, max_new_tokens=5, temperature=0))
        assert text == model.decode(tokens[len(start):]).decode("utf-8", "replace"), prompt
    half = attn.Gpt.from_hf(path, weights="bf16")
    assert half.weights == "bf16"
    np.testing.assert_allclose(half.logits(ids)[0], expected, atol=0.05 * np.abs(expected).max())


def test_from_hf_errors_name_the_file(gpt2_dir, tmp_path):
    path, _ = gpt2_dir
    with pytest.raises(ValueError, match=r"nowhere/config\.json: cannot open"):
        attn.Gpt.from_hf(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="weights must be"):
        attn.Gpt.from_hf(path, weights="f16")
    (path / "vocab.bpe").unlink()
    with pytest.raises(ValueError, match="vocab.bpe|merges|tokenizer"):
        attn.Gpt.from_hf(path)


@pytest.mark.skipif("ATTN_CLI" not in os.environ, reason="needs the attn CLI (ATTN_CLI)")
def test_from_hf_generates_what_attn_generate_model_prints(gpt2_dir):
    path, _ = gpt2_dir
    model = attn.Gpt.from_hf(path)
    for prompt in ("Hello world", ""):
        text = "".join(model.generate(prompt, max_new_tokens=12, seed=3))
        cli = subprocess.run([os.environ["ATTN_CLI"], "generate", "--model", str(path),
                              "--prompt", prompt, "--max-new-tokens", "12", "--seed", "3"],
                             check=True, capture_output=True, text=True).stdout
        assert prompt + text + "\n" == cli
