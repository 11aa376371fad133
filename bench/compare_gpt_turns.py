"""attn's training step and PyTorch 2's on the same small GPT, taking turns step by step in one
process, so that a slow stretch of a shared machine falls on both sides alike.

  PYTHONPATH=build/release/python build/venv/bin/python bench/compare_gpt_turns.py \
      [--iters 200] [--threads 2] [--corpus FILE] [--precision f32]

attn.train runs `attn train`'s defaults (4 layers, 4 heads, n_embd 128, block 64, batch 12,
AdamW, clipping) with the GIL released; after each of its steps, the on_step callback runs one
step of bench/gpt_torch.py's model in PyTorch eager and one under torch.compile (the order
swapping every step), each timed alone: forward, backward, clipping, AdamW. Every side's step
is thus run between the other sides' steps, on the same threads (attn.set_num_threads,
torch.set_num_threads). Reported: each side's median ms over the steps from the eleventh on
(torch.compile compiles in the first), and the median of the per-step ratios PyTorch ÷ attn
(each pair a few ms apart: the figure bench/compare_gpt.sh's separate runs cannot give
on a noisy host). bench/compare_gpt.sh keeps the wider table (1 thread, bf16 autocast, a busy
core).
"""
import argparse
import pathlib
import statistics

import torch_wait  # this script's folder

torch_wait.use_fastest()  # before torch loads its OpenMP runtime

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import attn  # noqa: E402
import gpt_torch  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    here = pathlib.Path(__file__).resolve().parent
    ap.add_argument("--corpus", default=str(here / "../../shared/data/tinyshakespeare.txt"))
    ap.add_argument("--iters", type=int, default=200, help="steps each side runs and times")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                    help="attn's products (PyTorch's side stays float32)")
    args = ap.parse_args()
    if args.iters < 11:
        ap.error("--iters must be at least 11 (the first 10 steps are left out)")
    torch.set_num_threads(args.threads)
    attn.set_num_threads(args.threads)
    gpt_torch.SDPA = F.scaled_dot_product_attention

    _, chars, data = gpt_torch.characters(args.corpus)
    train = data[:int(0.9 * len(data))]
    torch.manual_seed(1337)
    sides = {"PyTorch eager": gpt_torch.Trainer(len(chars)),
             "PyTorch torch.compile": gpt_torch.Trainer(len(chars), compile_model=True)}
    times = {"attn": [], **{name: [] for name in sides}}

    def turn(info):
        times["attn"].append(info["seconds"] * 1e3)
        order = list(sides) if info["iter"] % 2 == 0 else list(reversed(sides))
        for name in order:
            seconds, _ = sides[name].step(info["iter"], args.iters, train)
            times[name].append(seconds * 1e3)

    attn.train(pathlib.Path(args.corpus), max_iters=args.iters, eval_interval=10 ** 9, eval_iters=1,
               precision=args.precision, on_step=turn)

    first = 10  # torch.compile compiles during its first steps; every side drops as many
    print(f"CPU: {torch_wait.cpu_name()}; torch {torch.__version__}, attn {attn.__version__} "
          f"({attn.simd_target()}), {args.threads} threads, {torch_wait.described()}, "
          f"steps {first + 1}-{args.iters} of each side, taking turns; attn's products "
          f"{args.precision}")
    print("| side | median ms | least ms | PyTorch ÷ attn, median of the steps' ratios |")
    print("| --- | ---: | ---: | ---: |")
    ours = times["attn"][first:]
    for name, ms in times.items():
        ms = ms[first:]
        ratio = "" if name == "attn" else \
            f"{statistics.median(t / a for t, a in zip(ms, ours)):.2f}"
        print(f"| {name} | {statistics.median(ms):.2f} | {min(ms):.2f} | {ratio} |")


if __name__ == "__main__":
    main()
