// attn.sdpa, attn.sdpa_backward, attn.sdpa_varlen(_backward), attn.scaled_dot_product_attention
// (PyTorch's signature), attn.reference.sdpa, attn.causal_mask, attn.split_heads / merge_heads,
// attn.multi_head_attention. Every kernel runs with the GIL released.
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "attn/mask.hpp"
#include "attn/mha.hpp"
#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "attn/sdpa_bfloat16.hpp"
#include "attn/sdpa_varlen.hpp"
#include "attn/tensor.hpp"
#include "bindings.hpp"

namespace attn::python {
namespace {

using namespace pybind11::literals;

// A mask argument: booleans or integers allow (non-zero = allowed); floats are added.
Mask to_mask(const py::handle& mask) {
  if (mask.is_none()) return {};
  const bool allows = is_boolean_like(mask);
  Tensor values = to_tensor(mask, "mask", Accept::kMask);
  return allows ? Mask::allow(std::move(values)) : Mask::additive(std::move(values));
}

// softcap, alibi_slopes, sinks and the products' precision (attn/sdpa.hpp), as the Python
// functions take them.
struct Variants {
  float softcap = 0.0f;
  std::optional<std::vector<float>> alibi_slopes, sinks;
  std::string precision = "f32";  // of the products: "f32" or "bf16"
};

SdpaOptions options_of(bool causal, std::optional<int64_t> window, const py::handle& mask,
                       std::optional<float> scale, std::optional<std::vector<int64_t>> key_lengths,
                       std::optional<std::vector<int64_t>> key_starts,
                       const std::string& causal_align, const Variants& variants) {
  SdpaOptions o;
  o.softcap = variants.softcap;
  if (variants.alibi_slopes) o.alibi_slopes = *variants.alibi_slopes;
  if (variants.sinks) o.sinks = *variants.sinks;
  o.precision = float_dtype_from_string(variants.precision, "precision");
  o.causal = causal;
  o.window = window.value_or(0);
  o.mask = to_mask(mask);
  o.scale = scale;
  if (key_lengths) o.key_lengths = *key_lengths;
  if (key_starts) o.key_starts = *key_starts;
  o.causal_align = causal_align_from_string(causal_align);
  return o;
}

py::object sdpa_py(const py::handle& q, const py::handle& k, const py::handle& v, bool causal,
                   std::optional<int64_t> window, const py::handle& mask,
                   std::optional<float> scale, std::optional<std::vector<int64_t>> key_lengths,
                   std::optional<std::vector<int64_t>> key_starts, const std::string& causal_align,
                   bool return_weights, bool return_lse, float softcap,
                   std::optional<std::vector<float>> alibi_slopes,
                   std::optional<std::vector<float>> sinks, const std::string& precision) {
  const Tensor tq = to_tensor(q, "q"), tk = to_tensor(k, "k"), tv = to_tensor(v, "v");
  SdpaOptions o =
      options_of(causal, window, mask, scale, std::move(key_lengths), std::move(key_starts),
                 causal_align, {softcap, std::move(alibi_slopes), std::move(sinks), precision});
  o.return_weights = return_weights;
  SdpaResult r;
  {
    py::gil_scoped_release unlocked;
    r = sdpa(tq, tk, tv, o);
  }
  if (!return_weights && !return_lse) return to_array(r.output);
  py::list out;
  out.append(to_array(r.output));
  if (return_weights) out.append(to_array(r.weights));
  if (return_lse) out.append(to_array(r.logsumexp));
  return py::tuple(out);
}

py::tuple sdpa_backward_py(const py::handle& q, const py::handle& k, const py::handle& v,
                           const py::handle& out, const py::handle& lse, const py::handle& d_out,
                           bool causal, std::optional<int64_t> window, const py::handle& mask,
                           std::optional<float> scale,
                           std::optional<std::vector<int64_t>> key_lengths,
                           std::optional<std::vector<int64_t>> key_starts,
                           const std::string& causal_align, float softcap,
                           std::optional<std::vector<float>> alibi_slopes,
                           std::optional<std::vector<float>> sinks, const std::string& precision,
                           bool return_mask_gradient, const py::handle& dmask) {
  const Tensor tq = to_tensor(q, "q"), tk = to_tensor(k, "k"), tv = to_tensor(v, "v"),
               t_out = to_tensor(out, "out"), t_lse = to_tensor(lse, "lse"),
               t_d = to_tensor(d_out, "d_out");
  const Tensor kept = dmask.is_none() ? Tensor{} : to_output_tensor(dmask, "dmask");
  SdpaOptions o =
      options_of(causal, window, mask, scale, std::move(key_lengths), std::move(key_starts),
                 causal_align, {softcap, std::move(alibi_slopes), std::move(sinks), precision});
  o.return_mask_gradient = return_mask_gradient;
  SdpaGradients g;
  {
    py::gil_scoped_release unlocked;
    g = kept.defined() ? sdpa_backward(tq, tk, tv, t_out, t_lse, t_d, o, kept)
                       : sdpa_backward(tq, tk, tv, t_out, t_lse, t_d, o);
  }
  py::list grads;
  for (const Tensor* t : {&g.dq, &g.dk, &g.dv, &g.dsinks}) {
    if (t->defined()) grads.append(to_array(*t));
  }
  if (kept.defined()) {
    grads.append(dmask);  // the caller's own array, written in place
  } else if (g.dmask.defined()) {
    grads.append(to_array(g.dmask));
  }
  return py::tuple(grads);
}

// PyTorch's torch.nn.functional.scaled_dot_product_attention: is_causal is top-left aligned
// (torch.tril), a boolean attn_mask allows where True, a float one is added; K/V heads fewer
// than Q's only with enable_gqa.
py::array torch_sdpa(const py::handle& query, const py::handle& key, const py::handle& value,
                     const py::handle& attn_mask, double dropout_p, bool is_causal,
                     std::optional<float> scale, bool enable_gqa) {
  if (dropout_p != 0.0) {
    throw py::value_error("dropout_p must be 0.0: attn does not implement attention dropout, got " +
                          std::to_string(dropout_p));
  }
  if (is_causal && !attn_mask.is_none()) {
    throw py::value_error("attn_mask and is_causal cannot both be set (as in PyTorch)");
  }
  const Tensor q = to_tensor(query, "query"), k = to_tensor(key, "key"),
               v = to_tensor(value, "value");
  if (!enable_gqa && q.rank() >= 3 && k.rank() == q.rank() && k.dim(-3) != q.dim(-3)) {
    throw py::value_error("query has " + std::to_string(q.dim(-3)) + " heads and key " +
                          std::to_string(k.dim(-3)) + ": pass enable_gqa=True for grouped heads");
  }
  SdpaOptions o;
  o.causal = is_causal;
  o.causal_align = CausalAlign::kTopLeft;
  o.mask = to_mask(attn_mask);
  o.scale = scale;
  SdpaResult r;
  {
    py::gil_scoped_release unlocked;
    r = sdpa(q, k, v, o);
  }
  return to_array(r.output);
}

// attn.torch's inference call in one step: positional arguments, float32 CPU torch tensors read
// in place, no mask. None when an input is anything else (or its heads need enable_gqa; or the
// shapes are ones attn.torch broadcasts, merges or answers without the kernel: batch dims that
// differ, more than 4 dims, none of some dim), and attn.torch then takes its general path, whose
// checks name what is wrong. Keyword matching and the Python-side checks were ~5 µs of a 16 × 16
// call's 18 (C++ alone: 3.5).
py::object torch_plain_sdpa(const py::handle& query, const py::handle& key, const py::handle& value,
                            bool is_causal, std::optional<float> scale, bool enable_gqa) {
  std::optional<Tensor> q = torch_in_place(query), k, v;
  if (!q || !(k = torch_in_place(key)) || !(v = torch_in_place(value))) return py::none();
  for (const Tensor* t : {&*q, &*k, &*v})
    if (t->rank() > 4 || t->numel() == 0 || t->rank() != q->rank()) return py::none();
  for (int d = 0; d + 3 < q->rank(); ++d)  // batch dims PyTorch would broadcast
    if (k->dim(d) != q->dim(d) || v->dim(d) != q->dim(d)) return py::none();
  if (q->rank() >= 3 && v->dim(-3) != k->dim(-3)) return py::none();
  if (!enable_gqa && q->rank() >= 3 && k->dim(-3) != q->dim(-3)) return py::none();
  SdpaOptions o;
  o.causal = is_causal;
  o.causal_align = CausalAlign::kTopLeft;
  o.scale = scale;
  SdpaResult r;
  {
    py::gil_scoped_release unlocked;
    r = sdpa(*q, *k, *v, o);
  }
  return to_array(r.output);
}

// A bfloat16 CPU torch.Tensor as a view of its memory; ValueError for anything else.
Bfloat16View bfloat16_view(const py::handle& t, const char* name) {
  std::optional<Bfloat16View> view = torch_bfloat16_view(t);
  if (!view) throw py::value_error(std::string(name) + " must be a bfloat16 CPU torch.Tensor");
  return *std::move(view);
}

// A bfloat16 CPU torch.Tensor that receives a result: contiguous, of `shape`; ValueError else.
uint16_t* bfloat16_output(const py::handle& t, const Shape& shape, const char* name) {
  const Bfloat16View view = bfloat16_view(t, name);
  if (view.shape != shape || view.strides != contiguous_strides(view.shape))
    throw py::value_error(std::string(name) + " must be a contiguous bfloat16 tensor of shape " +
                          to_string(shape) + ", got " + to_string(view.shape));
  return const_cast<uint16_t*>(view.data);
}

// attn.torch's forward on bfloat16 CPU tensors (attn/sdpa_bfloat16.hpp): query, key and value
// read in place, the output written into `out` (a contiguous bfloat16 tensor of the output's
// shape, which attn.torch allocates); returns the logsumexp. ValueError for an argument that is
// not such a tensor.
py::array torch_sdpa_bfloat16(const py::handle& query, const py::handle& key,
                              const py::handle& value, const py::handle& out, bool causal,
                              const py::handle& mask, std::optional<float> scale,
                              std::optional<std::vector<int64_t>> key_starts, float softcap,
                              std::optional<std::vector<float>> alibi_slopes,
                              std::optional<std::vector<float>> sinks) {
  const Bfloat16View q = bfloat16_view(query, "query"), k = bfloat16_view(key, "key"),
                     v = bfloat16_view(value, "value");
  Shape out_shape = q.shape;
  if (!out_shape.empty() && !v.shape.empty()) out_shape.back() = v.shape.back();
  uint16_t* o = bfloat16_output(out, out_shape, "out");
  SdpaOptions opts =
      options_of(causal, std::nullopt, mask, scale, std::nullopt, std::move(key_starts), "top-left",
                 {softcap, std::move(alibi_slopes), std::move(sinks), "bf16"});
  Tensor lse;
  {
    py::gil_scoped_release unlocked;
    lse = sdpa_bfloat16(q, k, v, o, opts);
  }
  return to_array(lse);
}

// attn.torch's backward on bfloat16 CPU tensors (attn/sdpa_bfloat16.hpp), read in place; lse is
// the forward's float32 logsumexp. dq, dk and dv: contiguous bfloat16 tensors of query's, key's
// and value's shapes (attn.torch allocates them) that receive the gradients, rounded. Returns
// ([dsinks][, dmask]) in float32.
py::tuple torch_sdpa_backward_bfloat16(
    const py::handle& grad_out, const py::handle& query, const py::handle& key,
    const py::handle& value, const py::handle& out, const py::handle& lse, bool causal,
    const py::handle& mask, std::optional<float> scale,
    std::optional<std::vector<int64_t>> key_starts, float softcap,
    std::optional<std::vector<float>> alibi_slopes, std::optional<std::vector<float>> sinks,
    bool return_mask_gradient, const py::handle& dq, const py::handle& dk, const py::handle& dv) {
  const Bfloat16View q = bfloat16_view(query, "query"), k = bfloat16_view(key, "key"),
                     v = bfloat16_view(value, "value"), o = bfloat16_view(out, "out"),
                     d_o = bfloat16_view(grad_out, "grad_out");
  const Bfloat16Gradients into{bfloat16_output(dq, q.shape, "dq"),
                               bfloat16_output(dk, k.shape, "dk"),
                               bfloat16_output(dv, v.shape, "dv")};
  const Tensor t_lse = to_tensor(lse, "lse");
  SdpaOptions opts =
      options_of(causal, std::nullopt, mask, scale, std::nullopt, std::move(key_starts), "top-left",
                 {softcap, std::move(alibi_slopes), std::move(sinks), "bf16"});
  opts.return_mask_gradient = return_mask_gradient;
  SdpaGradients g;
  {
    py::gil_scoped_release unlocked;
    g = sdpa_backward_bfloat16(q, k, v, o, d_o, t_lse, opts, into);
  }
  py::list grads;
  for (const Tensor* t : {&g.dsinks, &g.dmask}) {
    if (t->defined()) grads.append(to_array(*t));
  }
  return py::tuple(grads);
}

py::tuple reference_sdpa(const py::handle& q, const py::handle& k, const py::handle& v, bool causal,
                         std::optional<int64_t> window, const py::handle& mask,
                         std::optional<float> scale,
                         std::optional<std::vector<int64_t>> key_lengths,
                         std::optional<std::vector<int64_t>> key_starts,
                         const std::string& causal_align, float softcap,
                         std::optional<std::vector<float>> alibi_slopes,
                         std::optional<std::vector<float>> sinks, const std::string& precision) {
  const Tensor tq = to_tensor(q, "q"), tk = to_tensor(k, "k"), tv = to_tensor(v, "v");
  const SdpaOptions o =
      options_of(causal, window, mask, scale, std::move(key_lengths), std::move(key_starts),
                 causal_align, {softcap, std::move(alibi_slopes), std::move(sinks), precision});
  SdpaResult r;
  {
    py::gil_scoped_release unlocked;
    r = reference::sdpa(tq, tk, tv, o);
  }
  return py::make_tuple(to_array(r.output), to_array(r.weights));
}

// The boolean causal mask (True = allowed).
py::array causal_mask_py(int64_t tq, std::optional<int64_t> tk, const std::string& align) {
  const Tensor m = causal_mask(tq, tk.value_or(tq), causal_align_from_string(align));
  return to_array(m).attr("astype")("bool");
}

py::object mha_py(const py::handle& x, const py::handle& w_q, const py::handle& w_k,
                  const py::handle& w_v, const py::handle& w_o, int64_t n_heads,
                  const py::handle& mask, bool causal, std::optional<int64_t> window,
                  int64_t n_kv_heads, const py::handle& b_q, const py::handle& b_k,
                  const py::handle& b_v, const py::handle& b_o, bool rope, bool return_weights,
                  bool use_reference) {
  if (n_heads == 0) throw py::type_error("multi_head_attention: n_heads is required");
  const Tensor tx = to_tensor(x, "x"), wq = to_tensor(w_q, "w_q"), wk = to_tensor(w_k, "w_k"),
               wv = to_tensor(w_v, "w_v"), wo = to_optional_tensor(w_o, "w_o");
  SdpaOptions o;
  o.causal = causal;
  o.window = window.value_or(0);
  o.mask = to_mask(mask);
  o.return_weights = return_weights;
  MhaExtras extras;
  extras.n_kv_heads = n_kv_heads;
  extras.bq = to_optional_tensor(b_q, "b_q");
  extras.bk = to_optional_tensor(b_k, "b_k");
  extras.bv = to_optional_tensor(b_v, "b_v");
  extras.bo = to_optional_tensor(b_o, "b_o");
  extras.rope = rope;
  MhaResult r;
  {
    py::gil_scoped_release unlocked;
    r = use_reference ? reference::multi_head_attention(tx, wq, wk, wv, wo, n_heads, o, extras)
                      : multi_head_attention(tx, wq, wk, wv, wo, n_heads, o, extras);
  }
  if (!return_weights) return to_array(r.output);
  return py::make_tuple(to_array(r.output), to_array(r.weights));
}

// Packed variable-length batches (attn/sdpa_varlen.hpp).
SdpaOptions varlen_options(bool causal, std::optional<int64_t> window, std::optional<float> scale,
                           std::optional<std::vector<int64_t>> key_lengths,
                           const std::string& causal_align, const Variants& variants) {
  return options_of(causal, window, py::none(), scale, std::move(key_lengths), std::nullopt,
                    causal_align, variants);
}

py::tuple sdpa_varlen_py(const py::handle& q, const py::handle& k, const py::handle& v,
                         const std::vector<int64_t>& cu_seqlens_q,
                         const std::vector<int64_t>& cu_seqlens_k, bool causal,
                         std::optional<int64_t> window, std::optional<float> scale,
                         std::optional<std::vector<int64_t>> key_lengths,
                         const std::string& causal_align, float softcap,
                         std::optional<std::vector<float>> alibi_slopes,
                         std::optional<std::vector<float>> sinks, const std::string& precision) {
  const Tensor tq = to_tensor(q, "q"), tk = to_tensor(k, "k"), tv = to_tensor(v, "v");
  const SdpaOptions o =
      varlen_options(causal, window, scale, std::move(key_lengths), causal_align,
                     {softcap, std::move(alibi_slopes), std::move(sinks), precision});
  SdpaResult r;
  {
    py::gil_scoped_release unlocked;
    r = sdpa_varlen(tq, tk, tv, cu_seqlens_q, cu_seqlens_k, o);
  }
  return py::make_tuple(to_array(r.output), to_array(r.logsumexp));
}

py::tuple sdpa_varlen_paged_py(const py::handle& q, const py::handle& k_pages,
                               const py::handle& v_pages, const std::vector<int64_t>& cu_seqlens_q,
                               const std::vector<std::vector<int64_t>>& block_table,
                               const std::vector<int64_t>& seqused_k, bool causal,
                               std::optional<int64_t> window, std::optional<float> scale,
                               const std::string& causal_align, float softcap,
                               std::optional<std::vector<float>> alibi_slopes,
                               std::optional<std::vector<float>> sinks,
                               const std::string& precision) {
  const Tensor tq = to_tensor(q, "q"), tk = to_tensor(k_pages, "k_pages"),
               tv = to_tensor(v_pages, "v_pages");
  const SdpaOptions o =
      varlen_options(causal, window, scale, std::nullopt, causal_align,
                     {softcap, std::move(alibi_slopes), std::move(sinks), precision});
  SdpaResult r;
  {
    py::gil_scoped_release unlocked;
    r = sdpa_varlen_paged(tq, tk, tv, cu_seqlens_q, block_table, seqused_k, o);
  }
  return py::make_tuple(to_array(r.output), to_array(r.logsumexp));
}

py::tuple sdpa_varlen_backward_py(
    const py::handle& q, const py::handle& k, const py::handle& v, const py::handle& out,
    const py::handle& lse, const py::handle& d_out, const std::vector<int64_t>& cu_seqlens_q,
    const std::vector<int64_t>& cu_seqlens_k, bool causal, std::optional<int64_t> window,
    std::optional<float> scale, std::optional<std::vector<int64_t>> key_lengths,
    const std::string& causal_align, float softcap, std::optional<std::vector<float>> alibi_slopes,
    std::optional<std::vector<float>> sinks, const std::string& precision) {
  const Tensor tq = to_tensor(q, "q"), tk = to_tensor(k, "k"), tv = to_tensor(v, "v"),
               t_out = to_tensor(out, "out"), t_lse = to_tensor(lse, "lse"),
               t_d = to_tensor(d_out, "d_out");
  const SdpaOptions o =
      varlen_options(causal, window, scale, std::move(key_lengths), causal_align,
                     {softcap, std::move(alibi_slopes), std::move(sinks), precision});
  SdpaGradients g;
  {
    py::gil_scoped_release unlocked;
    g = sdpa_varlen_backward(tq, tk, tv, t_out, t_lse, t_d, cu_seqlens_q, cu_seqlens_k, o);
  }
  py::list grads;
  for (const Tensor* t : {&g.dq, &g.dk, &g.dv, &g.dsinks}) {
    if (t->defined()) grads.append(to_array(*t));
  }
  return py::tuple(grads);
}

}  // namespace

void add_attention(py::module_& m, py::module_& reference) {
  const char* sdpa_doc = R"(sdpa(q, k, v, *, causal=False, window=None, mask=None, scale=None,
     key_lengths=None, key_starts=None, causal_align="bottom-right", return_weights=False,
     return_lse=False, softcap=0.0, alibi_slopes=None, sinks=None, precision="f32")

softmax(q·kᵀ·scale + mask)·v on the fused kernel (the T×T scores are never stored).

q (…, Tq, d), k (…, Tk, d), v (…, Tk, dv), rank 2 to 4, float32 used in place (other floats
converted once); K/V heads may divide Q heads (grouped-query). causal: query i sees keys up to
its position, bottom-right aligned when Tq != Tk (query i at Tk - Tq + i) unless causal_align
is "top-left" (query i at i, PyTorch's is_causal). window: the last W positions only. mask:
booleans or integers allow where non-zero, floats are added; broadcast to (…, Tq, Tk).
key_lengths: per batch entry, keys j >= length are padding; key_starts: keys j < start are
(left) padding. scale: default 1/sqrt(d). Variants: softcap c > 0 caps each scaled score to
c·tanh(s/c) (Gemma 2); alibi_slopes (one per query head) adds -slope·|pos_i - j| (BLOOM);
sinks (one logit per query head) joins every softmax denominator (gpt-oss). precision "bf16":
the products take bfloat16 operands (q, k, v and the weights rounded; sums and softmax in
float32), the same results on every CPU (docs/design.md gives the error bound).
Returns the output (…, Tq, dv); with return_weights / return_lse a tuple that adds the
weights (…, Tq, Tk) and / or the logsumexp (…, Tq). Raises ValueError naming the argument.)";
  m.def("sdpa", &sdpa_py, sdpa_doc, "q"_a, "k"_a, "v"_a, py::kw_only(), "causal"_a = false,
        "window"_a = py::none(), "mask"_a = py::none(), "scale"_a = py::none(),
        "key_lengths"_a = py::none(), "key_starts"_a = py::none(),
        "causal_align"_a = "bottom-right", "return_weights"_a = false, "return_lse"_a = false,
        "softcap"_a = 0.0f, "alibi_slopes"_a = py::none(), "sinks"_a = py::none(),
        "precision"_a = "f32");
  m.def("sdpa_backward", &sdpa_backward_py,
        R"(sdpa_backward(q, k, v, out, lse, d_out, *, causal=False, window=None, mask=None,
              scale=None, key_lengths=None, key_starts=None, causal_align="bottom-right",
              softcap=0.0, alibi_slopes=None, sinks=None, precision="f32",
              return_mask_gradient=False, dmask=None)
              -> (dq, dk, dv[, dsinks][, dmask])

The gradients of sdpa for dL/d(out) = d_out, on the fused kernel (the weights recomputed block
by block from the forward's logsumexp lse, from sdpa(..., return_lse=True)). Options as the
forward's; with sinks, also the sinks' gradient (H,); with return_mask_gradient, the gradient
of the additive (float) mask, in the mask's shape. dmask: an array of the mask's shape (float32,
C-contiguous, writeable) that receives that gradient in place and is returned as it, so a
training loop keeps one buffer instead of a new one per call (return_mask_gradient implied).)",
        "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a, "d_out"_a, py::kw_only(), "causal"_a = false,
        "window"_a = py::none(), "mask"_a = py::none(), "scale"_a = py::none(),
        "key_lengths"_a = py::none(), "key_starts"_a = py::none(),
        "causal_align"_a = "bottom-right", "softcap"_a = 0.0f, "alibi_slopes"_a = py::none(),
        "sinks"_a = py::none(), "precision"_a = "f32", "return_mask_gradient"_a = false,
        "dmask"_a = py::none());
  m.def("sdpa_varlen", &sdpa_varlen_py,
        R"(sdpa_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, *, causal=False, window=None,
            scale=None, key_lengths=None, causal_align="bottom-right", softcap=0.0,
            alibi_slopes=None, sinks=None, precision="f32") -> (output, logsumexp)

