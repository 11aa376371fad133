#include "src/linalg/onednn_library.hpp"

#include <dlfcn.h>

#include "attn/error.hpp"
#include "src/core/simd_cap.hpp"

#ifndef ATTN_DNNL_LIBRARY
#error "ATTN_DNNL_LIBRARY (oneDNN's soname, e.g. libdnnl.so.2) is set by CMakeLists.txt"
#endif

namespace attn::detail {
namespace {

const char* last_dl_error() {
  const char* reason = dlerror();
  return reason != nullptr ? reason : "unknown reason";
}

// dlsym into a typed function pointer; the symbol must exist.
template <typename Function>
void bind(void* library, const char* name, Function*& out) {
  void* symbol = dlsym(library, name);
  ATTN_CHECK(symbol != nullptr, "cannot find ", name, " in ", ATTN_DNNL_LIBRARY, ": ",
             last_dl_error());
  out = reinterpret_cast<Function*>(symbol);
}

// limit_simd's cap (attn/simd.hpp), which oneDNN takes only before its first primitive.
void cap_instruction_set(void* library) {
  dnnl_cpu_isa_t isa = dnnl_cpu_isa_all;
  switch (simd_cap()) {
    case SimdCap::kBest:
      break;
    case SimdCap::kAvx512:
      isa = dnnl_cpu_isa_avx512_core_bf16;
      break;
    case SimdCap::kAvx2:
      isa = dnnl_cpu_isa_avx2;
      break;
    case SimdCap::kPortable:
      isa = dnnl_cpu_isa_sse41;  // oneDNN's least
      break;
  }
  matrix_library_opened();
  if (isa == dnnl_cpu_isa_all) return;
  dnnl_status_t (*set_max_cpu_isa)(dnnl_cpu_isa_t) = nullptr;
  bind(library, "dnnl_set_max_cpu_isa", set_max_cpu_isa);
  ATTN_CHECK(set_max_cpu_isa(isa) == dnnl_success, "oneDNN refused the SIMD cap of limit_simd");
}

OneDnn open_onednn() {
  // RTLD_LOCAL: oneDNN's symbols stay out of the global namespace; the handle still
  // searches its dependencies (libgomp) for the OpenMP functions.
  void* library = dlopen(ATTN_DNNL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  ATTN_CHECK(library != nullptr, "cannot load oneDNN (", ATTN_DNNL_LIBRARY,
             "), which matrix products need: ", last_dl_error(),
             " (Debian: apt-get install libdnnl2)");
  OneDnn functions{};
  bind(library, "dnnl_sgemm", functions.sgemm);
  bind(library, "omp_get_max_threads", functions.omp_get_max_threads);
  bind(library, "omp_set_num_threads", functions.omp_set_num_threads);
  bind(library, "dnnl_engine_create", functions.engine_create);
  bind(library, "dnnl_stream_create", functions.stream_create);
  bind(library, "dnnl_stream_wait", functions.stream_wait);
  bind(library, "dnnl_memory_desc_init_by_strides", functions.memory_desc_init_by_strides);
  bind(library, "dnnl_matmul_desc_init", functions.matmul_desc_init);
  bind(library, "dnnl_primitive_attr_create", functions.primitive_attr_create);
  bind(library, "dnnl_primitive_attr_destroy", functions.primitive_attr_destroy);
  bind(library, "dnnl_primitive_attr_set_output_scales",
       functions.primitive_attr_set_output_scales);
  bind(library, "dnnl_primitive_attr_set_post_ops", functions.primitive_attr_set_post_ops);
  bind(library, "dnnl_post_ops_create", functions.post_ops_create);
  bind(library, "dnnl_post_ops_destroy", functions.post_ops_destroy);
  bind(library, "dnnl_post_ops_append_sum", functions.post_ops_append_sum);
  bind(library, "dnnl_primitive_desc_create", functions.primitive_desc_create);
  bind(library, "dnnl_primitive_desc_destroy", functions.primitive_desc_destroy);
  bind(library, "dnnl_primitive_create", functions.primitive_create);
  bind(library, "dnnl_primitive_execute", functions.primitive_execute);
  bind(library, "dnnl_memory_create", functions.memory_create);
  bind(library, "dnnl_memory_set_data_handle", functions.memory_set_data_handle);
  bind(library, "dnnl_memory_destroy", functions.memory_destroy);
  bind(library, "dnnl_primitive_destroy", functions.primitive_destroy);
  bind(library, "dnnl_stream_destroy", functions.stream_destroy);
  cap_instruction_set(library);
  return functions;  // the library stays loaded until the process ends
}

}  // namespace

const OneDnn& onednn() {
  static const OneDnn functions = open_onednn();
  return functions;
}

}  // namespace attn::detail
