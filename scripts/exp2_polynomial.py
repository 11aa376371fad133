#!/usr/bin/python3
"""The polynomial of Exp2Flushed (src/kernels/simd_common-inl.h): 2^r on [-1/2, 1/2].

p(r) = 1 + c1 r + ... + cD r^D, p(0) = 1 exactly (a row's largest score gets probability 1),
with the least largest relative error |p(r) - 2^r| / 2^r: the minimax fit, by Lawson's
algorithm (least squares, reweighted by each point's error until the weights settle on the
error's extremes). Prints the coefficients as floats and the error of evaluating them in float
arithmetic by Horner's rule, as the kernel does.

    scripts/exp2_polynomial.py [DEGREE=6]

Degree 6: 2.0e-9 in exact arithmetic, 1.0e-7 in float (rounding dominates); degree 5 would
be 9e-8 and 1.9e-7.
"""
import sys

import numpy as np


def fit(degree, iterations=3000):
    r = np.cos(np.linspace(0.0, np.pi, 4001)) * 0.5  # points crowd at the ends, as the error does
    exact = 2.0**r
    # Relative error of 1 + sum(c_k r^k): (sum(c_k r^k) - (2^r - 1)) / 2^r.
    powers = np.stack([r**k for k in range(1, degree + 1)], axis=1) / exact[:, None]
    target = (exact - 1.0) / exact
    weights = np.full(r.shape, 1.0 / r.size)
    for _ in range(iterations):
        root = np.sqrt(weights)
        coefficients, *_ = np.linalg.lstsq(powers * root[:, None], target * root, rcond=None)
        error = np.abs(powers @ coefficients - target)
        weights *= error
        weights /= weights.sum()
    return [1.0] + list(coefficients), float(error.max())


def float_horner_error(coefficients):
    c = [np.float32(x) for x in coefficients]
    r = np.linspace(-0.5, 0.5, 2_000_001).astype(np.float32)
    p = np.full_like(r, c[-1])
    for ck in c[-2::-1]:
        p = (p * r + ck).astype(np.float32)
    exact = 2.0 ** r.astype(np.float64)
    return float(np.max(np.abs(p - exact) / exact))


def main():
    degree = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    coefficients, error = fit(degree)
    print(f"degree {degree}: relative error {error:.2e} exact, "
          f"{float_horner_error(coefficients):.2e} by Horner in float")
    for k, c in reversed(list(enumerate(coefficients))):
        print(f"  c{k} = {np.float32(c):.9e}f")


if __name__ == "__main__":
    main()