Packed variable-length attention: q (Tq_total, H, d), k (Tk_total, Hkv, d), v (Tk_total,
Hkv, dv), sequences laid end to end; sequence s is q rows cu_seqlens_q[s] .. cu_seqlens_q[s+1]
against k/v rows cu_seqlens_k[s] .. cu_seqlens_k[s+1] (N + 1 offsets from 0). Each sequence
attends within itself (causal and window inside it), on the fused kernels, no padding.
key_lengths (N counts, FlashAttention's seqused_k): sequence s uses only the first
key_lengths[s] rows of its key slot. Returns the output (Tq_total, H, dv) and the logsumexp
(Tq_total, H).)",
        "q"_a, "k"_a, "v"_a, "cu_seqlens_q"_a, "cu_seqlens_k"_a, py::kw_only(), "causal"_a = false,
        "window"_a = py::none(), "scale"_a = py::none(), "key_lengths"_a = py::none(),
        "causal_align"_a = "bottom-right", "softcap"_a = 0.0f, "alibi_slopes"_a = py::none(),
        "sinks"_a = py::none(), "precision"_a = "f32");
  m.def("sdpa_varlen_paged", &sdpa_varlen_paged_py,
        R"(sdpa_varlen_paged(q, k_pages, v_pages, cu_seqlens_q, block_table, seqused_k, *,
                  causal=False, window=None, scale=None, causal_align="bottom-right",
                  softcap=0.0, alibi_slopes=None, sinks=None, precision="f32")
                  -> (output, logsumexp)

