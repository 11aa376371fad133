"""GPT-2 in PyTorch, as Hugging Face's GPT2LMHeadModel computes it, for bench/compare_gpt2.sh.

Reads a directory in Hugging Face's layout (config.json + model.safetensors, F32, as
`attn export --hf` writes it) and times what `attn bench generate` times: one pass over a prompt
of random ids that fills a KV cache, then greedy tokens one at a time through the cache. There is
no `transformers` package here, so the forward is written out: pre-LayerNorm blocks (eps 1e-5),
Conv1D weights (in, out), gelu_new (tanh), PyTorch 2's F.scaled_dot_product_attention (its fused
CPU kernel; scale 1/sqrt(d_head), causal), the head tied to wte.
Like Hugging Face's generate() (its logits_to_keep) and attn's prompt, the head runs on the
last position only: the other positions' logits choose nothing.

    build/venv/bin/python bench/gpt2_torch.py DIR [--prompt-tokens 512] [--new-tokens 256]
        [--threads 2] [--runs 3] [--dtype float32|bfloat16]

--dtype bfloat16 converts every weight to bfloat16 and runs the whole forward in it, as
`model.to(torch.bfloat16)` would (PyTorch has no float-activations-with-bf16-weights mode).

Prints one JSON line: prompt tokens/s and ms per generated token (medians over the runs).
"""
import argparse
import json
import statistics
import struct
import time

import numpy as np
import torch
import torch.nn.functional as F


def read_safetensors(path):
    """The F32 tensors of a safetensors file, by name, without the `safetensors` package."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] != "F32":
            raise SystemExit(f"{path}: {name} is {entry['dtype']}; this script reads F32")
        start, end = entry["data_offsets"]
        array = np.frombuffer(data, dtype="<f4", count=(end - start) // 4, offset=start)
        name = name[len("transformer."):] if name.startswith("transformer.") else name
        tensors[name] = torch.from_numpy(array.reshape(entry["shape"]).copy())
    return tensors


class Gpt2:
    def __init__(self, directory, dtype):
        with open(f"{directory}/config.json") as f:
            self.config = json.load(f)
        self.w = {name: w.to(dtype) for name, w in
                  read_safetensors(f"{directory}/model.safetensors").items()}
        self.heads = self.config["n_head"]

    def layer_norm(self, x, name):
        return F.layer_norm(x, x.shape[-1:], self.w[name + ".weight"], self.w[name + ".bias"], 1e-5)

    def conv1d(self, x, name):  # Conv1D: y = x·W + b with W (in, out)
        return torch.addmm(self.w[name + ".bias"], x.view(-1, x.shape[-1]),
                           self.w[name + ".weight"]).view(*x.shape[:-1], -1)

    def attention(self, x, i, cache):
        b, t, c = x.shape
        d = c // self.heads
        q, k, v = self.conv1d(x, f"h.{i}.attn.c_attn").split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        if cache[i] is not None:
            k = torch.cat([cache[i][0], k], dim=2)
            v = torch.cat([cache[i][1], v], dim=2)
        cache[i] = (k, v)
        # PyTorch 2's fused attention, as transformers' "sdpa" runs it: causal for the prompt
        # (is_causal aligns top-left, right for an empty cache), no mask for one new token.
        past = k.shape[2] - t
        mask = None if t == 1 or past == 0 else torch.ones(t, k.shape[2], dtype=torch.bool).tril(past)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=past == 0 and t > 1)
        return self.conv1d(y.transpose(1, 2).contiguous().view(b, t, c), f"h.{i}.attn.c_proj")

    def forward(self, ids, cache):
        position = 0 if cache[0] is None else cache[0][0].shape[2]
        t = ids.shape[1]
        x = self.w["wte.weight"][ids] + self.w["wpe.weight"][position:position + t]
        for i in range(self.config["n_layer"]):
            x = x + self.attention(self.layer_norm(x, f"h.{i}.ln_1"), i, cache)
            h = F.gelu(self.conv1d(self.layer_norm(x, f"h.{i}.ln_2"), f"h.{i}.mlp.c_fc"),
                       approximate="tanh")
            x = x + self.conv1d(h, f"h.{i}.mlp.c_proj")
        return self.layer_norm(x[:, -1:], "ln_f") @ self.w["wte.weight"].t()


def time_once(model, prompt, new_tokens):
    cache = [None] * model.config["n_layer"]
    start = time.perf_counter()
    logits = model.forward(prompt, cache)
    prompt_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(new_tokens):
        token = logits[:, -1].argmax(dim=-1, keepdim=True)
        logits = model.forward(token, cache)
    token_s = (time.perf_counter() - start) / max(new_tokens, 1)
    return prompt_s, token_s


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = Gpt2(args.model, getattr(torch, args.dtype))
    generator = torch.Generator().manual_seed(7)
    prompt = torch.randint(0, model.config["vocab_size"], (1, args.prompt_tokens),
                           generator=generator)
    with torch.inference_mode():
        time_once(model, prompt[:, :8], 8)  # warm-up
        runs = [time_once(model, prompt, args.new_tokens) for _ in range(args.runs)]
    prompt_s = statistics.median(r[0] for r in runs)
    token_s = statistics.median(r[1] for r in runs)
    print(json.dumps({"torch": torch.__version__, "threads": args.threads, "dtype": args.dtype,
                      "prompt_tokens_per_s": round(args.prompt_tokens / prompt_s, 1),
                      "ms_per_token": round(1e3 * token_s, 3)}))


if __name__ == "__main__":
    main()
