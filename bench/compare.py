"""Side by side: attn's fused attention against PyTorch 2 and numpy, same shapes, same run.

Run with scripts/bootstrap --python's venv (PyTorch 2.13, numpy 2 with its OpenBLAS), after
`make build`:  build/venv/bin/python bench/compare.py

For each sequence length and thread count it times
  - attn:  `build/release/attn bench forward --json` (the fused kernel), and with --block the
           whole multi-head block (QKV projection, attention, output projection);
  - torch: F.scaled_dot_product_attention (PyTorch's fused flash CPU kernel), and with --block
           torch.nn.MultiheadAttention (which calls the same kernel);
  - numpy: the textbook formula softmax(q·kᵀ·s + causal mask)·v (float32, OpenBLAS);
with --backward, the backward pass alone: `attn bench backward --json` against PyTorch
autograd's backward of the same call (q, k, v requiring gradients; the forward is run once,
outside the timing, and its graph kept), or with --block of torch.nn.MultiheadAttention
against MultiHeadAttention::backward; and prints the milliseconds and attn's speed-up over
each. Medians of --runs runs after a warm-up. Each framework runs in a process of its own with
OMP_NUM_THREADS and OPENBLAS_NUM_THREADS set to the thread count: in one process, PyTorch's
OpenMP workers keep spinning after each call and slowed numpy's OpenBLAS several-fold, which
would time the wrong thing. For the baselines OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset,
so that OpenBLAS runs the kernel it picks for this CPU; this environment sets them for old
OpenBLAS builds, and they slow a current one. numpy is skipped past --max-seq-numpy: it builds
T×T matrices (2.3 GiB per head batch at T = 4096) and takes seconds per run.
(bench/compare_torch.py sets attn.torch and PyTorch side by side in one process instead.)
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


def attn_decode_ms(binary, length, args, threads):
    command = [binary, "bench", "decode", "--cache", str(length), "--heads", str(args.heads),
               "--head-dim", str(args.head_dim), "--threads", str(threads), "--runs", "20", "--json"]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["us"] / 1e3


def attn_ms(binary, seq, args, threads, block):
    command = [binary, "bench", "backward" if args.backward else "forward", "--seq", str(seq), "--heads", str(args.heads),
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
    """One head at a time with 2-D products: numpy's stacked matmul over a swapped-axes view
    skips BLAS (3 GFLOP/s here), which would make numpy look slower than it can be."""
    scale = np.float32(1.0 / math.sqrt(q.shape[-1]))
    bias = causal_bias(q.shape[-2]) if causal else None
    out = np.empty_like(q)
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            s = (q[b, h] @ k[b, h].T) * scale
            if bias is not None:
                s += bias
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            out[b, h] = (s / s.sum(axis=-1, keepdims=True)) @ v[b, h]
    return out


def torch_attention(torch, q, k, v, causal):
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def torch_backward_step(torch, rng, args, seq):
    """A function that runs PyTorch's backward of one attention (or --block) forward, whose
    graph is built once here and kept (retain_graph) so that only the backward is timed."""
    h, d = args.heads, args.head_dim

    def randn(*shape):
        return torch.from_numpy(rng.standard_normal(shape, dtype=np.float32))

    if args.block:
        mha = torch.nn.MultiheadAttention(h * d, h, bias=False, batch_first=True)
        x = randn(1, seq, h * d).requires_grad_()
        mask = torch.ones(seq, seq, dtype=torch.bool).triu(1) if args.causal else None
        out = mha(x, x, x, attn_mask=mask, need_weights=False)[0]
        leaves = [x] + list(mha.parameters())
    else:
        q, k, v = (randn(1, h, seq, d).requires_grad_() for _ in range(3))
        out = torch_attention(torch, q, k, v, args.causal)
        leaves = [q, k, v]
    grad = randn(*out.shape)

    def step():
        for leaf in leaves:
            leaf.grad = None
        out.backward(grad, retain_graph=True)
    return step


def baseline_env(threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    return env


def blas_core():
    """The BLAS numpy was built with, as numpy reports it."""
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except (TypeError, KeyError):  # numpy < 1.26 has no mode="dicts"
        return "unknown"


def measure(framework, seq, args, threads):
    """Milliseconds of one framework on one shape, in a fresh process with its thread count."""
    env = baseline_env(threads)
    command = [sys.executable, __file__, "--worker", framework, "--seq", str(seq),
               "--threads", str(threads), "--heads", str(args.heads), "--head-dim", str(args.head_dim),
               "--runs", str(args.runs)]
    if args.causal:
        command.append("--causal")
    if args.block:
        command.append("--block")
    if args.decode:
        command.append("--decode")
    if args.backward:
        command.append("--backward")
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
    return float(out.strip().splitlines()[-1])


def worker(args):
    """Times one framework on one shape and prints the median milliseconds."""
    seq, h, d, threads = int(args.seq), args.heads, args.head_dim, int(args.threads)
    rng = np.random.default_rng(seq)
    if args.decode:  # one new query per head against a cache of `seq` positions
        import torch
        torch.set_num_threads(threads)
        q = torch.from_numpy(rng.standard_normal((1, h, 1, d), dtype=np.float32))
        k, v = (torch.from_numpy(rng.standard_normal((1, h, seq, d), dtype=np.float32)) for _ in range(2))
        with torch.no_grad():  # one query row: no mask (is_causal would align it top-left)
            print(median_ms(lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v),
                            args.runs))
        return
    if args.worker == "numpy":
        q, k, v = (rng.standard_normal((1, h, seq, d), dtype=np.float32) for _ in range(3))
        print(median_ms(lambda: numpy_attention(q, k, v, args.causal), args.runs))
        return
    import torch
    torch.set_num_threads(threads)
    if args.backward:
        print(median_ms(torch_backward_step(torch, rng, args, seq), args.runs))
        return
    with torch.no_grad():
        if args.block:
            mha = torch.nn.MultiheadAttention(h * d, h, bias=False, batch_first=True)
            x = torch.from_numpy(rng.standard_normal((1, seq, h * d), dtype=np.float32))
            mask = torch.ones(seq, seq, dtype=torch.bool).triu(1) if args.causal else None
            print(median_ms(lambda: mha(x, x, x, attn_mask=mask, need_weights=False), args.runs))
        else:
            q, k, v = (torch.from_numpy(rng.standard_normal((1, h, seq, d), dtype=np.float32)) for _ in range(3))
            print(median_ms(lambda: torch_attention(torch, q, k, v, args.causal), args.runs))


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
    parser.add_argument("--max-seq-torch", type=int, default=16384)
    parser.add_argument("--max-seq-numpy", type=int, default=2048)
    parser.add_argument("--attn", default=os.path.join(os.path.dirname(__file__), "..", "build", "release", "attn"))
    parser.add_argument("--decode", action="store_true",
                        help="one decode step: --seq is the cache length; attn bench decode vs torch")
    parser.add_argument("--backward", action="store_true",
                        help="the backward pass: attn bench backward vs PyTorch autograd")
    parser.add_argument("--worker", choices=["torch", "numpy"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    try:
        import torch
    except ImportError:
        sys.exit("compare.py needs PyTorch: run it with build/venv/bin/python "
                 "(scripts/bootstrap --python)")

    h, d = args.heads, args.head_dim
    what = "decode step (seq = cache length)" if args.decode else "multi-head block" if args.block else "attention"
    if args.backward:
        what += " backward"
    print(f"{what}: B=1 H={h} d={d} {'causal' if args.causal else 'non-causal'}; "
          f"PyTorch {torch.__version__}, numpy {np.__version__}, BLAS {blas_core()}; "
          f"median of {args.runs} runs")
    print(f"{'seq':>6} {'thr':>4} {'attn ms':>9} {'torch ms':>9} {'numpy ms':>9} {'vs torch':>9} {'vs numpy':>9}")
    for threads in [int(t) for t in args.threads.split(",")]:
        for seq in [int(s) for s in args.seq.split(",")]:
            if args.decode:
                ours = attn_decode_ms(args.attn, seq, args, threads)
                torch_ms = measure("torch", seq, args, threads)
            else:
                ours = attn_ms(args.attn, seq, args, threads, args.block)
                torch_ms = measure("torch", seq, args, threads) if seq <= args.max_seq_torch else None
            numpy_ms = None
            if seq <= args.max_seq_numpy and not (args.block or args.decode or args.backward):
                numpy_ms = measure("numpy", seq, args, threads)

            def fmt(x):
                return f"{x:9.1f}" if x is not None else f"{'-':>9}"

            def ratio(x):
                return f"{x / ours:8.1f}x" if x is not None else f"{'-':>9}"

            print(f"{seq:6d} {threads:4d} {ours:9.2f} {fmt(torch_ms)} {fmt(numpy_ms)} {ratio(torch_ms)} {ratio(numpy_ms)}",
                  flush=True)


if __name__ == "__main__":
    main()
