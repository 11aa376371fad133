// Products of one row vector with a matrix, the shape of every weight product when a model
// generates one token: y = alpha·x·op(W) + beta·y. Memory-bound (each weight is used once), so
// the kernels stream W in order and keep their sums in registers or in L1. Vectorised with
// Highway; each y[j] is summed in an order fixed by k alone.
//
// W may be float or bfloat16 (uint16_t, a float's top 16 bits: half the bytes to read). A
// bfloat16 weight is widened to the float it stands for, and the sums run in float in the same
// order, so the two agree exactly when the float W holds the bfloat16 values.
#pragma once

#include <cstdint>

namespace attn::kernels {

// W (k, n) row-major with leading dimension ldw: y[j] = alpha·Σ_i x[i]·W[i, j] + beta·y[j] for
// j < n. Rows of W are added into y (which stays in L1) four at a time, one from each quarter
// of W's rows, so that W is read as four long runs of addresses.
// beta 0 ignores y's values (NaN included).
void gemv_rows(const float* x, const float* w, int64_t k, int64_t n, int64_t ldw, float alpha,
               float beta, float* y);

// W (n, k) row-major with leading dimension ldw, used transposed: y[j] = alpha·dot(x, W[j, :])
// + beta·y[j]. Four rows of W at a time, one from each quarter of W's rows, each read whole.
void gemv_dots(const float* x, const float* w, int64_t k, int64_t n, int64_t ldw, float alpha,
               float beta, float* y);

// The same with bfloat16 weights.
void gemv_rows(const float* x, const uint16_t* w, int64_t k, int64_t n, int64_t ldw, float alpha,
               float beta, float* y);
void gemv_dots(const float* x, const uint16_t* w, int64_t k, int64_t n, int64_t ldw, float alpha,
               float beta, float* y);

}  // namespace attn::kernels
