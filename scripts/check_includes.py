#!/usr/bin/env python3
"""Compiles each C++ source of the unity-built targets on its own, syntax only: does every file
include what it uses?

Release and the sanitizer presets compile batches of files as one unit (CMAKE_UNITY_BUILD), so a
file that forgets an include still builds there when an earlier file of its batch brought the
header in — until the batches change, or someone builds file by file (the debug preset). This
configures build/includes (never built): file by file and without the CLI's precompiled header,
which would bring the heavy headers into every CLI file; then runs each file's own command with
-fsyntax-only, two at a time. The Highway kernels (src/kernels/) are compiled one file per unit
in every preset and are left out.

  scripts/check_includes.py [JOBS=2]   prints each file's errors and exits 1 if any fails

`make lint` runs it."""
import json
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "includes"


def syntax_only(entry):
    """The entry's compile command without its output, checking syntax: (file, errors)."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    kept, skip = [], False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg == "-o":
            skip = True
            continue
        kept.append(arg)
    run = subprocess.run(kept + ["-fsyntax-only"], cwd=entry["directory"], capture_output=True,
                         text=True, check=False)
    return entry["file"], run.stderr if run.returncode != 0 else ""


def main():
    jobs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    subprocess.run(["cmake", "-S", ".", "-B", str(BUILD), "-DCMAKE_BUILD_TYPE=Debug",
                    "-DCMAKE_UNITY_BUILD=OFF", "-DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON",
                    "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON"], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    entries = [e for e in json.loads((BUILD / "compile_commands.json").read_text())
               if "/src/kernels/" not in e["file"] and "/build/" not in e["file"]]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        failures = [(f, err) for f, err in pool.map(syntax_only, entries) if err]
    for path, errors in failures:
        print(f"check_includes: {Path(path).relative_to(ROOT)} does not compile alone:\n{errors}")
    print(f"check_includes: {len(entries) - len(failures)} of {len(entries)} files compile alone")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
