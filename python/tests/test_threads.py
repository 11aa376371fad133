"""Objects shared between Python threads. attn releases the GIL in every call, so threads run
their calls at once: one Gpt or one MultiHeadAttention called from several threads must give
each call, bit for bit, the answer one thread alone gets."""
import threading

import numpy as np

import attn
import gpt2_files

THREADS = 4


def run_on_threads(tasks):
    """Runs the callables of `tasks` spread over THREADS threads started together; returns the
    descriptions of the calls whose result differed from the one-thread answer, and the count
    of calls made."""
    start = threading.Barrier(THREADS)
    wrong, done = [], []

    def worker(share):
        start.wait()
        for name, call in share:
            if not call():
                wrong.append(name)
            done.append(name)

    threads = [threading.Thread(target=worker, args=(tasks[i::THREADS],)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return wrong, len(done)


def test_one_gpt_shared_by_threads_gives_one_thread_answers(tmp_path):
    weights = gpt2_files.random_gpt2(3, layers=2, embd=32, positions=64)
    gpt2_files.write_gpt2_dir(tmp_path, weights, heads=4)
    model = attn.Gpt.from_hf(tmp_path)
    rng = np.random.default_rng(5)
    prompts = [rng.integers(0, gpt2_files.VOCAB, size=n).tolist() for n in (1, 2, 7, 33, 60)]
    pair = rng.integers(0, gpt2_files.VOCAB, size=2 * 30).tolist()
    # What one thread gets.
    logits = [model.logits(p) for p in prompts]
    pair_logits = model.logits(pair, batch=2)
    short = prompts[:3]  # attention weights grow as T²
    weights = [model.attention_weights(p) for p in short]
    text = "".join(model.generate("Hello", max_new_tokens=6, seed=1))

    tasks = []
    for i in range(1200):
        kind, k = i % 6, i // 6
        if kind <= 2:
            j = k % len(prompts)
            tasks.append((f"logits T={len(prompts[j])}",
                          lambda j=j: np.array_equal(model.logits(prompts[j]), logits[j])))
        elif kind == 3:
            tasks.append(("logits batch=2",
                          lambda: np.array_equal(model.logits(pair, batch=2), pair_logits)))
        elif kind == 4:
            j = k % len(short)
            tasks.append((f"attention_weights T={len(short[j])}",
                          lambda j=j: np.array_equal(model.attention_weights(short[j]),
                                                     weights[j])))
        elif k % 8 == 0:  # generation is the dearest call: one in eight of its turns
            tasks.append(("generate", lambda: "".join(
                model.generate("Hello", max_new_tokens=6, seed=1)) == text))
    wrong, calls = run_on_threads(tasks)
    assert calls == len(tasks) >= 1000
    assert wrong == []


def test_one_attention_layer_shared_by_threads_gives_one_thread_answers():
    layer = attn.MultiHeadAttention(32, 4, n_kv_heads=2, bias=True, rope=True, seed=2)
    rng = np.random.default_rng(8)
    inputs = [rng.standard_normal((b, t, 32)).astype(np.float32)
              for b, t in ((1, 1), (2, 5), (1, 40), (3, 17))]
    alone = [layer.forward(x, causal=True) for x in inputs]
    decoded = []
    for x in inputs:
        cache = layer.make_cache(x.shape[0], 64)
        decoded.append(layer.decode(x, cache))

    def decode_matches(j):
        cache = layer.make_cache(inputs[j].shape[0], 64)  # a cache per call: the caller's state
        return np.array_equal(layer.decode(inputs[j], cache), decoded[j])

    dx_alone = []
    for x in inputs:
        layer.forward(x, causal=True)
        dx_alone.append(layer.backward(np.ones_like(x))["dx"])

    def forward_and_backward_run(j):
        y = layer.forward(inputs[j], causal=True)
        # backward pairs with the last forward to finish, of any thread: its gradient is the
        # one-thread gradient of some input of y's shape, or a clear error on another shape
        try:
            dx = layer.backward(np.ones_like(y))["dx"]
        except ValueError as e:
            return "d_y" in str(e)
        return np.array_equal(y, alone[j]) and any(
            np.array_equal(dx, d) for d in dx_alone if d.shape == dx.shape)

    tasks = []
    for i in range(1200):
        j = i % len(inputs)
        if i % 3 == 0:
            tasks.append((f"forward {inputs[j].shape}",
                          lambda j=j: np.array_equal(layer.forward(inputs[j], causal=True),
                                                     alone[j])))
        elif i % 3 == 1:
            tasks.append((f"decode {inputs[j].shape}", lambda j=j: decode_matches(j)))
        else:
            tasks.append((f"forward+backward {inputs[j].shape}",
                          lambda j=j: forward_and_backward_run(j)))
    wrong, calls = run_on_threads(tasks)
    assert calls == len(tasks)
    assert wrong == []
