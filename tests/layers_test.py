"""scripts/check_layers.py passes on the repository and fails, naming the file and the layers,
on a copy of one of its layers given an include that points up (kernels -> attention)."""
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

root = Path(sys.argv[1])
check = [sys.executable, str(root / "scripts" / "check_layers.py")]

clean = subprocess.run(check + [str(root)], capture_output=True, text=True)
assert clean.returncode == 0, clean.stdout + clean.stderr
assert "points down" in clean.stdout, clean.stdout

with tempfile.TemporaryDirectory() as tmp:
    tree = Path(tmp)
    shutil.copytree(root / "src" / "kernels", tree / "src" / "kernels")
    (tree / "include").mkdir()
    bad = tree / "src" / "kernels" / "flash_forward.cpp"
    bad.write_text('#include "src/attention/layer.hpp"\n' + bad.read_text())
    upward = subprocess.run(check + [str(tree)], capture_output=True, text=True)
    assert upward.returncode == 1, upward.stdout
    assert ("src/kernels/flash_forward.cpp:1: layer kernels includes attention, which is not "
            "below it") in upward.stdout, upward.stdout

print("layers_test: the repository passes the layer check; an upward include fails it")
