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


def test_tokenizers_shared_by_threads_give_one_thread_answers(tmp_path):
    corpus = (gpt2_files.FIXTURES.parents[1] / "README.md").read_text() * 3
    bpe = attn.BpeTokenizer.train(corpus, vocab_size=400, byte_level=True)
    gpt2_files.write_gpt2_dir(tmp_path, gpt2_files.random_gpt2(4, layers=1, embd=16,
                                                               positions=16), heads=2)
    gpt2 = attn.Gpt2Tokenizer.load(tmp_path)
    texts = [corpus[i * 997:i * 997 + n] for i, n in enumerate((0, 1, 50, 700, 3000))]
    tasks = []
    for tokenizer in (bpe, gpt2):
        ids = [tokenizer.encode(t) for t in texts]
        batch = tokenizer.encode_batch(texts)
        shown = [tokenizer.tokens(i) for i in ids]
        for i in range(300):
            j = i % len(texts)
            kind = (i // len(texts)) % 5
            if kind == 0:
                tasks.append(("encode", lambda t=tokenizer, j=j, ids=ids: t.encode(texts[j]) == ids[j]))
            elif kind == 1:
                tasks.append(("encode_parallel", lambda t=tokenizer, j=j, ids=ids:
                              t.encode_parallel(texts[j]) == ids[j]))
            elif kind == 2:
                tasks.append(("encode_batch", lambda t=tokenizer, b=batch: t.encode_batch(texts) == b))
            elif kind == 3:
                tasks.append(("decode", lambda t=tokenizer, j=j, ids=ids: t.decode(ids[j]) == texts[j]))
            else:
                tasks.append(("tokens", lambda t=tokenizer, j=j, ids=ids, s=shown:
                              t.tokens(ids[j]) == s[j]))
    wrong, calls = run_on_threads(tasks)
    assert calls == len(tasks) == 600
    assert wrong == []


def test_embeddings_shared_by_threads_give_one_thread_answers():
    embedding = attn.TokenEmbedding(97, 24, seed=3)
    positions = attn.PositionalEncoding(128, 24)
    rng = np.random.default_rng(9)
    ids = [rng.integers(0, 97, size=n).tolist() for n in (1, 9, 128)]
    rows = [embedding(i) for i in ids]
    table = [positions.forward(n) for n in (1, 9, 128)]
    added = [positions.add_to(r) for r in rows]
    tasks = []
    for i in range(900):
        j = i % 3
        if i % 3 == 0:
            tasks.append(("embedding", lambda j=j: np.array_equal(embedding(ids[j]), rows[j])))
        elif i % 3 == 1:
            tasks.append(("positions", lambda j=j: np.array_equal(
                positions.forward((1, 9, 128)[j]), table[j])))
        else:
            tasks.append(("add_to", lambda j=j: np.array_equal(positions.add_to(rows[j]),
                                                               added[j])))
    wrong, calls = run_on_threads(tasks)
    assert calls == len(tasks)
    assert wrong == []


def test_the_functions_called_from_threads_give_one_thread_answers():
    rng = np.random.default_rng(10)
    q, k, v = (rng.standard_normal((2, 4, 37, 16), dtype=np.float32) for _ in range(3))
    x = rng.standard_normal((2, 21, 32), dtype=np.float32)
    w = [rng.standard_normal((32, 32), dtype=np.float32) / 6 for _ in range(4)]
    out, lse = attn.sdpa(q, k, v, causal=True, return_lse=True)
    d_out = rng.standard_normal(out.shape, dtype=np.float32)
    calls = {
        "sdpa": lambda: attn.sdpa(q, k, v, causal=True),
        "sdpa weights": lambda: attn.sdpa(q, k, v, window=5, return_weights=True)[1],
        "sdpa_backward": lambda: np.concatenate(
            attn.sdpa_backward(q, k, v, out, lse, d_out, causal=True)),
        "scaled_dot_product_attention": lambda: attn.scaled_dot_product_attention(
            q, k, v, is_causal=True),
        "reference.sdpa": lambda: attn.reference.sdpa(q, k, v, causal=True)[0],
        "multi_head_attention": lambda: attn.multi_head_attention(x, *w, n_heads=4, causal=True),
        "split_heads": lambda: attn.merge_heads(attn.split_heads(x, 4)),
    }
    alone = {name: call() for name, call in calls.items()}
    names = list(calls)
    tasks = [(names[i % len(names)], lambda n=names[i % len(names)]:
              np.array_equal(calls[n](), alone[n])) for i in range(700)]
    wrong, calls_made = run_on_threads(tasks)
    assert calls_made == len(tasks)
    assert wrong == []


def test_a_cache_decoded_into_from_two_threads_is_refused_never_interleaved():
    layer = attn.MultiHeadAttention(32, 4, seed=4)
    rng = np.random.default_rng(11)
    step = rng.standard_normal((1, 1, 32)).astype(np.float32)
    prompt = rng.standard_normal((1, 300, 32)).astype(np.float32)
    steps = 400
    cache = layer.make_cache(1, 300 + THREADS * steps)
    layer.decode(prompt, cache)  # a long cache makes each step long enough to overlap
    done, refused = [], []
    start = threading.Barrier(THREADS)

    def decode_steps():
        start.wait()
        for _ in range(steps):
            try:
                layer.decode(step, cache)
                done.append(1)
            except ValueError as e:
                assert "another thread is decoding into this cache" in str(e)
                refused.append(1)
            try:
                cache.position  # noqa: B018  (reads race a decode: refused the same way)
            except ValueError as e:
                assert "another thread" in str(e)

    threads = [threading.Thread(target=decode_steps) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(done) + len(refused) == THREADS * steps
    assert refused, "no decode overlapped another: the test proves nothing"
    # Every decode that ran appended exactly its one position: none was lost or doubled.
    assert cache.position == 300 + len(done)
