// attn.MultiHeadAttention (forward, backward, decode through attn.KVCache), attn.TokenEmbedding,
// attn.PositionalEncoding, attn.add_positional.
#include <pybind11/stl.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "arrays.hpp"
#include "attn/embedding.hpp"
#include "attn/gemm.hpp"
#include "attn/kv_cache.hpp"
#include "attn/mha.hpp"
#include "bindings.hpp"

namespace attn::python {
namespace {

using namespace pybind11::literals;

// The layer and what its last training forward kept for backward. Threads: every call copies
// the handles of the weights (and of `saved`) while it holds the GIL and computes on its copies
// without it, and `saved` is replaced only under the GIL; so a call never sees a half-assigned
// tensor, and concurrent forwards each give the one-thread answer. backward() pairs with the
// last forward() to finish, from whichever thread.
struct PyMha {
  MultiHeadAttention layer;
  MhaActivations saved;
  bool has_forward = false;
};

// A KVCache is one caller's state, like a generator: while a decode into it runs (the GIL
// released), another thread's decode, reset or position read is refused with a ValueError
// rather than interleaved with it. A guard marks the cache busy for its lifetime.
class CacheInUse {
 public:
  explicit CacheInUse(const KVCache& cache) : cache_(&cache) {
    const std::lock_guard lock(mutex());
    if (!busy().insert(cache_).second) {
      throw py::value_error(
          "KVCache: another thread is decoding into this cache right now; a cache is one "
          "caller's state (give each thread its own, layer.make_cache)");
    }
  }
  ~CacheInUse() {
    const std::lock_guard lock(mutex());
    busy().erase(cache_);
  }
  CacheInUse(const CacheInUse&) = delete;
  CacheInUse& operator=(const CacheInUse&) = delete;

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::unordered_set<const KVCache*>& busy() {
    static std::unordered_set<const KVCache*> caches;
    return caches;
  }
  const KVCache* cache_;
};

Dtype cache_dtype(const std::string& name) { return dtype_from_string(name, "dtype"); }

SdpaOptions layer_options(bool causal, std::optional<int64_t> window) {
  SdpaOptions o;
  o.causal = causal;
  o.window = window.value_or(0);
  return o;
}

// A layer's weight: a numpy view of the tensor (no copy), or the tensor replaced by a new array.
#define ATTN_WEIGHT(field)                                                                 \
  def_property(                                                                            \
      #field,                                                                              \
      [](PyMha& m) {                                                                       \
        return m.layer.field.defined() ? py::object(to_array(m.layer.field)) : py::none(); \
      },                                                                                   \
      [](PyMha& m, const py::handle& a) { m.layer.field = to_optional_tensor(a, #field); })

}  // namespace

void add_layers(py::module_& m) {
  py::class_<KVCache>(m, "KVCache", R"(The key/value cache of one attention layer for decoding:
(batch, n_kv_heads, capacity, head_dim) for K and V, float32, bfloat16 ("bf16", half the bytes
read per step) or "q8" (each row int8 with one bfloat16 scale: about a quarter of the bytes,
each value within max|row| / 254). window > 0 keeps the last `window` positions in a ring buffer.)")
      .def(py::init([](int64_t batch, std::optional<int64_t> n_kv_heads, int64_t head_dim,
                       int64_t capacity, int64_t window, const std::string& dtype,
                       std::optional<int64_t> kv_heads) {
             // kv_heads: the keyword's name before 0.2, kept one release.
             if (kv_heads) {
               if (n_kv_heads) {
                 throw py::value_error(
                     "KVCache: give n_kv_heads or its old name kv_heads, not both");
               }
               if (PyErr_WarnEx(PyExc_DeprecationWarning,
                                "KVCache(kv_heads=...) is now n_kv_heads=...", 1) < 0) {
                 throw py::error_already_set();
               }
               n_kv_heads = kv_heads;
             }
             KVCacheConfig c;
             c.batch = batch;
             c.n_kv_heads = n_kv_heads.value_or(1);
             c.head_dim = head_dim;
             c.capacity = capacity;
             c.window = window;
             c.dtype = cache_dtype(dtype);
             return KVCache(c);
           }),
           "batch"_a = 1, "n_kv_heads"_a = py::none(), "head_dim"_a = 64, "capacity"_a = 0,
           "window"_a = 0, "dtype"_a = "f32", "kv_heads"_a = py::none())
      .def_property_readonly(
          "position",
          [](const KVCache& c) {
            const CacheInUse guard(c);
            return c.position();
          },
          "positions appended since reset")
      .def_property_readonly("capacity", &KVCache::capacity)
      .def_property_readonly(
          "dtype", [](const KVCache& c) { return to_string(c.config().dtype); },
          "the storage: \"f32\", \"bf16\" or \"q8\"")
      .def("reset", [](KVCache& c) {
        const CacheInUse guard(c);
        c.reset();
      });

  py::class_<PyMha>(m, "MultiHeadAttention", R"(MultiHeadAttention(d_model, n_heads, n_kv_heads=0,
                   bias=False, rope=False, seed=0, precision="f32")

The multi-head attention layer with its own weights: wqkv (d_model, (H + 2·H_kv)·d_head), Q's
columns then K's then V's; bqkv; wo (H·d_head, d_model); bo — numpy views, assignable.
forward(x, causal=…) for a whole sequence (kept for backward), backward(d_y) for the gradients,
decode(x, cache) for new tokens against a KVCache. precision "bf16" rounds the products'
operands to bfloat16 (sums in float).)")
      .def(py::init([](int64_t d_model, int64_t n_heads, int64_t n_kv_heads, bool bias, bool rope,
                       uint64_t seed, const std::string& precision) {
             MhaConfig c;
             c.d_model = d_model;
             c.n_heads = n_heads;
             c.n_kv_heads = n_kv_heads;
             c.bias = bias;
             c.rope = rope;
             c.seed = seed;
             c.precision = matmul_precision_from_string(precision);
             return std::make_unique<PyMha>(PyMha{MultiHeadAttention(c), {}, false});
           }),
           "d_model"_a, "n_heads"_a, "n_kv_heads"_a = 0, "bias"_a = false, "rope"_a = false,
           "seed"_a = 0, "precision"_a = "f32")
      .ATTN_WEIGHT(wqkv)
      .ATTN_WEIGHT(bqkv)
      .ATTN_WEIGHT(wo)
      .ATTN_WEIGHT(bo)
      .def_property_readonly("head_dim", [](const PyMha& m) { return m.layer.head_dim(); })
      .def(
          "forward",
          [](PyMha& m, const py::handle& x, bool causal, std::optional<int64_t> window) {
            const Tensor tx = to_tensor(x, "x");
            const SdpaOptions o = layer_options(causal, window);
            const MultiHeadAttention layer = m.layer;
            MhaActivations saved;
            Tensor y;
            {
              py::gil_scoped_release unlocked;
              y = layer.forward(tx, o, saved);
            }
            m.saved = std::move(saved);
            m.has_forward = true;
            return to_array(y);
          },
          "x (B, T, d_model) -> y (B, T, d_model); the activations are kept for backward.", "x"_a,
          py::kw_only(), "causal"_a = false, "window"_a = py::none())
      .def(
          "backward",
          [](PyMha& m, const py::handle& d_y) {
            if (!m.has_forward) throw py::value_error("backward: call forward(x) first");
            const Tensor td = to_tensor(d_y, "d_y");
            const MultiHeadAttention layer = m.layer;
            const MhaActivations saved = m.saved;
            MhaGradients g;
            {
              py::gil_scoped_release unlocked;
              g = layer.backward(saved, td);
            }
            py::dict out;
            out["dx"] = to_array(g.dx);
            out["dwqkv"] = to_array(g.dwqkv);
            out["dwo"] = to_array(g.dwo);
            if (g.dbqkv.defined()) out["dbqkv"] = to_array(g.dbqkv);
            if (g.dbo.defined()) out["dbo"] = to_array(g.dbo);
            return out;
          },
          "The gradients for dL/dy = d_y after forward(x): a dict of dx, dwqkv, dwo (and dbqkv, "
          "dbo with biases).",
          "d_y"_a)
      .def(
          "decode",
          [](PyMha& m, const py::handle& x, KVCache& cache) {
            const Tensor tx = to_tensor(x, "x");
            const MultiHeadAttention layer = m.layer;
            const CacheInUse guard(cache);
            Tensor y;
            {
              py::gil_scoped_release unlocked;
              y = layer.forward(tx, cache);
            }
            return to_array(y);
          },
          "New tokens x (B, T_new, d_model) at positions cache.position …: their keys and values "
          "are appended, then the queries attend to the whole cache.",
          "x"_a, "cache"_a)
      .def(
          "make_cache",
          [](const PyMha& m, int64_t batch, int64_t capacity, const std::string& dtype,
             int64_t window) {
            return m.layer.make_cache(batch, capacity, cache_dtype(dtype), window);
          },
          "A KVCache shaped for this layer.", "batch"_a, "capacity"_a, "dtype"_a = "f32",
          "window"_a = 0);

  py::class_<TokenEmbedding>(m, "TokenEmbedding", R"(TokenEmbedding(vocab_size, d_model, seed=0)

A table of learnt vectors, one row per token id; weight ~ N(0, 1) from the seed.)")
      .def(py::init<int64_t, int64_t, uint64_t>(), "vocab_size"_a, "d_model"_a, "seed"_a = 0)
      .def(
          "forward",
          [](const TokenEmbedding& e, const std::vector<int64_t>& ids) {
            return to_array(e.forward(ids));
          },
          "ids (T) -> (T, d_model)", "ids"_a)
      .def("__call__", [](const TokenEmbedding& e,
                          const std::vector<int64_t>& ids) { return to_array(e.forward(ids)); })
      .def_property(
          "weight", [](TokenEmbedding& e) { return to_array(e.weight); },
          [](TokenEmbedding& e, const py::handle& w) { e.weight = to_tensor(w, "weight"); })
      .def_property_readonly("vocab_size", &TokenEmbedding::vocab_size)
      .def_property_readonly("d_model", &TokenEmbedding::d_model);

  py::class_<PositionalEncoding>(m, "PositionalEncoding", R"(PositionalEncoding(max_len, d_model)

The sinusoidal table of "Attention Is All You Need": PE[p, 2i] = sin(p / 10000^(2i/d)),
PE[p, 2i+1] = cos(…).)")
      .def(py::init<int64_t, int64_t>(), "max_len"_a, "d_model"_a)
      .def(
          "forward", [](const PositionalEncoding& p, int64_t n) { return to_array(p.forward(n)); },
          "PE[0:length] (length, d_model)", "length"_a)
      .def(
          "add_to",
          [](const PositionalEncoding& p, const py::handle& x) {
            return to_array(p.add_to(to_tensor(x, "x")));
          },
          "x + PE[0:T] for x (T, d_model) or (B, T, d_model)", "x"_a)
      .def_property_readonly("table",
                             [](const PositionalEncoding& p) { return to_array(p.table()); });

  m.def(
      "add_positional",
      [](const py::handle& x, const py::handle& pe) {
        if (py::isinstance<PositionalEncoding>(pe)) {
          return to_array(pe.cast<const PositionalEncoding&>().add_to(to_tensor(x, "x")));
        }
        return to_array(add_positional(to_tensor(x, "x"), to_tensor(pe, "pe")));
      },
      "add_positional(x, pe): x + pe[0:T], pe a (max_len, d_model) table or a "
      "PositionalEncoding.",
      "x"_a, "pe"_a);
}

}  // namespace attn::python
