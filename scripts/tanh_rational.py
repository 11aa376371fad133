#!/usr/bin/python3
"""The rational function of TanhRational (src/kernels/score_variants-inl.h): tanh on [-9, 9].

tanh(u) = u·P(u²) / Q(u²), P and Q of degree 4 in u², Q(0) = 1, fitted for the least largest
relative error by the linearised form u·P − tanh(u)·(Q − 1) = tanh(u), solved by least squares
and reweighted toward the points of largest error (Lawson's idea, as exp2_polynomial.py).
Past |u| = 9, tanh is ±1 to float's precision, so the kernel clamps u there. Prints the
coefficients (highest power first, as Horner wants them) and the error of evaluating them in
float arithmetic.

    scripts/tanh_rational.py

Degree 4/4: 5e-8 in exact arithmetic, 4e-7 in float (rounding dominates).
"""
import numpy as np

DEGREE = 4
LIMIT = 9.0


def fit(iterations=30):
    u = np.concatenate([np.linspace(1e-4, LIMIT, 20000),
                        (1.0 - np.cos(np.linspace(0.0, np.pi, 20000))) * LIMIT / 2 + 1e-6])
    t = np.tanh(u)
    z = u * u
    # Columns: u·z^k for P (k = 0..D), −t·z^k for Q (k = 1..D); each row divided by t, so the
    # residual is the relative error (to first order).
    columns = [u * z**k for k in range(DEGREE + 1)] + [-t * z**k for k in range(1, DEGREE + 1)]
    system = np.stack(columns, axis=1) / t[:, None]
    weights = np.ones_like(u)
    for _ in range(iterations):
        c, *_ = np.linalg.lstsq(system * weights[:, None], weights, rcond=None)
        p, q = c[:DEGREE + 1], np.concatenate([[1.0], c[DEGREE + 1:]])
        error = np.abs(u * np.polyval(p[::-1], z) / np.polyval(q[::-1], z) / t - 1.0)
        weights *= 1.0 + 50.0 * error / error.max()
    return p, q, error.max()


def float_error(p, q):
    u = np.linspace(-LIMIT, LIMIT, 2000001, dtype=np.float32)
    z = u * u
    P, Q = np.float32(0.0), np.float32(0.0)
    for c in p[::-1]:
        P = P * z + np.float32(c)
    for c in q[::-1]:
        Q = Q * z + np.float32(c)
    exact = np.tanh(u.astype(np.float64))
    nonzero = exact != 0.0
    return np.max(np.abs((u * P / Q)[nonzero] / exact[nonzero] - 1.0))


def main():
    p, q, exact_error = fit()
    print("P (highest first):", ", ".join(f"{c:.10e}f" for c in p[::-1]))
    print("Q (highest first):", ", ".join(f"{c:.10e}f" for c in q[::-1]))
    print(f"relative error: {exact_error:.2e} exact, {float_error(p, q):.2e} in float")


if __name__ == "__main__":
    main()
