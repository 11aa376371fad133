"""The Python benchmarks in bench/ start: each one's --help runs its imports (torch,
transformers, attn and the scripts beside it) and its argument parser, and nothing else. A
benchmark is not a test, but one that stops at an import (as three did when a helper moved from
compare_torch.py to torch_wait.py) is a broken command in the docs."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
# Scripts with an argument parser (torch_wait.py is a module; tiktoken_encode.py takes plain
# positional arguments and is run by bench/compare_gpt2_tokenizer.sh).
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py")
                 if "argparse" in p.read_text() and "__main__" in p.read_text())


def test_the_scripts_are_found():
    assert {"compare_torch.py", "compare_hf_llama.py", "decode_layouts.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_runs(script):
    result = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True,
                            text=True, timeout=300, env=dict(os.environ), cwd=BENCH.parent)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout
