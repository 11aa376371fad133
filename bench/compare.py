#!/usr/bin/python3
"""Side by side: attn's fused attention against PyTorch and numpy, same shapes, same run.

Run with Debian's packages:  /usr/bin/python3 bench/compare.py  (after `make build`;
`scripts/bootstrap --bench` installs python3-torch and python3-numpy).

For each sequence length and thread count it times
  - attn:  `build/release/attn bench forward --json` (the fused kernel), and with --block the
           whole multi-head block (QKV projection, attention, output projection);
  - torch: the textbook formula softmax(q·kᵀ·s + causal mask)·v (PyTorch 1.13 has no fused
           CPU attention), and with --block torch.nn.MultiheadAttention;
  - numpy: the same textbook formula (float32, OpenBLAS);
and prints the milliseconds and attn's speed-up over each. Medians of --runs runs after a
warm-up. Large lengths are skipped for torch and numpy (--max-seq-torch, --max-seq-numpy):
they build T×T matrices (2.3 GiB per head batch at T = 4096) and take seconds per run.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import numpy as np


def median_ms(fn, runs):
    fn()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return times[len(times) // 2]


def attn_ms(binary, seq, args, threads, block):
    command = [binary, "bench", "forward", "--seq", str(seq), "--heads", str(args.heads),
               "--head-dim", str(args.head_dim), "--threads", str(threads), "--runs", str(args.runs),
               "--reference-max-seq", "0", "--json"]
    if args.causal:
        command.append("--causal")
    if block:
        command.append("--block")
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["ms"]


def causal_bias(t):
    return np.triu(np.full((t, t), -np.inf, dtype=np.float32), k=1)


def numpy_attention(q, k, v, causal):
    s = (q @ np.swapaxes(k, -1, -2)) * np.float32(1.0 / math.sqrt(q.shape[-1]))
    if causal:
        s = s + causal_bias(q.shape[-2])
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    return (s / s.sum(axis=-1, keepdims=True)) @ v


def torch_attention(torch, q, k, v, causal):
    s = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        t = q.shape[-2]
        s = s.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seq", default="256,512,1024,2048,4096")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--block", action="store_true",
                        help="the whole multi-head block vs torch.nn.MultiheadAttention")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-seq-torch", type=int, default=4096)
    parser.add_argument("--max-seq-numpy", type=int, default=2048)
    parser.add_argument("--attn", default=os.path.join(os.path.dirname(__file__), "..", "build", "release", "attn"))
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        sys.exit("compare.py needs Debian's python3-torch: scripts/bootstrap --bench")

    h, d = args.heads, args.head_dim
    what = "multi-head block" if args.block else "attention"
    print(f"{what}: B=1 H={h} d={d} {'causal' if args.causal else 'non-causal'}; "
          f"PyTorch {torch.__version__}, numpy {np.__version__}; median of {args.runs} runs")
    print(f"{'seq':>6} {'thr':>4} {'attn ms':>9} {'torch ms':>9} {'numpy ms':>9} {'vs torch':>9} {'vs numpy':>9}")
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        for seq in [int(s) for s in args.seq.split(",")]:
            ours = attn_ms(args.attn, seq, args, threads, args.block)
            rng = np.random.default_rng(seq)
            torch_ms = numpy_ms = None
            if seq <= args.max_seq_torch:
                with torch.no_grad():
                    if args.block:
                        mha = torch.nn.MultiheadAttention(h * d, h, bias=False, batch_first=True)
                        x = torch.from_numpy(rng.standard_normal((1, seq, h * d), dtype=np.float32))
                        mask = torch.ones(seq, seq, dtype=torch.bool).triu(1) if args.causal else None
                        torch_ms = median_ms(lambda: mha(x, x, x, attn_mask=mask, need_weights=False), args.runs)
                    else:
                        q, k, v = (torch.from_numpy(rng.standard_normal((1, h, seq, d), dtype=np.float32)) for _ in range(3))
                        torch_ms = median_ms(lambda: torch_attention(torch, q, k, v, args.causal), args.runs)
            if seq <= args.max_seq_numpy and not args.block:
                q, k, v = (rng.standard_normal((1, h, seq, d), dtype=np.float32) for _ in range(3))
                numpy_ms = median_ms(lambda: numpy_attention(q, k, v, args.causal), args.runs)

            def fmt(x):
                return f"{x:9.1f}" if x is not None else f"{'-':>9}"

            def ratio(x):
                return f"{x / ours:8.1f}x" if x is not None else f"{'-':>9}"

            print(f"{seq:6d} {threads:4d} {ours:9.2f} {fmt(torch_ms)} {fmt(numpy_ms)} {ratio(torch_ms)} {ratio(numpy_ms)}",
                  flush=True)


if __name__ == "__main__":
    main()
