"""The GPT that `attn train` trains, written in PyTorch, for bench/compare_gpt.sh.

Same layout (pre-LayerNorm blocks, GELU tanh MLP of 4·C, tied LM head, learned positions),
same initialisation rule, same data windows scheme, AdamW with the same groups (decay only on
the blocks' matrices), warm-up + cosine schedule and clipping. Attention: PyTorch 2's fused
F.scaled_dot_product_attention (as nanoGPT calls it), or with --attention explicit the textbook
masked softmax, or with --attention attn attn.torch's; --compile runs the model under
torch.compile.

Run with PyTorch 2.13 in scripts/bootstrap --python's venv:
  GOMP_SPINCOUNT=1000 PYTHONPATH=build/release/python build/venv/bin/python \
    bench/gpt_torch.py --iters 150 --threads 2 [--attention torch|explicit|attn] [--compile]
"""
import argparse
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


SDPA = None  # set by --attention: None for the explicit masked softmax below


class Block(nn.Module):
    def __init__(self, c, heads):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(c)
        self.c_attn = nn.Linear(c, 3 * c)
        self.c_proj = nn.Linear(c, c)
        self.ln_2 = nn.LayerNorm(c)
        self.c_fc = nn.Linear(c, 4 * c)
        self.mlp_proj = nn.Linear(4 * c, c)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if SDPA is not None:  # PyTorch 2: its fused attention (or attn's, --attention attn)
            y = SDPA(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
        y = F.softmax(scores, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, block, layers, heads, c):
        super().__init__()
        self.wte = nn.Embedding(vocab, c)
        self.wpe = nn.Embedding(block, c)
        self.h = nn.ModuleList(Block(c, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif "ln_" in name:
                nn.init.ones_(p)
            elif name.endswith("c_proj.weight") or name.endswith("mlp_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers))
            else:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, ids, targets):
        t = ids.shape[1]
        x = self.wte(ids) + self.wpe(torch.arange(t))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def load_attn_weights(model, path):
    """Copies the parameters of an attn checkpoint (`attn train --max-iters 0` writes the
    initial ones) into model: attn's linear weights are (in, out), PyTorch's (out, in)."""
    import json
    import struct
    try:
        with open(path, "rb") as f:
            header_len = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(header_len))
            data = f.read()
    except (OSError, ValueError, struct.error) as e:
        raise SystemExit(f"{path}: not a readable attn checkpoint ({e})")
    names = {"wte": "wte.weight", "wpe": "wpe.weight", "ln_f.weight": "ln_f.weight", "ln_f.bias": "ln_f.bias"}
    for layer in range(len(model.h)):
        p = f"h.{layer}."
        for ours, theirs in [("ln_1.weight", "ln_1.weight"), ("ln_1.bias", "ln_1.bias"),
                             ("ln_2.weight", "ln_2.weight"), ("ln_2.bias", "ln_2.bias"),
                             ("attn.wqkv", "c_attn.weight"), ("attn.bqkv", "c_attn.bias"),
                             ("attn.wo", "c_proj.weight"), ("attn.bo", "c_proj.bias"),
                             ("mlp.wfc", "c_fc.weight"), ("mlp.bfc", "c_fc.bias"),
                             ("mlp.wproj", "mlp_proj.weight"), ("mlp.bproj", "mlp_proj.bias")]:
            names[p + ours] = p + theirs
    state = model.state_dict()
    with torch.no_grad():
        for ours, theirs in names.items():
            begin, end = header[ours]["data_offsets"]
            array = np.frombuffer(data[begin:end], dtype=np.float32).reshape(header[ours]["shape"])
            if array.ndim == 2 and not ours.startswith("w"):
                array = array.T
            if tuple(state[theirs].shape) != array.shape:
                raise SystemExit(f"{path}: {ours} has shape {array.shape}, the model needs {tuple(state[theirs].shape)}")
            state[theirs].copy_(torch.from_numpy(array.copy()))


def learning_rate(it, lr, min_lr, warmup, decay):
    if it < warmup:
        return lr * (it + 1) / (warmup + 1)
    if it > decay:
        return min_lr
    ratio = (it - warmup) / (decay - warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def characters(corpus):
    """The corpus's text, its sorted characters, and its ids as a LongTensor (`attn train`'s
    character tokenizer)."""
    text = open(corpus, encoding="utf-8").read()
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    return text, chars, torch.from_numpy(np.array([stoi[c] for c in text], dtype=np.int64))


class Trainer:
    """`attn train`'s defaults in PyTorch: the model, AdamW with the same groups (decay on the
    blocks' matrices only), warm-up + cosine, clipping at 1.0, batches of 12 random windows of
    64; one timed step at a time (bench/compare_gpt_turns.py takes turns with attn's)."""

    block, batch = 64, 12

    def __init__(self, vocab, compile_model=False, init_from=None):
        self.model = Gpt(vocab, self.block, 4, 4, 128)
        if init_from:
            load_attn_weights(self.model, init_from)
        named = list(self.model.named_parameters())
        decay = [p for n, p in named if p.dim() == 2 and not n.startswith("w")]
        rest = [p for n, p in named if not (p.dim() == 2 and not n.startswith("w"))]
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                      {"params": rest, "weight_decay": 0.0}],
                                     lr=1e-3, betas=(0.9, 0.99))
        self.step_model = torch.compile(self.model) if compile_model else self.model

    def windows(self, split_data):
        ix = torch.randint(len(split_data) - self.block, (self.batch,))
        return (torch.stack([split_data[i:i + self.block] for i in ix]),
                torch.stack([split_data[i + 1:i + 1 + self.block] for i in ix]))

    def step(self, it, max_iters, train, bf16=False):
        """Step `it` of a schedule of max_iters on a batch of `train`: (seconds, loss), the
        batch's sampling left out of the time (forward, backward, clipping, AdamW in it)."""
        for group in self.opt.param_groups:
            group["lr"] = learning_rate(it, 1e-3, 1e-4, 100, max_iters)
        x, y = self.windows(train)
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            loss = self.step_model(x, y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        return time.perf_counter() - start, loss


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", default="../shared/data/tinyshakespeare.txt")
    ap.add_argument("--iters", type=int, default=200, help="training steps to run and time")
    ap.add_argument("--max-iters", type=int, default=2000, help="length of the schedule")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval", action="store_true", help="print the val loss at the end")
    ap.add_argument("--eval-batches", type=int, default=200, help="batches the val loss averages")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--bf16", action="store_true",
                    help="mixed precision: the forward under torch.autocast('cpu', dtype=torch.bfloat16)")
    ap.add_argument("--attention", choices=["explicit", "torch", "attn"], default="torch",
                    help="the textbook masked softmax, PyTorch 2's "
                         "F.scaled_dot_product_attention, or attn.torch's")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model")
    ap.add_argument("--init-from", metavar="CHECKPOINT",
                    help="start from the weights of an attn checkpoint (e.g. attn train --max-iters 0)")
    args = ap.parse_args()
    global SDPA
    if args.attention == "torch":
        SDPA = F.scaled_dot_product_attention
    elif args.attention == "attn":
        import attn.torch
        SDPA = attn.torch.scaled_dot_product_attention
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    _, chars, data = characters(args.corpus)
    split = int(0.9 * len(data))
    train, val = data[:split], data[split:]
    trainer = Trainer(len(chars), args.compile, args.init_from)
    times = []
    for it in range(args.iters):
        seconds, loss = trainer.step(it, args.max_iters, train, args.bf16)
        times.append(seconds)
    warm = times[min(10, len(times) - 1):]
    print(f"pytorch {torch.__version__}: {args.iters} iterations, median {1e3 * sorted(warm)[len(warm) // 2]:.2f} ms/iter, "
          f"last loss {loss.item():.4f}, {args.threads} threads{', bf16 autocast' if args.bf16 else ''}, "
          f"attention {args.attention}{', torch.compile' if args.compile else ''}")
    if args.eval:
        trainer.model.eval()
        with torch.no_grad():
            losses = [trainer.model(*trainer.windows(val)).item() for _ in range(args.eval_batches)]
        print(f"val loss {sum(losses) / len(losses):.4f} ({args.eval_batches} batches)")


if __name__ == "__main__":
    main()
