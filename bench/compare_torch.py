"""attn.torch next to PyTorch 2's own scaled_dot_product_attention, in one run, on the same
tensors: forward, and forward + backward, causal and not, float32, B = 1, H = 16, d = 64
(--gqa: 32 query heads over 8 K/V heads, d = 128, causal).

  build/venv/bin/python bench/compare_torch.py [--seq 256,1024,4096] [--threads 2] [--runs 9]
                                               [--gqa]
  (with PYTHONPATH=build/release/python, or attn installed in the venv by pip install .)

Both sides run on the same thread count (torch.set_num_threads, attn.set_num_threads); the
calls alternate, attn first then PyTorch, and each figure is the median of --runs. The profiler
names the kernel PyTorch ran (its flash-attention CPU kernel is
aten::_scaled_dot_product_flash_attention_for_cpu). Prints one table row per case and the ratio
PyTorch ms / attn ms (above 1: attn is faster).
"""
import argparse
import os
import platform
import statistics
import subprocess
import time

# PyTorch's OpenMP threads spin after each call by default and so took the second core from
# attn's next call (attn at T = 256: 2.61 ms beside them, 1.45 ms without); passive waiting
# left PyTorch's own times the same or better (30.9 -> 29.9 ms at T = 1024). Set before torch
# loads its OpenMP runtime; the environment may still choose otherwise.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import attn  # noqa: E402
import attn.torch as at  # noqa: E402


def cpu_name():
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def torch_kernel(q, k, v, causal, extra):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal, **extra)
    names = [e.key for e in prof.key_averages() if "scaled_dot_product" in e.key]
    return ", ".join(sorted(set(names)))


def timed(fn, runs):
    fn()  # warm-up
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq", default="256,1024,4096")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--gqa", action="store_true",
                        help="grouped heads instead: Hq 32, Hkv 8, d 128, causal")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    attn.set_num_threads(args.threads)
    print(f"CPU: {cpu_name()}; torch {torch.__version__} "
          f"({torch.backends.cpu.get_cpu_capability()}), attn {attn.__version__} "
          f"({attn.simd_target()}), {args.threads} threads, median of {args.runs}, "
          f"OMP_WAIT_POLICY={os.environ['OMP_WAIT_POLICY']}")
    print("| T | causal | pass | attn ms | PyTorch ms | PyTorch / attn | PyTorch's kernel |")
    print("|---:|---|---|---:|---:|---:|---|")
    heads, kv_heads, d = (32, 8, 128) if args.gqa else (16, 16, 64)
    extra = {"enable_gqa": True} if args.gqa else {}
    for t in [int(x) for x in args.seq.split(",")]:
        g = torch.Generator().manual_seed(t)
        q = torch.randn(1, heads, t, d, generator=g)
        k, v = (torch.randn(1, kv_heads, t, d, generator=g) for _ in range(2))
        for causal in ((True,) if args.gqa else (True, False)):
            kernel = torch_kernel(q, k, v, causal, extra)
            ours = timed(lambda: at.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                 **extra), args.runs)
            theirs = timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                  **extra), args.runs)
            print(f"| {t} | {causal} | forward | {ours:.2f} | {theirs:.2f} | "
                  f"{theirs / ours:.2f} | {kernel} |")
            qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))
            grad = torch.randn(1, heads, t, d, generator=g)

            def both(sdpa):
                out = sdpa(qg, kg, vg, is_causal=causal, **extra)
                torch.autograd.grad(out, (qg, kg, vg), grad)

            ours = timed(lambda: both(at.scaled_dot_product_attention), args.runs)
            theirs = timed(lambda: both(F.scaled_dot_product_attention), args.runs)
            print(f"| {t} | {causal} | forward + backward | {ours:.2f} | {theirs:.2f} | "
                  f"{theirs / ours:.2f} | |")


if __name__ == "__main__":
    main()
