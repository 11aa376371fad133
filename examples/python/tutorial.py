#!/usr/bin/python3
"""Walk-through 3 against attn: text -> BPE tokens -> embeddings + positions -> causal
multi-head attention -> the heat map -> the invariance check.

    python3 examples/python/tutorial.py   (after the build; PYTHONPATH=build/release/python)
"""
import numpy as np

import attn

CORPUS = ("the quick brown fox jumps over the lazy dog\n"
          "the quick brown fox sleeps while the lazy dog barks\n"
          "a quick brown dog jumps over the quick brown fox\n")


def main():
    tokenizer = attn.train_bpe(CORPUS, vocab_size=80, min_frequency=2)
    ids = tokenizer.encode("the quick brown fox jumps")
    tokens = tokenizer.tokens(ids)
    print(len(ids), "tokens:", " ".join(tokens))
    assert tokenizer.decode(ids) == "the quick brown fox jumps"

    d_model, n_heads = 16, 4
    embedding = attn.TokenEmbedding(tokenizer.vocab_size, d_model, seed=7)
    x = attn.add_positional(embedding.forward(ids), attn.PositionalEncoding(64, d_model))
    rng = np.random.default_rng(7)
    w_q, w_k, w_v, w_o = (rng.standard_normal((d_model, d_model)).astype(np.float32) * 0.25
                          for _ in range(4))
    out, weights = attn.multi_head_attention(x, w_q, w_k, w_v, w_o, n_heads, return_weights=True,
                                             mask=attn.causal_mask(len(ids)))
    print("x", x.shape, "-> output", out.shape, "weights", weights.shape)
    print(attn.heatmap(weights[0], tokens=tokens))

    # Rows sum to 1 and nothing above the diagonal is attended.
    assert np.abs(weights.sum(-1) - 1).max() < 1e-5
    assert np.all(np.triu(weights[0], 1) == 0)
    # Changing every token but the first leaves output 0 exactly as it was.
    x2 = x.copy()
    x2[1:] += 1.0
    out2 = attn.multi_head_attention(x2, w_q, w_k, w_v, w_o, n_heads,
                                     mask=attn.causal_mask(len(ids)))
    assert np.array_equal(out[0], out2[0])
    print("output 0 is unchanged when tokens 1.. change: yes")


if __name__ == "__main__":
    main()