Packed queries against a paged K/V cache: k_pages, v_pages (pages, page_size, Hkv, d);
sequence s's keys are the first seqused_k[s] tokens of its pages block_table[s] (a list of
page numbers), its queries q rows cu_seqlens_q[s] .. cu_seqlens_q[s+1]. Decode steps read the
pages in place; longer sequences have theirs gathered first. Forward only.)",
        "q"_a, "k_pages"_a, "v_pages"_a, "cu_seqlens_q"_a, "block_table"_a, "seqused_k"_a,
        py::kw_only(), "causal"_a = false, "window"_a = py::none(), "scale"_a = py::none(),
        "causal_align"_a = "bottom-right", "softcap"_a = 0.0f, "alibi_slopes"_a = py::none(),
        "sinks"_a = py::none(), "precision"_a = "f32");
  m.def("sdpa_varlen_backward", &sdpa_varlen_backward_py,
        R"(sdpa_varlen_backward(q, k, v, out, lse, d_out, cu_seqlens_q, cu_seqlens_k, *,
                     causal=False, window=None, scale=None, key_lengths=None,
                     causal_align="bottom-right", softcap=0.0, alibi_slopes=None, sinks=None,
                     precision="f32") -> (dq, dk, dv[, dsinks])

The gradients of sdpa_varlen for dL/d(out) = d_out, from its output and logsumexp (key rows
past key_lengths get zeros).)",
        "q"_a, "k"_a, "v"_a, "out"_a, "lse"_a, "d_out"_a, "cu_seqlens_q"_a, "cu_seqlens_k"_a,
        py::kw_only(), "causal"_a = false, "window"_a = py::none(), "scale"_a = py::none(),
        "key_lengths"_a = py::none(), "causal_align"_a = "bottom-right", "softcap"_a = 0.0f,
        "alibi_slopes"_a = py::none(), "sinks"_a = py::none(), "precision"_a = "f32");
  m.def("scaled_dot_product_attention", &torch_sdpa,
        R"(scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                             is_causal=False, scale=None, enable_gqa=False)

PyTorch's torch.nn.functional.scaled_dot_product_attention on attn's fused kernel, with its
semantics: is_causal is top-left aligned when L != S (torch.tril); a boolean attn_mask allows
where True, a float one is added; fewer K/V heads only with enable_gqa. dropout_p must be 0.)",
        "query"_a, "key"_a, "value"_a, "attn_mask"_a = py::none(), "dropout_p"_a = 0.0,
        "is_causal"_a = false, "scale"_a = py::none(), "enable_gqa"_a = false);
  m.def("_torch_plain_sdpa", &torch_plain_sdpa,
        "attn.torch's quick path (float32 CPU tensors, no mask); None when it does not apply.");
  m.def("_torch_sdpa_bfloat16", &torch_sdpa_bfloat16,
        "attn.torch's forward on bfloat16 CPU tensors, read in place, into out; returns the "
        "logsumexp.",
        "query"_a, "key"_a, "value"_a, "out"_a, "causal"_a, "mask"_a, "scale"_a, "key_starts"_a,
        "softcap"_a, "alibi_slopes"_a, "sinks"_a);
  m.def("_torch_sdpa_backward_bfloat16", &torch_sdpa_backward_bfloat16,
        "attn.torch's backward on bfloat16 CPU tensors, read in place: dq, dk and dv written "
        "into the given bfloat16 tensors, ([dsinks][, dmask]) returned in float32.",
        "grad_out"_a, "query"_a, "key"_a, "value"_a, "out"_a, "lse"_a, "causal"_a, "mask"_a,
        "scale"_a, "key_starts"_a, "softcap"_a, "alibi_slopes"_a, "sinks"_a,
        "return_mask_gradient"_a, "dq"_a, "dk"_a, "dv"_a);
  reference.def("sdpa", &reference_sdpa,
                R"(reference.sdpa(q, k, v, *, causal=False, window=None, mask=None, scale=None,
               key_lengths=None, key_starts=None, causal_align="bottom-right", softcap=0.0,
               alibi_slopes=None, sinks=None, precision="f32") -> (output, weights)

