// TokenEmbedding (rows of a table looked up by id) and the position layers around it.
#include <algorithm>

#include "attn/embedding.hpp"
#include "attn/error.hpp"
#include "attn/random.hpp"
#include "src/nn/embedding_rows.hpp"

namespace attn {
namespace {

// (rows, d) view of x's rows for x (T, d) or (B, T, d), checked against the width.
Tensor rows_of(const Tensor& x, int64_t d, const char* who) {
  ATTN_CHECK(x.defined() && (x.rank() == 2 || x.rank() == 3) && x.dim(-1) == d, who,
             ": expected (T, ", d, ") or (B, T, ", d, "), got ",
             x.defined() ? x.shape_string() : "undefined");
  return x.contiguous().reshape({-1, d});
}

}  // namespace

TokenEmbedding::TokenEmbedding(int64_t vocab_size, int64_t d_model, uint64_t seed) {
  ATTN_CHECK(vocab_size >= 1 && d_model >= 1, "TokenEmbedding: vocab_size (", vocab_size,
             ") and d_model (", d_model, ") must be >= 1");
  weight = rand_normal({vocab_size, d_model}, seed);
  grad = Tensor({vocab_size, d_model});
}

Tensor TokenEmbedding::forward(std::span<const int64_t> ids) const { return forward(ids, 0); }

Tensor TokenEmbedding::forward(std::span<const int64_t> ids, int64_t batch) const {
  const int64_t n = static_cast<int64_t>(ids.size()), d = d_model();
  ATTN_CHECK(n >= 1, "TokenEmbedding: no ids");
  ATTN_CHECK(batch == 0 || (batch >= 1 && n % batch == 0), "TokenEmbedding: ", n,
             " ids do not split into a batch of ", batch);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = ids[static_cast<size_t>(i)];
    ATTN_CHECK(id >= 0 && id < vocab_size(), "TokenEmbedding: id ", id, " at position ", i,
               " outside [0, ", vocab_size(), ")");
  }
  Tensor out(batch == 0 ? Shape{n, d} : Shape{batch, n / batch, d});
  nn::gather_rows(weight.contiguous().data(), ids.data(), n, d, out.data());
  return out;
}

void TokenEmbedding::backward(std::span<const int64_t> ids, const Tensor& d_out) {
  const int64_t d = d_model();
  const Tensor rows = rows_of(d_out, d, "TokenEmbedding::backward: d_out");
  ATTN_CHECK(rows.dim(0) == static_cast<int64_t>(ids.size()),
             "TokenEmbedding::backward: ", ids.size(), " ids but d_out holds ", rows.dim(0),
             " rows");
  ATTN_CHECK(grad.is_contiguous(), "TokenEmbedding::backward: grad must be contiguous");
  for (size_t i = 0; i < ids.size(); ++i) {
    ATTN_CHECK(ids[i] >= 0 && ids[i] < vocab_size(), "TokenEmbedding::backward: id ", ids[i],
               " outside [0, ", vocab_size(), ")");
  }
  nn::scatter_add_rows(rows.data(), ids.data(), static_cast<int64_t>(ids.size()), d, grad.data());
}

void TokenEmbedding::zero_grad() { grad = Tensor(weight.shape()); }

PositionalEncoding::PositionalEncoding(int64_t max_len, int64_t d_model)
    : table_(sinusoidal_encoding(max_len, d_model)) {}

Tensor PositionalEncoding::forward(int64_t length) const {
  ATTN_CHECK(length >= 1 && length <= table_.dim(0), "PositionalEncoding: length ", length,
             " outside [1, max_len = ", table_.dim(0), "]");
  return table_.slice(0, length);
}

Tensor PositionalEncoding::add_to(const Tensor& x) const { return add_positional(x, table_); }

LearnedPositionalEmbedding::LearnedPositionalEmbedding(int64_t max_len, int64_t d_model,
                                                       uint64_t seed) {
  ATTN_CHECK(max_len >= 1 && d_model >= 1, "LearnedPositionalEmbedding: max_len (", max_len,
             ") and d_model (", d_model, ") must be >= 1");
  weight = rand_normal({max_len, d_model}, seed, 0.0f, 0.02f);
  grad = Tensor({max_len, d_model});
}

Tensor LearnedPositionalEmbedding::forward(const Tensor& x) const {
  return add_positional(x, weight);
}

void LearnedPositionalEmbedding::backward(const Tensor& d_out) {
  const int64_t d = weight.dim(1);
  const Tensor rows = rows_of(d_out, d, "LearnedPositionalEmbedding::backward: d_out");
  const int64_t t_len = d_out.dim(-2);
  ATTN_CHECK(t_len <= weight.dim(0), "LearnedPositionalEmbedding::backward: length ", t_len,
             " exceeds max_len ", weight.dim(0));
  float* g = grad.data();
  const float* src = rows.data();
  for (int64_t r = 0; r < rows.dim(0); ++r) {
    const int64_t t = r % t_len;
    for (int64_t c = 0; c < d; ++c) g[t * d + c] += src[r * d + c];
  }
}

void LearnedPositionalEmbedding::zero_grad() { grad = Tensor(weight.shape()); }

}  // namespace attn
