"""attn in a forked child (multiprocessing's fork start method, a PyTorch DataLoader worker)
after the parent used it: only the forking thread exists in the child, so the library must
start its thread pool again there rather than post work to helpers that are gone (which
hung for good)."""
import multiprocessing
import os

import numpy as np

import attn
import gpt2_files

TEXT = "the cat sat on the mat. the dog sat on the log.\n" * 20


def every_kind_of_kernel(model_dir):
    """Runs each kind of parallel work once and returns a digest of the results."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 4, 200, 32)).astype(np.float32)
    out, lse = attn.sdpa(q, q, q, causal=True, return_lse=True)
    dq, _, _ = attn.sdpa_backward(q, q, q, out, lse, np.ones_like(out), causal=True)
    x = rng.standard_normal((2, 96, 64)).astype(np.float32)
    w = [rng.standard_normal((64, 64)).astype(np.float32) * 0.1 for _ in range(4)]
    y = attn.multi_head_attention(x, *w, n_heads=4)
    layer = attn.MultiHeadAttention(64, 4, seed=1)
    decoded = layer.decode(x[:1, :5], layer.make_cache(1, 16))
    model = attn.Gpt.from_hf(model_dir)
    logits = model.logits(list(range(40)))
    ids = attn.train_bpe(TEXT, vocab_size=60).encode_parallel(TEXT)
    trained = attn.train(TEXT, n_layer=1, n_head=2, n_embd=16, block_size=16, batch_size=4,
                         max_iters=2, eval_iters=1, warmup_iters=1)
    return [float(np.sum(a)) for a in (out, dq, y, decoded, logits, trained.logits([1, 2, 3]))] + [
        len(ids)]


def test_a_forked_child_runs_every_kernel_after_the_parent_did(tmp_path):
    weights = gpt2_files.random_gpt2(3, layers=1, embd=32, positions=64)
    gpt2_files.write_gpt2_dir(tmp_path, weights, heads=4)
    attn.set_num_threads(2)  # the pool running in the parent before the fork
    expected = every_kind_of_kernel(tmp_path)
    with multiprocessing.get_context("fork").Pool(2) as workers:
        results = [workers.apply_async(every_kind_of_kernel, (tmp_path,)) for _ in range(2)]
        got = [r.get(timeout=120) for r in results]  # a hang fails here instead of for ever
    assert got == [expected, expected]
    assert every_kind_of_kernel(tmp_path) == expected  # and the parent's pool still works


def test_a_child_forked_while_another_thread_runs_a_kernel_is_not_stuck(tmp_path):
    import threading
    stop = threading.Event()
    q = np.random.default_rng(1).standard_normal((1, 4, 512, 64)).astype(np.float32)

    def busy():
        while not stop.is_set():
            attn.sdpa(q, q, q, causal=True)

    thread = threading.Thread(target=busy)
    thread.start()
    try:
        for _ in range(5):
            pid = os.fork()
            if pid == 0:  # the child: a kernel, then out, within 30 s or SIGALRM
                import signal
                signal.alarm(30)
                attn.sdpa(q, q, q, causal=True)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    finally:
        stop.set()
        thread.join()