The readable path: scores, mask, softmax, weighted sum, one step per line; always returns the
weights. The oracle the fused kernel is tested against.)",
                "q"_a, "k"_a, "v"_a, py::kw_only(), "causal"_a = false, "window"_a = py::none(),
                "mask"_a = py::none(), "scale"_a = py::none(), "key_lengths"_a = py::none(),
                "key_starts"_a = py::none(), "causal_align"_a = "bottom-right", "softcap"_a = 0.0f,
                "alibi_slopes"_a = py::none(), "sinks"_a = py::none(), "precision"_a = "f32");
  m.def("causal_mask", &causal_mask_py,
        R"(causal_mask(n, tk=None, align="bottom-right") -> bool array (n, tk)

True where attention is allowed: on and below the diagonal (bottom-right aligned when
tk != n; align="top-left" for torch.tril).)",
        "n"_a, "tk"_a = py::none(), "align"_a = "bottom-right");
  m.def(
      "split_heads",
      [](const py::handle& x, int64_t n_heads) {
        return to_array(split_heads(to_tensor(x, "x"), n_heads));
      },
      R"(split_heads(x, n_heads): (B, T, d_model) -> (B, H, T, d_head), or (T, d_model) ->
(H, T, d_head). A view of x's memory (a change of strides, no copy).)",
      "x"_a, "n_heads"_a);
  m.def(
      "merge_heads", [](const py::handle& x) { return to_array(merge_heads(to_tensor(x, "x"))); },
      R"(merge_heads(x): (B, H, T, d_head) -> (B, T, H·d_head), or (H, T, d_head) -> (T, H·d_head).)",
      "x"_a);
  const char* mha_doc = R"(multi_head_attention(x, w_q, w_k, w_v, w_o=None, n_heads=..., mask=None,
                     causal=False, window=None, n_kv_heads=0, b_q=None, b_k=None, b_v=None,
                     b_o=None, rope=False, return_weights=False) -> output

