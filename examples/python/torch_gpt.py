"""A small GPT in PyTorch whose attention is attn's: one line swaps
torch.nn.functional.scaled_dot_product_attention for attn.torch's, and the model trains the
same. Trains a character-level model for a few steps with each attention on the same data and
the same initial weights, and prints both loss curves.

  build/venv/bin/python examples/python/torch_gpt.py [--steps 40] [--corpus FILE]
  (PYTHONPATH=build/release/python, or attn installed in the venv by pip install .)
"""
import argparse
import math
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import attn.torch

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "README.md"


class Block(nn.Module):
    def __init__(self, width, heads, sdpa):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.ln_1, self.ln_2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * width, width))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for z in self.qkv(self.ln_1(x)).split(c, dim=2))
        y = self.sdpa(q, k, v, is_causal=True)  # the one line attn replaces
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln_2(x))


class Gpt(nn.Module):
    def __init__(self, vocab, block, layers, heads, width, sdpa):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(block, width)
        self.blocks = nn.ModuleList(Block(width, heads, sdpa) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        for table in (self.wte, self.wpe):
            nn.init.normal_(table.weight, std=0.02)  # GPT-2's: logits start near uniform

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x) @ self.wte.weight.T  # tied output layer


def train(sdpa, data, vocab, steps, seed=0):
    torch.manual_seed(seed)
    model = Gpt(vocab, block=64, layers=2, heads=4, width=64, sdpa=sdpa)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batches = torch.Generator().manual_seed(seed)
    losses = []
    for _ in range(steps):
        starts = torch.randint(0, len(data) - 65, (8,), generator=batches)
        x = torch.stack([data[s:s + 64] for s in starts])
        y = torch.stack([data[s + 1:s + 65] for s in starts])
        loss = F.cross_entropy(model(x).view(-1, vocab), y.view(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args()
    text = args.corpus.read_text(encoding="utf-8")
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text], dtype=torch.long)
    theirs = train(F.scaled_dot_product_attention, data, len(chars), args.steps)
    ours = train(attn.torch.scaled_dot_product_attention, data, len(chars), args.steps)
    print("step  PyTorch's attention  attn's attention")
    for i in range(0, args.steps, max(1, args.steps // 8)):
        print(f"{i + 1:4d}  {theirs[i]:19.4f}  {ours[i]:16.4f}")
    print(f"last  {theirs[-1]:19.4f}  {ours[-1]:16.4f}")
    # Same data and initial weights: the curves differ only by float rounding in attention.
    assert ours[-1] < ours[0] - 0.5, "attn's model did not learn"
    assert all(math.isclose(a, b, rel_tol=2e-2, abs_tol=2e-2) for a, b in zip(ours, theirs)), \
        "the two curves drifted apart"


if __name__ == "__main__":
    main()
