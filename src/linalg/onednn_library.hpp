// oneDNN, loaded when the first matrix product needs it rather than when the program starts.
//
// Linking libdnnl.so the usual way costs every process ~3 ms of relocations and ~5 MiB of
// resident memory before main() (measured: a hello-world linked to it went from 1.1 to 6.0 MiB
// and from 1.6 to 4.9 ms), which commands that never multiply matrices — `attn bpe encode`,
// `attn --help` — paid for nothing. So the library is opened with dlopen on first use, and the
// functions gemm.cpp needs are looked up in it (OpenMP's come from the libgomp that
// oneDNN itself loads), with the matmul primitive's functions for the bf16 products.
// Internal to the library.
#pragma once

#include <dnnl.h>

namespace attn::detail {

struct OneDnn {
  dnnl_status_t (*sgemm)(char transa, char transb, dnnl_dim_t m, dnnl_dim_t n, dnnl_dim_t k,
                         float alpha, const float* a, dnnl_dim_t lda, const float* b,
                         dnnl_dim_t ldb, float beta, float* c, dnnl_dim_t ldc);
  int (*omp_get_max_threads)();
  void (*omp_set_num_threads)(int);

  // The matmul primitive, for products of bfloat16 operands (src/gemm_bf16.cpp).
  dnnl_status_t (*engine_create)(dnnl_engine_t*, dnnl_engine_kind_t, size_t);
  dnnl_status_t (*stream_create)(dnnl_stream_t*, dnnl_engine_t, unsigned);
  dnnl_status_t (*stream_wait)(dnnl_stream_t);
  dnnl_status_t (*memory_desc_init_by_strides)(dnnl_memory_desc_t*, int, const dnnl_dims_t,
                                               dnnl_data_type_t, const dnnl_dims_t);
  dnnl_status_t (*matmul_desc_init)(dnnl_matmul_desc_t*, const dnnl_memory_desc_t*,
                                    const dnnl_memory_desc_t*, const dnnl_memory_desc_t*,
                                    const dnnl_memory_desc_t*);
  dnnl_status_t (*primitive_attr_create)(dnnl_primitive_attr_t*);
  dnnl_status_t (*primitive_attr_destroy)(dnnl_primitive_attr_t);
  dnnl_status_t (*primitive_attr_set_output_scales)(dnnl_primitive_attr_t, dnnl_dim_t, int,
                                                    const float*);
  dnnl_status_t (*primitive_attr_set_post_ops)(dnnl_primitive_attr_t, const_dnnl_post_ops_t);
  dnnl_status_t (*post_ops_create)(dnnl_post_ops_t*);
  dnnl_status_t (*post_ops_destroy)(dnnl_post_ops_t);
  dnnl_status_t (*post_ops_append_sum)(dnnl_post_ops_t, float);
  dnnl_status_t (*primitive_desc_create)(dnnl_primitive_desc_t*, const_dnnl_op_desc_t,
                                         const_dnnl_primitive_attr_t, dnnl_engine_t,
                                         const_dnnl_primitive_desc_t);
  dnnl_status_t (*primitive_desc_destroy)(dnnl_primitive_desc_t);
  dnnl_status_t (*primitive_create)(dnnl_primitive_t*, const_dnnl_primitive_desc_t);
  dnnl_status_t (*primitive_execute)(const_dnnl_primitive_t, dnnl_stream_t, int,
                                     const dnnl_exec_arg_t*);
  dnnl_status_t (*memory_create)(dnnl_memory_t*, const dnnl_memory_desc_t*, dnnl_engine_t, void*);
  dnnl_status_t (*memory_set_data_handle)(dnnl_memory_t, void*);
  dnnl_status_t (*memory_destroy)(dnnl_memory_t);
  dnnl_status_t (*primitive_destroy)(dnnl_primitive_t);
  dnnl_status_t (*stream_destroy)(dnnl_stream_t);
};

// Opens oneDNN the first time (thread-safe) and returns its functions. Throws attn::Error
// naming the library and dlopen's reason if it is missing or lacks a symbol.
const OneDnn& onednn();

// OpenMP limited to one thread on this thread while it lives (the previous setting restored
// after, also when the product throws): each of attn's pool workers runs its own block.
class OneOpenMpThread {
 public:
  OneOpenMpThread() : dnnl_(onednn()), previous_(dnnl_.omp_get_max_threads()) {
    dnnl_.omp_set_num_threads(1);
  }
  ~OneOpenMpThread() { dnnl_.omp_set_num_threads(previous_); }
  OneOpenMpThread(const OneOpenMpThread&) = delete;
  OneOpenMpThread& operator=(const OneOpenMpThread&) = delete;

 private:
  const OneDnn& dnnl_;
  const int previous_;
};

}  // namespace attn::detail