(reference.multi_head_attention: the same arguments, always -> (output, weights))

Y = merge(sdpa(split(X·Wq), split(X·Wk), split(X·Wv)))·Wo, the textbook convention Y = X·W:
x (B, T, d_model) or (T, d_model); w_q (d_model, d_model); w_k, w_v (d_model, d_model), or
(d_model, n_kv_heads·d_head) with n_kv_heads; w_o (d_model, d_out) or None. With
return_weights=True -> (output, weights), weights (B, H, T, T): formed on the reference path,
T² floats per head (at T = 2048, 8 heads: 128 MiB and ~58× the time), so only on request.)";
  auto mha = [](bool use_reference) {
    return [use_reference](const py::handle& x, const py::handle& w_q, const py::handle& w_k,
                           const py::handle& w_v, const py::handle& w_o, int64_t n_heads,
                           const py::handle& mask, bool causal, std::optional<int64_t> window,
                           int64_t n_kv_heads, const py::handle& b_q, const py::handle& b_k,
                           const py::handle& b_v, const py::handle& b_o, bool rope,
                           bool return_weights) {
      return mha_py(x, w_q, w_k, w_v, w_o, n_heads, mask, causal, window, n_kv_heads, b_q, b_k, b_v,
                    b_o, rope, return_weights || use_reference, use_reference);
    };
  };
  for (auto [module, use_reference] : {std::pair{&m, false}, std::pair{&reference, true}}) {
    module->def("multi_head_attention", mha(use_reference), mha_doc, "x"_a, "w_q"_a, "w_k"_a,
                "w_v"_a, "w_o"_a = py::none(), "n_heads"_a = 0, "mask"_a = py::none(),
                "causal"_a = false, "window"_a = py::none(), "n_kv_heads"_a = 0,
                "b_q"_a = py::none(), "b_k"_a = py::none(), "b_v"_a = py::none(),
                "b_o"_a = py::none(), "rope"_a = false, "return_weights"_a = use_reference);
  }
}

}  // namespace attn::python
