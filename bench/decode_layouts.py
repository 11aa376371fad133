"""Decode steps through attn.torch on the three layouts a cache comes in: one query row (H 16,
d 64) against L keys (65536) on a contiguous (1, H, L, d) cache, on (1, H, L, d) views of packed
(1, L, H, d) rows, and on shuffled 256-token pages (varlen_attention with block_table); then two
sequences' steps in one packed batch (varlen_attention: L − 100 and L − 7 keys), in slots with
seqused_k and on pages. Each figure is the least of --calls calls; --rounds rounds in turn, in one
process.

    PYTHONPATH=build/release/python build/venv/bin/python bench/decode_layouts.py
        [--keys 65536] [--calls 9] [--rounds 3]
"""
import argparse
import time

import torch

import attn
import attn.torch as attn_torch
from torch_wait import cpu_name  # (bench/ is the script's folder)

HEADS, D, PAGE = 16, 64, 256


def least_ms(call, calls):
    best = float("inf")
    for _ in range(calls):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=65536)
    parser.add_argument("--calls", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    length = args.keys // PAGE * PAGE
    torch.manual_seed(0)
    query = torch.randn(1, HEADS, 1, D)
    contiguous = [torch.randn(1, HEADS, length, D) for _ in range(2)]
    packed = [torch.randn(1, length, HEADS, D).transpose(1, 2) for _ in range(2)]
    pages = [torch.randn(2 * length // PAGE, PAGE, HEADS, D) for _ in range(2)]
    one_table = torch.randperm(length // PAGE, dtype=torch.int32)[None]
    one_row = query[0].transpose(0, 1).contiguous()  # (1, H, d)
    one = torch.tensor([0, 1], dtype=torch.int32)
    # Two sequences in one packed batch, each in a slot of `length` rows or on its own pages.
    rows = [torch.randn(2 * length, HEADS, D) for _ in range(2)]
    two_rows = torch.randn(2, HEADS, D)
    two = torch.tensor([0, 1, 2], dtype=torch.int32)
    slots = torch.tensor([0, length, 2 * length], dtype=torch.int32)
    used = torch.tensor([length - 100, length - 7], dtype=torch.int32)
    two_tables = torch.randperm(2 * length // PAGE, dtype=torch.int32).reshape(2, -1)
    causal = (-1, 0)
    calls = {
        "contiguous": lambda: attn_torch.scaled_dot_product_attention(query, *contiguous),
        "packed rows": lambda: attn_torch.scaled_dot_product_attention(query, *packed),
        "pages": lambda: attn_torch.varlen_attention(
            one_row, *pages, one, None, 1, length, seqused_k=torch.tensor([length]),
            block_table=one_table),
        "2 in slots": lambda: attn_torch.varlen_attention(
            two_rows, *rows, two, slots, 1, length, window_size=causal, seqused_k=used),
        "2 on pages": lambda: attn_torch.varlen_attention(
            two_rows, *pages, two, None, 1, length, window_size=causal, seqused_k=used,
            block_table=two_tables),
    }
    print(f"decode steps, H {HEADS}, d {D}, {length} keys; {attn.get_num_threads()} threads; least "
          f"of {args.calls} calls (ms); CPU: {cpu_name()}")
    print("".join(f"{name:>13}" for name in calls))
    for _ in range(args.rounds):
        print("".join(f"{least_ms(call, args.calls):13.1f}" for call in calls.values()))


if __name__ == "__main__":
    main()
