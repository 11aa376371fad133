"""The tokenizer, the heat map, and a checkpoint of `attn train` from Python and the CLI."""
import os
import subprocess

import numpy as np
import pytest

import attn

CORPUS = ("the quick brown fox jumps over the lazy dog\n"
          "the quick brown fox sleeps while the lazy dog barks\n") * 4


def test_bpe_round_trips_bytes_exactly(tmp_path):
    tok = attn.BpeTokenizer.train(CORPUS, vocab_size=300, byte_level=True)
    for text in (b"the fox", "über naïve — ✓ 🦊".encode(), bytes(range(256)), b"\xff\xfe invalid"):
        assert tok.decode_bytes(tok.encode(text)) == text
    assert tok.decode(tok.encode("the lazy dog")) == "the lazy dog"
    assert tok.encode_batch(["the fox", "a dog"]) == [tok.encode("the fox"), tok.encode("a dog")]
    long_text = (CORPUS + "\n") * 50
    assert tok.encode_parallel(long_text) == tok.encode(long_text)
    assert "".join(tok.tokens(tok.encode("the fox"))).replace("Ġ", " ") == "the fox"
    tok.save(tmp_path / "tok.json")
    again = attn.BpeTokenizer.load(tmp_path / "tok.json")
    assert again.encode("the quick fox") == tok.encode("the quick fox")
    assert again.vocab_size == tok.vocab_size


def test_train_from_a_list_and_a_file(tmp_path):
    (tmp_path / "c.txt").write_text(CORPUS)
    from_file = attn.BpeTokenizer.train(tmp_path / "c.txt", vocab_size=60)
    from_str = attn.BpeTokenizer.train(CORPUS, vocab_size=60)
    assert from_file.encode("the fox") == from_str.encode("the fox")
    assert attn.BpeTokenizer.train(CORPUS.splitlines(), vocab_size=60).vocab_size <= 60
    walk = attn.train_bpe(CORPUS, vocab_size=80, min_frequency=2)
    assert walk.decode(walk.encode("the lazy dog")) == "the lazy dog"
    with pytest.raises(TypeError):
        attn.BpeTokenizer.train(42)


def test_heatmap_draws_rows_and_labels():
    w = np.array([[1.0, 0.0], [0.5, 0.5]], np.float32)
    text = attn.heatmap(w, tokens=["a", "b"])
    assert "██" in text and "scale:" in text and text.splitlines()[-2].startswith("b")


def test_pictures_and_the_explorer_page():
    w = np.zeros((2, 3, 4, 4), np.float32)
    w[..., np.arange(4), np.arange(4)] = 1.0
    tokens = ["the", "cat", "<sat>", "on"]
    png = attn.heatmap_png(w, tokens=tokens, title="grid")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    svg = attn.heatmap_svg(w, tokens=tokens, title="grid").decode()
    assert f'width="{width}" height="{height}"' in svg
    assert ">layer 1 · head 2</text>" in svg and ">&lt;sat&gt;</text>" in svg
    page = attn.explorer_html(w, tokens, title="four tokens")
    assert page.startswith("<!DOCTYPE html>") and "<title>four tokens</title>" in page
    with pytest.raises(ValueError, match="3 tokens for 4 keys"):
        attn.explorer_html(w, tokens[:3])
    with pytest.raises(ValueError, match="scale"):
        attn.heatmap_png(w, scale="log")


