"""A ~124M-parameter Llama in transformers (random weights from a config: nothing downloaded),
its attention run three ways — attn_implementation="attn" (attn.hf), "sdpa" (PyTorch's fused
scaled_dot_product_attention) and "eager" (transformers' matmul-softmax-matmul) — on a prompt
of PROMPT tokens (2048) and NEW greedy tokens after it (128) through the KV cache.

    build/venv/bin/python bench/compare_hf_llama.py [--prompt 2048] [--new 128] [--runs 2]
                                                     [--batch 1] [--padding 0]

--batch B --padding P: B prompts, the second and later left-padded by P tokens (as transformers
pads a batch for generation), so attention gets a padding mask.

Each implementation is registered again under a timed name whose attention function is the
same one wrapped in a clock, so the table gives the time inside attention beside the whole
forward: the model around it (projections, MLP, head) is the same code in all three. The
three runs alternate; each figure is the fastest of --runs. The three must generate the same
tokens. Both libraries get the machine's cores; PyTorch's OpenMP threads wait with a short spin
(bench/torch_wait.py), its fastest wait, which leaves attn's pool its cores.
"""
import argparse
import os
import time

import torch_wait  # this script's folder

torch_wait.use_fastest()  # before torch loads its OpenMP runtime

import torch  # noqa: E402
from transformers import (AttentionInterface, AutoModelForCausalLM, LlamaConfig)  # noqa: E402
from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: E402
from transformers.masking_utils import AttentionMaskInterface  # noqa: E402
from transformers.models.llama.modeling_llama import eager_attention_forward  # noqa: E402

import attn  # noqa: E402
import attn.hf  # noqa: E402

# 12 layers of width 768, 12 query heads over 4 K/V heads (GQA), SwiGLU 2048, vocabulary 32000:
# 124M parameters, the size of GPT-2 small.
CONFIG = dict(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
              num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=4096,
              bos_token_id=1, eos_token_id=2)
FUNCTIONS = {"attn": attn.hf.attention_forward, "sdpa": sdpa_attention_forward,
             "eager": eager_attention_forward}
attention_seconds = 0.0


def timed(function):
    def wrapper(*args, **kwargs):
        global attention_seconds
        start = time.perf_counter()
        out = function(*args, **kwargs)
        attention_seconds += time.perf_counter() - start
        return out
    return wrapper


def register_timed():
    attn.hf.register()
    masks = AttentionMaskInterface._global_mapping
    for name, function in FUNCTIONS.items():
        AttentionInterface.register(f"timed-{name}", timed(function))
        AttentionMaskInterface.register(f"timed-{name}", masks[name])


def use_every_core():
    """Both libraries on all the machine's cores; returns their count."""
    threads = os.cpu_count()
    torch.set_num_threads(threads)
    attn.set_num_threads(threads)
    return threads


def same_weight_models(config, names):
    """A Llama of `config` (a dict) per name, on the timed implementation of that name, all
    with the first one's random weights."""
    torch.manual_seed(0)
    models = {}
    for name in names:
        model = AutoModelForCausalLM.from_config(LlamaConfig(**config),
                                                 attn_implementation=f"timed-{name}")
        if models:
            model.load_state_dict(next(iter(models.values())).state_dict())
        models[name] = model
    return models


def measure(model, ids, mask, new_tokens):
    """(prefill s, attention s in it, generation s, attention s in it, tokens)."""
    global attention_seconds
    with torch.no_grad():
        attention_seconds = 0.0
        start = time.perf_counter()
        model(ids, attention_mask=mask, use_cache=False)
        prefill = time.perf_counter() - start
        prefill_attention = attention_seconds
        attention_seconds = 0.0
        start = time.perf_counter()
        out = model.generate(ids, attention_mask=mask, max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
        generate = time.perf_counter() - start
    return prefill, prefill_attention, generate, attention_seconds, out[:, ids.shape[1]:].tolist()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompt", type=int, default=2048)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--padding", type=int, default=0)
    args = parser.parse_args()
    register_timed()
    threads = use_every_core()
    models = {name: model.eval() for name, model in same_weight_models(CONFIG, FUNCTIONS).items()}
    parameters = sum(p.numel() for p in models["attn"].parameters())
    ids = torch.randint(3, CONFIG["vocab_size"], (args.batch, args.prompt),
                        generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1:, :args.padding] = 0
    ids[1:, :args.padding] = 0
    best, tokens = {}, {}
    for _ in range(args.runs):
        for name, model in models.items():
            figures = measure(model, ids, mask, args.new)
            tokens[name] = figures[4]
            best[name] = [min(a, b) for a, b in zip(best.get(name, figures[:4]), figures[:4])]
    same = all(t == tokens["eager"] for t in tokens.values())
    print(f"Llama, {parameters / 1e6:.0f}M parameters (random), batch {args.batch} "
          f"(left padding {args.padding}), {args.prompt}-token prompt, "
          f"{args.new} greedy tokens; {threads} threads; PyTorch {torch.__version__}; "
          f"fastest of {args.runs}; CPU: {torch_wait.cpu_name()}; {torch_wait.described()}")
    print(f"the three generate the same tokens: {'yes' if same else 'NO'}")
    print(f"{'attention':10} {'prefill s':>10} {'of it attn':>11} {'generate s':>11} "
          f"{'of it attn':>11} {'ms/token':>9}")
    for name, (prefill, prefill_attention, generate, generate_attention) in best.items():
        decode = (generate - prefill) / args.new * 1e3  # generate() holds one prefill too
        print(f"{name:10} {prefill:10.2f} {prefill_attention:11.2f} {generate:11.2f} "
              f"{generate_attention:11.2f} {decode:9.1f}")
    attention = {name: figures[1] for name, figures in best.items()}
    print(f"prefill attention: attn {attention['sdpa'] / attention['attn']:.2f}x faster than "
          f"sdpa, {attention['eager'] / attention['attn']:.2f}x than eager")
    if not same:
        raise SystemExit("the implementations' tokens differ")


if __name__ == "__main__":
    main()
