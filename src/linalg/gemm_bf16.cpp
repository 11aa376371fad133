// See gemm_bf16.hpp. Each call rounds its float operands into bfloat16 buffers of the calling
// thread, as they are stored (op() is then a matter of the descriptors' strides; operands
// rounded already are read in place), and runs a oneDNN matmul primitive made for that shape: made
// once per shape and thread and kept, since making one costs far more than a product of a GPT's
// size.
#include "src/linalg/gemm_bf16.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <tuple>
#include <vector>

#include "attn/bfloat16.hpp"
#include "attn/error.hpp"
#include "src/core/parallel_ranges.hpp"
#include "src/kernels/bfloat16.hpp"
#include "src/linalg/onednn_library.hpp"

namespace attn::detail {
namespace {

std::atomic<bool> g_force_fallback{false};

void check(dnnl_status_t status, const char* what) {
  ATTN_CHECK(status == dnnl_success, "gemm (bf16): oneDNN ", what, " failed with status ",
             static_cast<int>(status));
}

dnnl_engine_t cpu_engine() {
  static const dnnl_engine_t engine = [] {
    dnnl_engine_t e = nullptr;
    check(onednn().engine_create(&e, dnnl_cpu, 0), "engine_create");
    return e;
  }();
  return engine;
}

// What a primitive is made for: the product's shape and layout, alpha and beta.
using ShapeKey = std::tuple<int64_t, int64_t, int64_t, char, char, int64_t, float, float>;

struct Primitive {
  dnnl_primitive_t primitive = nullptr;  // null: no bf16 kernel for it on this CPU
  dnnl_memory_t src = nullptr, weights = nullptr, dst = nullptr;
};

void init_matrix(dnnl_memory_desc_t* md, int64_t rows, int64_t cols, int64_t row_stride,
                 int64_t col_stride, dnnl_data_type_t type) {
  const dnnl_dims_t dims = {rows, cols}, strides = {row_stride, col_stride};
  check(onednn().memory_desc_init_by_strides(md, 2, dims, type, strides), "memory_desc_init");
}

// The attributes: output scale alpha, and beta·C added by a "sum" post-op.
dnnl_primitive_attr_t make_attributes(float alpha, float beta) {
  const OneDnn& dnnl = onednn();
  dnnl_primitive_attr_t attr = nullptr;
  check(dnnl.primitive_attr_create(&attr), "primitive_attr_create");
  if (alpha != 1.0f)
    check(dnnl.primitive_attr_set_output_scales(attr, 1, 0, &alpha), "set_output_scales");
  if (beta != 0.0f) {
    dnnl_post_ops_t post_ops = nullptr;
    check(dnnl.post_ops_create(&post_ops), "post_ops_create");
    check(dnnl.post_ops_append_sum(post_ops, beta), "post_ops_append_sum");
    check(dnnl.primitive_attr_set_post_ops(attr, post_ops), "set_post_ops");
    dnnl.post_ops_destroy(post_ops);
  }
  return attr;
}

Primitive make_primitive(const ShapeKey& key) {
  const auto [m, n, k, ta, tb, ldc, alpha, beta] = key;
  const OneDnn& dnnl = onednn();
  dnnl_memory_desc_t src, weights, dst;
  // The operands are stored contiguously as given: op(A) (m, k) is A or Aᵀ of a (k, m) block.
  init_matrix(&src, m, k, ta == 'T' ? 1 : k, ta == 'T' ? m : 1, dnnl_bf16);
  init_matrix(&weights, k, n, tb == 'T' ? 1 : n, tb == 'T' ? k : 1, dnnl_bf16);
  init_matrix(&dst, m, n, ldc, 1, dnnl_f32);
  dnnl_matmul_desc_t desc;
  check(dnnl.matmul_desc_init(&desc, &src, &weights, nullptr, &dst), "matmul_desc_init");
  dnnl_primitive_attr_t attr = make_attributes(alpha, beta);
  dnnl_primitive_desc_t pd = nullptr;
  const dnnl_status_t status = dnnl.primitive_desc_create(&pd, &desc, attr, cpu_engine(), nullptr);
  dnnl.primitive_attr_destroy(attr);
  Primitive p;
  if (status != dnnl_success) return p;  // no kernel for bf16 here (a CPU without AVX-512)
  const dnnl_status_t created = dnnl.primitive_create(&p.primitive, pd);
  dnnl.primitive_desc_destroy(pd);  // before the check: a failure must not leak it
  check(created, "primitive_create");
  check(dnnl.memory_create(&p.src, &src, cpu_engine(), DNNL_MEMORY_NONE), "memory_create");
  check(dnnl.memory_create(&p.weights, &weights, cpu_engine(), DNNL_MEMORY_NONE), "memory_create");
  check(dnnl.memory_create(&p.dst, &dst, cpu_engine(), DNNL_MEMORY_NONE), "memory_create");
  return p;
}

// A thread's stream, primitives and operand buffers, released when the thread ends.
struct ThreadState {
  dnnl_stream_t stream = nullptr;
  std::map<ShapeKey, Primitive> primitives;
  std::vector<uint16_t> a, b;
  std::vector<float> a_wide, b_wide;  // the fallback's rounded operands, as floats

