"""attn.sdpa from Python next to the walk-through's numpy code and PyTorch 2's fused attention,
causal, B = 1, H = 16, d = 64, in one run; and the Python call's overhead against the same call
from C++ (`attn bench forward`, same shape, same run).

    PYTHONPATH=build/release/python build/venv/bin/python bench/compare_python.py [--threads 2]

numpy and PyTorch run in this process with their BLAS; a baseline is skipped (and says so)
where it would build T×T matrices too large for this machine. Times are medians of --runs.
"""
import argparse
import json
import os
import subprocess

import numpy as np

import attn
from compare import median_ms  # bench/compare.py: a warm-up, then the median of runs


def numpy_causal(q, k, v):
    """The walk-through's numpy attention: scores, tril mask, softmax, weighted sum."""
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    t = s.shape[-1]
    s = np.where(np.tril(np.ones((t, t), bool)), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return w @ v


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", default="64,256,1024,4096")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--cli", default="build/release/attn", help="attn CLI for the C++ timing")
    args = parser.parse_args()
    attn.set_num_threads(args.threads)
    print(f"attn {attn.__version__}, {args.threads} threads, causal, B=1, H=16, d=64")
    lengths = [int(x) for x in args.seq.split(",")]

    def inputs(t):
        rng = np.random.default_rng(t)
        return [rng.standard_normal((1, 16, t, 64), dtype=np.float32) for _ in range(3)]

    # attn first, before any baseline runs: PyTorch's OpenMP threads and OpenBLAS's keep
    # spinning after their calls, and attn's pool (rightly) stops using a core that is busy.
    ours, cpp = {}, {}
    for t in lengths:
        q, k, v = inputs(t)
        runs = args.runs if t > 256 else 50 * args.runs  # short calls: more samples
        ours[t] = median_ms(lambda: attn.sdpa(q, k, v, causal=True), runs)
        cpp[t] = float("nan")
        if os.path.exists(args.cli):
            out = subprocess.run([args.cli, "bench", "forward", "--seq", str(t), "--causal",
                                  "--threads", str(args.threads), "--runs", str(runs),
                                  "--json", "--reference-max-seq", "0"],
                                 capture_output=True, text=True, check=True).stdout
            cpp[t] = json.loads(out.strip().splitlines()[-1])["ms"]
    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
    print(f"{'T':>6} {'attn ms':>9} {'C++ ms':>8} {'py/C++':>7} {'numpy ms':>9} {'torch ms':>9}"
          f" {'vs numpy':>9} {'vs torch':>9}")
    for t in lengths:
        q, k, v = inputs(t)
        big = t > 4096  # numpy's T×T temporaries: 16 × T² floats, several of them
        ref = float("nan") if big else median_ms(lambda: numpy_causal(q, k, v), args.runs)
        tor = float("nan")
        if torch is not None:
            tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
            with torch.no_grad():
                tor = median_ms(lambda: torch.nn.functional.scaled_dot_product_attention(
                    tq, tk, tv, is_causal=True), args.runs)
        print(f"{t:>6} {ours[t]:>9.3f} {cpp[t]:>8.3f} {ours[t] / cpp[t]:>7.2f} {ref:>9.2f}"
              f" {tor:>9.2f} {ref / ours[t]:>8.1f}× {tor / ours[t]:>8.1f}×")


if __name__ == "__main__":
    main()
