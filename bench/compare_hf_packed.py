"""One training step of a Llama in transformers on a row of packed documents — DOCUMENTS
documents of mixed lengths laid end to end in one LENGTH-token row (4096), position_ids
restarting at each, as DataCollatorWithFlattening gives them — with its attention run by
attn_implementation="attn" (attn.hf: one varlen call over the row, causal within each
document) and by "sdpa" (PyTorch's scaled_dot_product_attention on the block-diagonal mask
transformers builds). The model is compare_hf_llama.py's (random weights from a config, nothing
downloaded), LAYERS of its 12 layers.

    build/venv/bin/python bench/compare_hf_packed.py [--length 4096] [--documents 8]
                                                      [--layers 12] [--runs 3]

Each figure is the fastest of --runs, the two implementations taking turns: the step (forward,
loss, backward), and the forward's time inside attention (the attention functions wrapped in a
clock). The model around attention is the same code for both, so the steps differ by attention's
forward and backward. The two must give the same loss and gradients (printed: the worst
gradient's relative difference).
"""
import argparse
import time

import torch_wait  # this script's folder

torch_wait.use_fastest()  # before torch loads its OpenMP runtime

import torch  # noqa: E402
import compare_hf_llama  # noqa: E402
from compare_hf_llama import (CONFIG, register_timed, same_weight_models,  # noqa: E402
                              use_every_core)

IMPLEMENTATIONS = ("attn", "sdpa")


def document_lengths(length, documents, generator):
    """documents lengths summing to length, each at least length / (4 · documents)."""
    least = max(1, length // (4 * documents))
    weights = torch.rand(documents, generator=generator) + 0.25
    lengths = (weights / weights.sum() * (length - least * documents)).floor().long() + least
    lengths[-1] += length - lengths.sum()
    return lengths.tolist()


def step(model, ids, positions):
    """(step s, attention s in the forward, loss)."""
    model.zero_grad(set_to_none=True)
    compare_hf_llama.attention_seconds = 0.0
    start = time.perf_counter()
    loss = model(input_ids=ids, position_ids=positions, labels=ids, use_cache=False).loss
    forward_attention = compare_hf_llama.attention_seconds
    loss.backward()
    return time.perf_counter() - start, forward_attention, loss.item()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--documents", type=int, default=8)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    register_timed()
    threads = use_every_core()
    config = dict(CONFIG, num_hidden_layers=args.layers,
                  max_position_embeddings=max(CONFIG["max_position_embeddings"], args.length))
    models = {name: model.train()
              for name, model in same_weight_models(config, IMPLEMENTATIONS).items()}
    generator = torch.Generator().manual_seed(1)
    lengths = document_lengths(args.length, args.documents, generator)
    ids = torch.randint(3, config["vocab_size"], (1, args.length), generator=generator)
    positions = torch.cat([torch.arange(n) for n in lengths])[None]
    best, losses = {}, {}
    for _ in range(args.runs):
        for name, model in models.items():
            seconds, attention, losses[name] = step(model, ids, positions)
            least = best.get(name, (seconds, attention))
            best[name] = (min(least[0], seconds), min(least[1], attention))
    gradients = [dict(m.named_parameters()) for m in models.values()]
    worst = max(((p.grad - gradients[1][n].grad).abs().max() /
                 gradients[1][n].grad.abs().max()).item() for n, p in gradients[0].items())
    print(f"Llama, {args.layers} layers of compare_hf_llama.py's, one {args.length}-token row of "
          f"{args.documents} documents ({', '.join(map(str, lengths))} tokens); one training "
          f"step; {threads} threads; PyTorch {torch.__version__}; fastest of {args.runs}; "
          f"CPU: {torch_wait.cpu_name()}; {torch_wait.described()}")
    print(f"loss: attn {losses['attn']:.6f}, sdpa {losses['sdpa']:.6f}; worst gradient "
          f"difference {worst:.1e} of the largest")
    print(f"{'attention':10} {'step s':>8} {'forward attention s':>20}")
    for name, (seconds, attention) in best.items():
        print(f"{name:10} {seconds:8.2f} {attention:20.3f}")
    print(f"step: attn {best['sdpa'][0] / best['attn'][0]:.2f}x faster; forward attention "
          f"{best['sdpa'][1] / best['attn'][1]:.1f}x")


if __name__ == "__main__":
    main()