  ~ThreadState() {
    const OneDnn& dnnl = onednn();
    for (auto& [key, p] : primitives) {
      if (p.primitive == nullptr) continue;
      dnnl.memory_destroy(p.src);
      dnnl.memory_destroy(p.weights);
      dnnl.memory_destroy(p.dst);
      dnnl.primitive_destroy(p.primitive);
    }
    if (stream != nullptr) dnnl.stream_destroy(stream);
  }

  const Primitive& primitive_for(const ShapeKey& key) {
    auto it = primitives.find(key);
    if (it == primitives.end()) it = primitives.emplace(key, make_primitive(key)).first;
    return it->second;
  }
};

ThreadState& thread_state() {
  thread_local ThreadState state;
  return state;
}

// C (+)= A·B on the primitive made for their shape, A and B bf16 as its memories describe them.
void execute(ThreadState& t, const Primitive& p, const uint16_t* a, const uint16_t* b, float* c) {
  const OneDnn& dnnl = onednn();
  if (t.stream == nullptr)
    check(dnnl.stream_create(&t.stream, cpu_engine(), dnnl_stream_default_flags), "stream_create");
  // oneDNN's handles are not const; the primitive only reads its source and weights.
  check(dnnl.memory_set_data_handle(p.src, const_cast<uint16_t*>(a)), "memory_set_data_handle");
  check(dnnl.memory_set_data_handle(p.weights, const_cast<uint16_t*>(b)), "memory_set_data_handle");
  check(dnnl.memory_set_data_handle(p.dst, c), "memory_set_data_handle");
  const dnnl_exec_arg_t args[] = {
      {DNNL_ARG_SRC, p.src}, {DNNL_ARG_WEIGHTS, p.weights}, {DNNL_ARG_DST, p.dst}};
  check(dnnl.primitive_execute(p.primitive, t.stream, 3, args), "primitive_execute");
  check(dnnl.stream_wait(t.stream), "stream_wait");
}

}  // namespace

namespace {

// An operand's bits with its rows adjacent ((rows, cols) contiguous): rounded from floats into
// `buffer`, or as given when they are adjacent already, else copied into `buffer`.
const uint16_t* adjacent_bits(const MatrixOperand& x, int64_t rows, int64_t cols,
                              std::vector<uint16_t>& buffer) {
  if (x.bits != nullptr && (x.ld == cols || rows <= 1)) return x.bits;
  buffer.resize(static_cast<size_t>(rows * cols));
  if (x.bits == nullptr) {
    kernels::round_to_bfloat16(x.floats, rows, cols, x.ld, buffer.data());
  } else {
    for (int64_t r = 0; r < rows; ++r)
      std::copy(x.bits + r * x.ld, x.bits + r * x.ld + cols, buffer.data() + r * cols);
  }
  return buffer.data();
}

// The rounded operand back as floats, for the fallback's float product.
void widen(const uint16_t* bits, int64_t count, std::vector<float>& out) {
  out.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[static_cast<size_t>(i)] = from_bfloat16(bits[i]);
}

}  // namespace

void gemm_bf16_one_thread(char ta, char tb, int64_t m, int64_t n, int64_t k, float alpha,
                          MatrixOperand a, MatrixOperand b, float beta, float* c, int64_t ldc) {
  ThreadState& t = thread_state();
  // The operands as stored: A is (m, k), or (k, m) when transposed; B (k, n) or (n, k).
  const int64_t a_rows = ta == 'T' ? k : m, a_cols = ta == 'T' ? m : k;
  const int64_t b_rows = tb == 'T' ? n : k, b_cols = tb == 'T' ? k : n;
  const uint16_t* a_bits = adjacent_bits(a, a_rows, a_cols, t.a);
  const uint16_t* b_bits = adjacent_bits(b, b_rows, b_cols, t.b);

  const OneDnn& dnnl = onednn();
  const Primitive* p =
      g_force_fallback.load() ? nullptr : &t.primitive_for({m, n, k, ta, tb, ldc, alpha, beta});
  if (p == nullptr || p->primitive == nullptr) {
    widen(a_bits, a_rows * a_cols, t.a_wide);
    widen(b_bits, b_rows * b_cols, t.b_wide);
    const dnnl_status_t status = dnnl.sgemm(ta, tb, m, n, k, alpha, t.a_wide.data(), a_cols,
                                            t.b_wide.data(), b_cols, beta, c, ldc);
    check(status, "sgemm");
    return;
  }
  execute(t, *p, a_bits, b_bits, c);
}

void round_rows_to_bfloat16(const float* src, int64_t rows, int64_t cols, int64_t ld,
                            uint16_t* dst) {
  parallel_ranges(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols)),
                  [&](int64_t first, int64_t last) {
                    kernels::round_to_bfloat16(src + first * ld, last - first, cols, ld,
                                               dst + first * cols);
                  });
}

