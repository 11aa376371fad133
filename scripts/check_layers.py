#!/usr/bin/env python3
"""Checks that the folders of src/ are layers: a file may include its own layer's headers and
those of the layers below it, never one above or beside it. Public headers (include/attn/) belong
to the layer that defines what they declare (LAYER_OF_HEADER), and are checked like the rest.

  scripts/check_layers.py [ROOT]   prints each upward include and exits 1 if there is any

`make lint` runs it; tests/layers_test.py shows it failing on an upward include."""
import re
import sys
from pathlib import Path

# Lowest first. Layers of one rank are peers and may not include each other.
RANKS = {
    "core": 0, "kernels": 1, "io": 1, "linalg": 2, "reference": 3, "attention": 4,
    "nn": 5, "tokenizer": 5, "viz": 6, "hf": 6, "train": 7, "distributed": 8,
}
TOP = 99  # tools/, python/, examples/, tests/, bench/: may include everything

# The layer of each public header: the lowest layer that defines something it declares. A
# header that declares the functions of two layers (sdpa.hpp: the shared SdpaOptions, and both
# reference::sdpa and the fused attn::sdpa) sits in the lower; which of its functions a file
# calls is then the linker's business, not this check's.
LAYER_OF_HEADER = {
    "bfloat16.hpp": "core", "error.hpp": "core", "phase_clock.hpp": "core",
    "random.hpp": "core", "simd.hpp": "core", "tensor.hpp": "core", "threads.hpp": "core",
    "version.hpp": "core", "gemm.hpp": "linalg", "reference_matmul.hpp": "reference",
    "walkthrough.hpp": "reference", "rope.hpp": "reference", "sdpa.hpp": "reference",
    "sdpa_backward.hpp": "reference", "sdpa_varlen.hpp": "attention",
    "sdpa_bfloat16.hpp": "attention", "mha.hpp": "attention", "mha_reference.hpp": "reference", "mask.hpp": "core",
    "dtype.hpp": "core", "kv_cache.hpp": "attention", "embedding.hpp": "nn", "gpt.hpp": "nn", "gpt_flops.hpp": "nn",
    "tokenizer.hpp": "tokenizer", "gpt2_tokenizer.hpp": "tokenizer",
    "io.hpp": "io",
    "files.hpp": "io", "viz.hpp": "viz", "train.hpp": "train", "training_run.hpp": "train",
    "hf.hpp": "hf",
    "distributed.hpp": "distributed", "mpi_launcher.hpp": "distributed", "attn.hpp": None,
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:src/([a-z_]+)/)|(?:attn/([A-Za-z0-9_.]+)))')


def layer_of_file(path, root):
    """The layer a source or header belongs to, or None for one above every layer."""
    rel = path.relative_to(root).parts
    if rel[0] == "src" and len(rel) > 2:
        return rel[1]
    if rel[:2] == ("include", "attn"):
        return LAYER_OF_HEADER.get(path.name.replace(".in", ""), "?")
    return None


def rank(layer):
    return TOP if layer is None else RANKS.get(layer, -1)


def upward_includes(root):
    """(file, line number, included layer, own layer) for every include that points up."""
    found = []
    files = [p for d in ("src", "include") for p in (root / d).rglob("*")
             if p.suffix in (".cpp", ".hpp", ".h", ".in", ".inc")]
    for path in sorted(files):
        own = layer_of_file(path, root)
        if own is None:
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(2) if m.group(2) else LAYER_OF_HEADER.get(m.group(3), "?")
            if target is None or target == own:
                continue
            if target == "?" or own == "?" or rank(target) >= rank(own):
                found.append((path.relative_to(root), number, target, own))
    return found


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parents[1])
    found = upward_includes(root)
    for path, number, target, own in found:
        print(f"{path}:{number}: layer {own} includes {target}, which is not below it")
    if found:
        print(f"check_layers: {len(found)} include(s) against the layer order "
              "(scripts/check_layers.py, docs/design.md)")
        return 1
    print(f"check_layers: every include of src/ and include/attn/ points down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