@pytest.mark.skipif("ATTN_CLI" not in os.environ, reason="needs the attn CLI (ATTN_CLI)")
def test_a_trained_checkpoint_generates_the_cli_tokens(tmp_path):
    (tmp_path / "c.txt").write_text(CORPUS * 20)
    cli = os.environ["ATTN_CLI"]
    subprocess.run([cli, "train", "--corpus", str(tmp_path / "c.txt"), "--out", str(tmp_path / "run"),
                    "--n-layer", "1", "--n-embd", "16", "--n-head", "2", "--block-size", "16",
                    "--batch-size", "4", "--max-iters", "20", "--eval-interval", "20",
                    "--eval-iters", "1"], check=True, capture_output=True)
    model = attn.Gpt.load(tmp_path / "run")
    text = "".join(model.generate("the ", max_new_tokens=40, seed=5))
    cli_text = subprocess.run([cli, "generate", "--checkpoint", str(tmp_path / "run"), "--prompt",
                               "the ", "--max-new-tokens", "40", "--seed", "5"],
                              check=True, capture_output=True, text=True).stdout
    assert "the " + text + "\n" == cli_text
    logits = model.logits(model.encode("the fox"))
    assert logits.shape == (1, 7, model.vocab_size)
    weights = model.attention_weights(model.encode("the fox"))
    assert weights.shape == (1, 2, 7, 7)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-5)
    assert np.all(np.triu(weights, k=1) == 0)
    with pytest.raises(ValueError, match="temperature"):
        next(model.generate("the", temperature=-1))
    # bf16 weights: the same model within bf16's rounding, and its own tokens as the CLI's.
    half = attn.Gpt.load(tmp_path / "run", weights="bf16")
    assert (model.weights, half.weights) == ("f32", "bf16")
    np.testing.assert_allclose(half.logits(model.encode("the fox")), logits, atol=0.05 * np.abs(logits).max())
    half_text = "".join(half.generate("the ", max_new_tokens=40, seed=5))
    cli_half = subprocess.run([cli, "generate", "--checkpoint", str(tmp_path / "run"), "--prompt",
                               "the ", "--max-new-tokens", "40", "--seed", "5", "--weights", "bf16"],
                              check=True, capture_output=True, text=True).stdout
    assert "the " + half_text + "\n" == cli_half
    with pytest.raises(ValueError, match="weights must be"):
        attn.Gpt.load(tmp_path / "run", weights="f16")
    # A q8 KV cache: the CLI's tokens with the same flag; greedy, the float cache's tokens on
    # this small trained model.
    q8_text = "".join(model.generate("the ", max_new_tokens=40, seed=5, cache_dtype="q8"))
    cli_q8 = subprocess.run([cli, "generate", "--checkpoint", str(tmp_path / "run"), "--prompt",
                             "the ", "--max-new-tokens", "40", "--seed", "5", "--cache-dtype", "q8"],
                            check=True, capture_output=True, text=True).stdout
    assert "the " + q8_text + "\n" == cli_q8
    greedy = {dtype: "".join(model.generate("the ", max_new_tokens=40, top_k=1, cache_dtype=dtype))
              for dtype in ("f32", "q8")}
    assert greedy["q8"] == greedy["f32"]
    with pytest.raises(ValueError, match='cache_dtype must be "f32", "bf16" or "q8"'):
        next(model.generate("the", cache_dtype="int4"))


def test_errors_say_their_kind_argument_and_file(tmp_path):
    with pytest.raises(attn.Error) as missing:
        attn.Gpt.load(tmp_path / "nothing")
    assert missing.value.kind == "file"
    assert missing.value.file is not None and "nothing" in missing.value.file
    assert missing.value.argument is None
    with pytest.raises(attn.Error) as config:
        attn.train("some text for a corpus " * 50, n_embd=10, n_head=3, max_iters=1)
    assert config.value.kind == "invalid_argument"
    assert config.value.argument == "n_embd"
    assert config.value.file is None
    assert isinstance(config.value, ValueError)


def test_paths_and_text_that_are_not_are_clear_errors(tmp_path):
    for load in (attn.Gpt.load, attn.Gpt.from_hf, attn.BpeTokenizer.load, attn.Gpt2Tokenizer.load):
        with pytest.raises(TypeError, match="path must be a path \\(str or os.PathLike\\), got NoneType"):
            load(None)
    tok = attn.train_bpe("the cat sat on the mat " * 20, vocab_size=40)
    with pytest.raises(ValueError, match="text is not valid Unicode text: .*surrogates not allowed"):
        tok.encode("a\udcffb")
    with pytest.raises(ValueError, match="corpus is not valid Unicode text"):
        attn.train_bpe("abc\ud800", vocab_size=40)
    with pytest.raises(TypeError, match="out must be a path"):
        attn.train("some text " * 100, 42, max_iters=1)
