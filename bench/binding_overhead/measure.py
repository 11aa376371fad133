"""Times the tiny call of with_pybind11 and with_nanobind (bench/binding_overhead/run.sh)."""
import timeit

import numpy as np
import torch

import with_nanobind
import with_pybind11

arrays = [np.random.default_rng(i).standard_normal((1, 1, 16, 16), dtype=np.float32)
          for i in range(3)]
tensors = [torch.from_numpy(a) for a in arrays]


def python_function(q, k, v, causal=False, mask=None, scale=None, causal_align="top-left",
                    return_lse=False):
    return q


cases = {
    "a Python function (the floor)": lambda: python_function(*arrays, causal=True),
    "pybind11, numpy in and out": lambda: with_pybind11.call(*arrays, causal=True),
    "nanobind, numpy in and out": lambda: with_nanobind.call(*arrays, causal=True),
    "pybind11, torch in and out (.numpy(), from_numpy)": lambda: torch.from_numpy(
        with_pybind11.call(*(t.numpy() for t in tensors), causal=True)),
    "pybind11, torch read in place, from_numpy out": lambda: torch.from_numpy(
        with_pybind11.call_reading_torch(*tensors, causal=True)),
    "nanobind, torch in and out (DLPack)": lambda: with_nanobind.call_torch(*tensors,
                                                                            causal=True),
}
best = {name: float("inf") for name in cases}
for _ in range(7):  # rounds alternate the cases, so a slow moment falls on all of them
    for name, fn in cases.items():
        best[name] = min(best[name], min(timeit.repeat(fn, number=5000, repeat=3)) / 5000)
for name, seconds in best.items():
    print(f"{name:52s} {seconds * 1e6:6.2f} us")
