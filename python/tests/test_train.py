"""attn.train: the library's training run from Python — the same run as `attn train`, its
callbacks, Ctrl-C saving before KeyboardInterrupt, resume, and its bad arguments."""
import csv
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import attn

TEXT = "the cat sat on the mat. the dog sat on the log. the cat saw the dog.\n" * 30
TINY = dict(n_layer=1, n_head=2, n_embd=16, block_size=16, batch_size=2, eval_iters=1,
            warmup_iters=1)


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_run_calls_back_writes_its_files_and_returns_the_model(tmp_path):
    steps, evals = [], []
    model = attn.train(TEXT, tmp_path / "run", max_iters=5, eval_interval=2,
                       on_step=steps.append, on_eval=evals.append, **TINY)
    assert [s["iter"] for s in steps] == [0, 1, 2, 3, 4]
    assert all(s["seconds"] > 0 and np.isfinite(s["loss"]) for s in steps)
    assert [e["iter"] for e in evals] == [0, 2, 4, 5]
    assert evals[-1]["val_loss"] < evals[0]["val_loss"]
    metrics = rows(tmp_path / "run" / "metrics.csv")
    assert len(metrics) == 5 + 4
    assert [float(r["train_loss"]) for r in metrics if r["ms_per_iter"]] == pytest.approx(
        [s["loss"] for s in steps], rel=1e-5)
    # The returned model is the one the last checkpoint holds.
    ids = model.encode("the cat")
    saved = attn.Gpt.load(tmp_path / "run")
    assert np.array_equal(model.logits(ids), saved.logits(ids))
    assert "".join(model.generate("the ", max_new_tokens=8, seed=1)) == "".join(
        saved.generate("the ", max_new_tokens=8, seed=1))


@pytest.mark.skipif("ATTN_CLI" not in os.environ, reason="needs the attn CLI (ATTN_CLI)")
def test_the_same_settings_give_the_cli_run_bit_for_bit(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT)
    subprocess.run([os.environ["ATTN_CLI"], "train", "--corpus", str(corpus), "--out",
                    str(tmp_path / "cli"), "--n-layer", "1", "--n-head", "2", "--n-embd", "16",
                    "--block-size", "16", "--batch-size", "2", "--eval-iters", "1",
                    "--warmup-iters", "1", "--max-iters", "6", "--eval-interval", "3",
                    "--report-sample-tokens", "0"], check=True, capture_output=True)
    model = attn.train(corpus, tmp_path / "py", max_iters=6, eval_interval=3, **TINY)
    ids = model.encode("the dog saw")
    assert np.array_equal(model.logits(ids), attn.Gpt.load(tmp_path / "cli").logits(ids))
    losses = [[r["iter"], r["train_loss"], r["val_loss"]] for r in rows(tmp_path / "cli" /
                                                                        "metrics.csv")]
    assert [[r["iter"], r["train_loss"], r["val_loss"]]
            for r in rows(tmp_path / "py" / "metrics.csv")] == losses


def test_ctrl_c_in_a_callback_saves_and_the_resumed_run_is_the_whole_run(tmp_path):
    whole = attn.train(TEXT, tmp_path / "whole", max_iters=6, eval_interval=4, **TINY)

    def interrupt_after_step_2(step):
        if step["iter"] == 2:
            signal.raise_signal(signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        attn.train(TEXT, tmp_path / "parts", max_iters=6, eval_interval=4,
                   on_step=interrupt_after_step_2, **TINY)
    with pytest.raises(attn.Error, match="already holds a run; pass resume=True"):
        attn.train(TEXT, tmp_path / "parts", max_iters=6, **TINY)
    steps = []
    resumed = attn.train(TEXT, tmp_path / "parts", resume=True, on_step=steps.append)  # keeps 4
    assert [s["iter"] for s in steps] == [3, 4, 5]
    ids = whole.encode("the mat")
    assert np.array_equal(resumed.logits(ids), whole.logits(ids))
    assert [[r["iter"], r["train_loss"]] for r in rows(tmp_path / "parts" / "metrics.csv")] == [
        [r["iter"], r["train_loss"]] for r in rows(tmp_path / "whole" / "metrics.csv")]


def test_ctrl_c_during_a_step_saves_then_raises(tmp_path):
    """A real SIGINT to a process whose run is inside a step (the GIL released)."""
    script = textwrap.dedent(f"""
        import attn
        print("ready", flush=True)
        try:
            attn.train({TEXT!r}, {str(tmp_path / "run")!r}, max_iters=100000,
                       eval_interval=100000, n_layer=2, n_embd=64, block_size=64,
                       on_step=lambda s: s["iter"] == 0 and print("stepping", flush=True))
        except KeyboardInterrupt:
            print("interrupted", flush=True)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             env=os.environ)
    assert child.stdout.readline() == "ready\n"
    assert child.stdout.readline() == "stepping\n"
    time.sleep(0.5)
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == 0 and out == "interrupted\n"
    saved = attn.Gpt.load(tmp_path / "run")
    assert saved.block_size == 64


def test_an_exception_in_a_callback_ends_the_run(tmp_path):
    def fail(step):
        raise RuntimeError("from the callback")

    with pytest.raises(RuntimeError, match="from the callback"):
        attn.train(TEXT, max_iters=3, on_step=fail, **TINY)


def test_bf16_on_a_cpu_without_bf16_products_says_so():
    heard = []
    attn.train(TEXT, max_iters=1, precision="bf16", on_notice=heard.append, **TINY)
    assert all("no AVX-512 BF16, so the products run in float" in h for h in heard)
    if not attn.simd_target().startswith("AVX3"):  # no AVX-512 at all, so no BF16 products
        assert len(heard) == 1
    else:  # with or without AVX-512 BF16: C++'s training_run_test knows which
        assert len(heard) <= 1


def test_bad_arguments_are_clear_errors(tmp_path):
    with pytest.raises(TypeError, match="unexpected keyword argument 'n_layers'"):
        attn.train(TEXT, n_layers=2)
    with pytest.raises(TypeError, match="n_layer has the wrong type"):
        attn.train(TEXT, n_layer="two")
    with pytest.raises(attn.Error, match="n_embd .* must divide by n_head|n_embd"):
        attn.train(TEXT, n_embd=10, n_head=3, max_iters=1)
    with pytest.raises(attn.Error, match="eval_interval must be >= 1"):
        attn.train(TEXT, eval_interval=0)
    with pytest.raises(attn.Error, match="min_lr"):
        attn.train(TEXT, lr=1e-4, min_lr=1e-3)
    with pytest.raises(attn.Error, match="tokenizer must be 'char', 'bpe'"):
        attn.train(TEXT, tokenizer="words")
    with pytest.raises(attn.Error, match="needs the run's directory"):
        attn.train(TEXT, resume=True)
    with pytest.raises(attn.Error, match="has no checkpoint.safetensors"):
        attn.train(TEXT, tmp_path / "none", resume=True)
    attn.train(TEXT, tmp_path / "run", max_iters=1, **TINY)
    with pytest.raises(attn.Error, match="only max_iters, eval_iters and eval_interval"):
        attn.train(TEXT, tmp_path / "run", resume=True, n_layer=3)
    with pytest.raises(attn.Error, match="the corpus is empty"):
        attn.train("")
