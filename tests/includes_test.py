"""scripts/check_includes.py's check of one file: a source that uses std::vector without
including <vector> fails, naming the error; with the include it passes. (The whole run over the
repository is `make lint`'s, minutes long.)"""
import sys
import tempfile
from pathlib import Path

root = Path(sys.argv[1])
sys.path.insert(0, str(root / "scripts"))
import check_includes  # noqa: E402  (after the path)

with tempfile.TemporaryDirectory() as tmp:
    source = Path(tmp) / "uses_vector.cpp"
    entry = {"directory": tmp, "file": str(source),
             "command": f"c++ -std=c++20 -o {tmp}/uses_vector.o -c {source}"}
    source.write_text("#include <cstddef>\nstd::vector<int> v;\n")
    path, errors = check_includes.syntax_only(entry)
    assert path == str(source) and "vector" in errors, errors
    source.write_text("#include <vector>\nstd::vector<int> v;\n")
    _, errors = check_includes.syntax_only(entry)
    assert errors == "", errors
    assert not (Path(tmp) / "uses_vector.o").exists(), "syntax only: no object written"

print("includes_test: a missing include fails the check of its file; present, it passes")