bool gemm_bf16_weights_one_thread(bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                                  const float* a, int64_t lda, const uint16_t* b, int64_t ldb,
                                  float beta, float* c, int64_t ldc) {
  if (g_force_fallback.load()) return false;
  ThreadState& t = thread_state();
  const char tb = trans_b ? 'T' : 'N';
  const Primitive& p = t.primitive_for({m, n, k, 'N', tb, ldc, alpha, beta});
  if (p.primitive == nullptr) return false;
  t.a.resize(static_cast<size_t>(m * k));
  kernels::round_to_bfloat16(a, m, k, lda, t.a.data());
  // The primitive reads B's block with its rows adjacent: in place when they are, else copied.
  const int64_t b_rows = trans_b ? n : k, b_cols = trans_b ? k : n;
  const uint16_t* weights = b;
  if (ldb != b_cols) {
    t.b.resize(static_cast<size_t>(b_rows * b_cols));
    for (int64_t r = 0; r < b_rows; ++r)
      std::copy(b + r * ldb, b + r * ldb + b_cols, t.b.data() + r * b_cols);
    weights = t.b.data();
  }
  execute(t, p, t.a.data(), weights, c);
  return true;
}

bool use_bf16_fallback_for_test(bool fallback) {
  g_force_fallback.store(fallback);
  // Whether this CPU has the kernel: a primitive for a small product can be made.
  return thread_state().primitive_for({16, 16, 16, 'N', 'N', 16, 1.0f, 0.0f}).primitive != nullptr;
}

}  // namespace attn::detail
