// oneDNN, loaded when the first matrix product needs it rather than when the program starts.
//
// Linking libdnnl.so the usual way costs every process ~3 ms of relocations and ~5 MiB of
// resident memory before main() (measured: a hello-world linked to it went from 1.1 to 6.0 MiB
// and from 1.6 to 4.9 ms), which commands that never multiply matrices — `attn bpe encode`,
// `attn --help` — paid for nothing. So the library is opened with dlopen on first use, and the
// three functions gemm.cpp needs are looked up in it (OpenMP's come from the libgomp that
// oneDNN itself loads). Internal to the library.
#pragma once

#include <dnnl.h>

namespace attn::detail {

struct OneDnn {
  dnnl_status_t (*sgemm)(char transa, char transb, dnnl_dim_t m, dnnl_dim_t n, dnnl_dim_t k,
                         float alpha, const float* a, dnnl_dim_t lda, const float* b,
                         dnnl_dim_t ldb, float beta, float* c, dnnl_dim_t ldc);
  int (*omp_get_max_threads)();
  void (*omp_set_num_threads)(int);
};

// Opens oneDNN the first time (thread-safe) and returns its functions. Throws attn::Error
// naming the library and dlopen's reason if it is missing or lacks a symbol.
const OneDnn& onednn();

}  // namespace attn::detail
