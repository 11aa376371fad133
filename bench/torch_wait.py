"""How PyTorch's OpenMP threads wait in attn's benchmarks against it, and the header line that
says so (with the CPU's name).

PyTorch's threads spin after each parallel region. By default the spin is long enough to take a
core from attn's next call on a 2-core machine (attn's causal T = 256 forward 2.61 ms beside it,
1.45 without; attn's GPT step 32.9 ms against 22.7 when the two take turns in one process);
passive waiting cures that but slows PyTorch's own small calls (causal T = 256 on a Zen 4:
forward 4.43 ms against 2.34, its GPT step 57.0-63.6 against 37.8-42.1). A short spin
(GOMP_SPINCOUNT=1000) was PyTorch's fastest and leaves attn's cores alone.

  import torch_wait
  torch_wait.use_fastest()   # before torch is imported: its OpenMP runtime reads these once
"""
import os
import platform
import subprocess


def use_fastest():
    """Sets the short spin unless the environment already chose a wait."""
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = "1000"


def described():
    """The wait in force, for a benchmark's header."""
    return (f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '')}, "
            f"GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', '')}")


def cpu_name():
    """The CPU's model name as lscpu gives it."""
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
