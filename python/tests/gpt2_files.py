"""A small random GPT-2 in Hugging Face's layout, written to a directory that Gpt.from_hf reads
(config.json, model.safetensors, and GPT-2's tokenizer files from tests/fixtures/gpt2)."""
import json
import shutil
import sys
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
GPT2_FILES = FIXTURES / "gpt2"
VOCAB = 50257  # GPT-2's tokenizer
sys.path.insert(0, str(FIXTURES))
from safetensors_writer import float32, write_safetensors  # noqa: E402


def random_gpt2(seed, layers, embd, positions):
    """GPT-2's tensors by their Hugging Face names; Conv1D weights are stored (in, out)."""
    rng = np.random.default_rng(seed)
    normal = lambda *shape, std=0.3: (rng.standard_normal(shape) * std).astype(np.float32)
    w = {"wte.weight": normal(VOCAB, embd, std=1.0), "wpe.weight": normal(positions, embd)}
    for i in range(layers):
        for name in ("ln_1", "ln_2"):
            w[f"h.{i}.{name}.weight"] = 1.0 + normal(embd, std=0.1)
            w[f"h.{i}.{name}.bias"] = normal(embd, std=0.1)
        for name, n_in, n_out in [("attn.c_attn", embd, 3 * embd), ("attn.c_proj", embd, embd),
                                  ("mlp.c_fc", embd, 4 * embd), ("mlp.c_proj", 4 * embd, embd)]:
            w[f"h.{i}.{name}.weight"] = normal(n_in, n_out)
            w[f"h.{i}.{name}.bias"] = normal(n_out, std=0.1)
    w["ln_f.weight"] = 1.0 + normal(embd, std=0.1)
    w["ln_f.bias"] = normal(embd, std=0.1)
    return w


def write_gpt2_dir(path, weights, heads):
    """Writes `weights` (random_gpt2's) with its config and GPT-2's tokenizer files into path."""
    positions, embd = weights["wpe.weight"].shape
    layers = sum(1 for name in weights if name.endswith(".ln_1.weight"))
    write_safetensors(path / "model.safetensors",
                      {"transformer." + name: float32(array) for name, array in weights.items()})
    (path / "config.json").write_text(json.dumps(
        {"n_layer": layers, "n_head": heads, "n_embd": embd, "n_positions": positions,
         "vocab_size": VOCAB, "activation_function": "gelu_new"}))
    for name in ("encoder.json", "vocab.bpe"):
        shutil.copy(GPT2_FILES / name, path / name)
