"""attn.torch next to PyTorch 2's own scaled_dot_product_attention, in one run, on the same
tensors: forward, and forward + backward, causal and not, B = 1, H = 16, d = 64 (--gqa: 32 query
heads over 8 K/V heads, d = 128, causal), in float32 and (--dtype) bfloat16; and one decode step
(one query row against a cache of --decode keys, 16 heads, d = 64).

  build/venv/bin/python bench/compare_torch.py [--seq 256,1024,4096,8192] [--threads 2]
      [--runs 9] [--gqa] [--dtype float32,bfloat16] [--decode 65536] [--cli build/release/attn]
  (with PYTHONPATH=build/release/python, or attn installed in the venv by pip install .)

Both sides run on the same thread count (torch.set_num_threads, attn.set_num_threads); within
each run the two calls alternate, attn first, so a slow moment of the machine falls on both;
each figure is the median of --runs. The profiler names the kernel PyTorch ran (its flash
kernel is aten::_scaled_dot_product_flash_attention_for_cpu). Each row gives the ratio
PyTorch ms / attn ms (above 1: attn is faster) and both sides' useful GFLOP/s as a fraction of
the FMA peak that `attn bench` measures on as many threads at the start of the run (forward
4·H·T²·d, 2·H·T·(T+1)·d when causal; forward + backward 3.5 times that, the backward
recomputing the scores, as `attn bench backward` counts). bfloat16: both sides take bfloat16
tensors and return bfloat16; attn runs its bf16 products (on AMX tiles or vdpbf16ps where the
CPU has them), PyTorch its bf16 kernel; the peak is the float32 FMA one for both, so a side on
AMX tiles can pass 100 %.
"""
import argparse
import re
import shutil
import statistics
import subprocess
import time

import torch_wait  # this script's folder

torch_wait.use_fastest()  # before torch loads its OpenMP runtime

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import attn  # noqa: E402
import attn.torch as at  # noqa: E402


def fma_peak_gflops(cli, threads):
    """The FMA peak `attn bench forward` measures and prints first (None without the CLI)."""
    if not cli:
        return None
    out = subprocess.run([cli, "bench", "forward", "--seq", "16", "--threads", str(threads),
                          "--runs", "1", "--reference-max-seq", "0"],
                         capture_output=True, text=True, check=True).stdout
    found = re.search(r"measured FMA peak, \d+ thread\(s\), \S+: ([0-9.]+) GFLOP/s", out)
    return float(found.group(1)) if found else None


def torch_kernel(q, k, v, causal, extra):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        F.scaled_dot_product_attention(q, k, v, is_causal=causal, **extra)
    names = [e.key for e in prof.key_averages() if "scaled_dot_product" in e.key]
    return ", ".join(sorted(set(names)))


def timed_pair(ours, theirs, runs):
    """Median ms of each, the two calls alternating within every run after a warm-up."""
    ours()
    theirs()
    times = ([], [])
    for _ in range(runs):
        for fn, into in ((ours, times[0]), (theirs, times[1])):
            start = time.perf_counter()
            fn()
            into.append(time.perf_counter() - start)
    return tuple(statistics.median(t) * 1e3 for t in times)


def percent(flops, ms, peak):
    return "" if peak is None else f"{100 * flops / (ms * 1e6) / peak:.0f} %"


def row(cells):
    print("| " + " | ".join(str(c) for c in cells) + " |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq", default="256,1024,4096,8192")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--gqa", action="store_true",
                        help="grouped heads instead: Hq 32, Hkv 8, d 128, causal")
    parser.add_argument("--dtype", default="float32",
                        help="float32, bfloat16, or both (a comma list also works)")
    parser.add_argument("--decode", default="65536",
                        help="cache lengths of the decode rows ('' for none)")
    parser.add_argument("--cli", default=shutil.which("attn") or "build/release/attn",
                        help="attn's CLI, for the FMA peak ('' to leave the fractions out)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    attn.set_num_threads(args.threads)
    peak = fma_peak_gflops(args.cli, args.threads)
    print(f"CPU: {torch_wait.cpu_name()}; torch {torch.__version__} "
          f"({torch.backends.cpu.get_cpu_capability()}), attn {attn.__version__} "
          f"({attn.simd_target()}), {args.threads} threads, median of {args.runs}, "
          f"{torch_wait.described()}, FMA peak "
          f"{'not measured' if peak is None else f'{peak:.0f} GFLOP/s'}")
    row(["T", "dtype", "causal", "pass", "attn ms", "PyTorch ms", "PyTorch / attn",
         "attn %peak", "PyTorch %peak", "PyTorch's kernel"])
    row(["---:", "---", "---", "---", "---:", "---:", "---:", "---:", "---:", "---"])
    heads, kv_heads, d = (32, 8, 128) if args.gqa else (16, 16, 64)
    extra = {"enable_gqa": True} if args.gqa else {}
    names = "float32,bfloat16" if args.dtype == "both" else args.dtype
    dtypes = [getattr(torch, name) for name in names.split(",")]
    for t in [int(x) for x in args.seq.split(",") if x]:
        for dtype in dtypes:
            g = torch.Generator().manual_seed(t)
            q = torch.randn(1, heads, t, d, generator=g).to(dtype)
            k, v = (torch.randn(1, kv_heads, t, d, generator=g).to(dtype) for _ in range(2))
            grad = torch.randn(1, heads, t, d, generator=g).to(dtype)
            for causal in ((True,) if args.gqa else (True, False)):
                pairs = t * (t + 1) / 2 if causal else t * t
                forward_flops = 4 * heads * d * pairs
                kernel = torch_kernel(q, k, v, causal, extra)
                ours, theirs = timed_pair(
                    lambda: at.scaled_dot_product_attention(q, k, v, is_causal=causal, **extra),
                    lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **extra),
                    args.runs)
                name = str(dtype).removeprefix("torch.")
                row([t, name, causal, "forward", f"{ours:.2f}", f"{theirs:.2f}",
                     f"{theirs / ours:.2f}", percent(forward_flops, ours, peak),
                     percent(forward_flops, theirs, peak), kernel])
                qg, kg, vg = (x.clone().requires_grad_() for x in (q, k, v))

                def both(sdpa):
                    out = sdpa(qg, kg, vg, is_causal=causal, **extra)
                    torch.autograd.grad(out, (qg, kg, vg), grad)

                ours, theirs = timed_pair(lambda: both(at.scaled_dot_product_attention),
                                          lambda: both(F.scaled_dot_product_attention),
                                          args.runs)
                row([t, name, causal, "forward + backward", f"{ours:.2f}", f"{theirs:.2f}",
                     f"{theirs / ours:.2f}", percent(3.5 * forward_flops, ours, peak),
                     percent(3.5 * forward_flops, theirs, peak), ""])
    for cache in [int(x) for x in args.decode.split(",") if x]:
        # One new token's query against the whole cache: no mask (is_causal would align it
        # top-left, to the first key only). Memory-bound: each side reads K and V once.
        g = torch.Generator().manual_seed(cache)
        q = torch.randn(1, 16, 1, 64, generator=g)
        k, v = (torch.randn(1, 16, cache, 64, generator=g) for _ in range(2))
        ours, theirs = timed_pair(lambda: at.scaled_dot_product_attention(q, k, v),
                                  lambda: F.scaled_dot_product_attention(q, k, v), args.runs)
        row([f"decode, cache {cache}", "float32", "", "forward", f"{ours:.3f}",
             f"{theirs:.3f}", f"{theirs / ours:.2f}", "", "", torch_kernel(q, k, v, False, {})])


if __name__ == "__main__":
    main()
