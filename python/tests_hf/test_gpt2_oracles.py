"""transformers and tiktoken as the oracles of attn's GPT-2: the tokenizer's ids against tiktoken's
and GPT2TokenizerFast's on fresh random text; Gpt.from_hf and `attn generate --model` on a random
GPT2LMHeadModel written by save_pretrained; and the reverse, `attn export --hf` of a run trained
by attn loaded by GPT2LMHeadModel.from_pretrained. Nothing is downloaded: GPT-2's tokenizer files
are tests/fixtures/gpt2's (tiktoken checks their SHA-256 sums), the models are random."""
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

import attn

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
GPT2_FILES = FIXTURES / "gpt2"
sys.path.insert(0, str(FIXTURES))
from gpt2_oracles import gpt2_oracles  # noqa: E402

CLI = os.environ.get("ATTN_CLI")
needs_cli = pytest.mark.skipif(CLI is None, reason="needs the attn CLI (ctest sets ATTN_CLI)")


@pytest.fixture(scope="module")
def oracles():
    return gpt2_oracles(GPT2_FILES)


def random_texts(count, seed):
    """Strings of up to 40 characters: from any plane of Unicode (surrogates excepted), or from a
    pool of the classes GPT-2's pattern tells apart, whitespace of every kind among them."""
    rng = random.Random(seed)
    pool = list("aZ9 \t\n\r\x0b\x0c\x85\xa0\u1680\u2000\u2028\u3000\ufeff'.,!?-_é中😀"
                "\u0301٣½Ⅻ") + ["'s", "'ll", "<|endoftext|>", "  ", "\n\n"]

    def any_character():
        while True:
            code_point = rng.randrange(0x110000)
            if not 0xD800 <= code_point <= 0xDFFF:
                return chr(code_point)

    texts = []
    for i in range(count):
        length = rng.randrange(40)
        pick = any_character if i % 2 else (lambda: rng.choice(pool))
        texts.append("".join(pick() for _ in range(length)))
    return texts


def test_tokenizer_gives_tiktokens_and_gpt2_tokenizer_fasts_ids(oracles):
    ours = attn.Gpt2Tokenizer.load(GPT2_FILES)
    texts = random_texts(3000, seed=44)
    want = [oracles.encode(text) for text in texts]  # raises where the two oracles disagree
    assert ours.encode_batch(texts) == want
    for text, ids in zip(texts, want):
        assert ours.decode(ids) == text


def test_tokenizer_json_of_transformers_reads_back_to_the_same_ids(oracles, tmp_path):
    oracles.fast.save_pretrained(tmp_path)
    for other in ("vocab.json", "merges.txt"):  # transformers 5 writes tokenizer.json alone
        (tmp_path / other).unlink(missing_ok=True)
    ours = attn.Gpt2Tokenizer.load(tmp_path)
    texts = random_texts(300, seed=45)
    assert ours.encode_batch(texts) == [oracles.encode(text) for text in texts]


@pytest.fixture(scope="module")
def hf_gpt2(tmp_path_factory):
    """A random GPT-2 (2 layers, width 64, GPT-2's vocabulary) saved by transformers."""
    path = tmp_path_factory.mktemp("hf_gpt2")
    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=128)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # GPT-2's initialisation leaves biases 0 and norms 1: move them too
        for name, parameter in model.named_parameters():
            if name.endswith(".bias") or ".ln_" in name or "ln_f" in name:
                parameter.add_(0.1 * torch.randn_like(parameter))
    model.save_pretrained(path, safe_serialization=True)
    GPT2TokenizerFast(vocab=str(GPT2_FILES / "encoder.json"),
                      merges=str(GPT2_FILES / "vocab.bpe")).save_pretrained(path)
    return path, model


def transformers_greedy(model, ids, count):
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=count, min_new_tokens=count,
                             do_sample=False, pad_token_id=50256)
    return out[0, len(ids):].tolist()


def test_from_hf_gives_transformers_logits_and_greedy_tokens(hf_gpt2):
    path, model = hf_gpt2
    ours = attn.Gpt.from_hf(path)
    ids = ours.encode("Hello world, said the random model to the tokenizer")
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits[0].numpy()
    got = ours.logits(ids)[0]
    assert np.abs(got - theirs).max() <= 1e-4 * np.abs(theirs).max()
    # 24 greedy tokens, one piece of bytes per token, against transformers' generate().
    want = transformers_greedy(model, ids, 24)
    pieces = list(ours._generate_bytes("Hello world, said the random model to the tokenizer", 24,
                                       0.0, 0, 1.0, 0, True))
    assert pieces == [ours.decode([i]) for i in want]


@needs_cli
def test_attn_generate_model_prints_transformers_greedy_text(hf_gpt2):
    path, model = hf_gpt2
    prompt = "The oracle"
    ids = attn.Gpt.from_hf(path).encode(prompt)
    want = GPT2TokenizerFast.from_pretrained(path).decode(transformers_greedy(model, ids, 16))
    printed = subprocess.run([CLI, "generate", "--model", str(path), "--prompt", prompt,
                              "--max-new-tokens", "16", "--temperature", "0"],
                             check=True, capture_output=True).stdout.decode("utf-8", "replace")
    assert printed == prompt + want + "\n"


@needs_cli
def test_export_hf_of_an_attn_run_loads_in_transformers(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"naïve words, {i}  of  a café\n" for i in range(200)),
                      encoding="utf-8")
    run, exported = tmp_path / "run", tmp_path / "hf"
    subprocess.run([CLI, "train", "--corpus", str(corpus), "--out", str(run), "--tokenizer", "bpe",
                    "--vocab-size", "300", "--n-layer", "2", "--n-head", "2", "--n-embd", "32",
                    "--block-size", "32", "--batch-size", "4", "--max-iters", "20",
                    "--eval-interval", "10", "--eval-iters", "1", "--threads", "1"],
                   check=True, capture_output=True)
    subprocess.run([CLI, "export", "--hf", str(exported), "--checkpoint", str(run)], check=True,
                   capture_output=True)
    ours = attn.Gpt.load(run)
    model = GPT2LMHeadModel.from_pretrained(exported).eval()
    assert model.config.eos_token_id is None  # the run's tokenizer has no <|endoftext|>
    # AutoTokenizer must read tokenizer.json as written (attn's word split, not GPT-2's).
    tokenizer = AutoTokenizer.from_pretrained(exported)
    text = "naïve words, 17  of  a"
    ids = ours.encode(text)
    assert tokenizer(text)["input_ids"] == ids
    with torch.no_grad():
        theirs = model(torch.tensor([ids])).logits[0].numpy()
    got = ours.logits(ids)[0]
    assert np.abs(got - theirs).max() <= 1e-4 * np.abs(theirs).max()
    pieces = list(ours._generate_bytes(text, 12, 0.0, 0, 1.0, 0, True))
    assert pieces == [ours.decode([i]) for i in transformers_greedy(model, ids, 12)]
