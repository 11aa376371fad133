// Positional information for token vectors.
#pragma once

#include <cstdint>
#include <span>

#include "attn/rope.hpp"  // apply_rope: positions applied inside attention
#include "attn/tensor.hpp"

namespace attn {

// The sinusoidal table of "Attention Is All You Need", (max_len, d_model):
//   PE[p, 2i]   = sin(p / 10000^(2i / d_model))
//   PE[p, 2i+1] = cos(p / 10000^(2i / d_model))
// An odd d_model ends with a sine column (its cosine partner would be column d_model).
Tensor sinusoidal_encoding(int64_t max_len, int64_t d_model);

// A table of learnt vectors, one row per token id: ids -> vectors, and the gradient of the
// rows back. weight ~ N(0, 1) from `seed` (as torch.nn.Embedding); grad starts at zero.
class TokenEmbedding {
 public:
  TokenEmbedding(int64_t vocab_size, int64_t d_model, uint64_t seed = 0);

  // ids (T) -> (T, d_model); with batch B, ids (B·T, row-major) -> (B, T, d_model).
  // An id outside [0, vocab_size) is an attn::Error.
  Tensor forward(std::span<const int64_t> ids) const;
  Tensor forward(std::span<const int64_t> ids, int64_t batch) const;
  // grad[ids[i]] += d_out row i, for d_out (T, d_model) or (B, T, d_model) matching the ids;
  // an id that repeats gets the sum of its rows.
  void backward(std::span<const int64_t> ids, const Tensor& d_out);
  void zero_grad();

  int64_t vocab_size() const { return weight.dim(0); }
  int64_t d_model() const { return weight.dim(1); }

  Tensor weight;  // (vocab_size, d_model)
  Tensor grad;    // (vocab_size, d_model)
};

// The sinusoidal table (sinusoidal_encoding) as a layer with a length limit.
class PositionalEncoding {
 public:
  PositionalEncoding(int64_t max_len, int64_t d_model);
  // PE[0:length] as a (length, d_model) view; length > max_len is an attn::Error.
  Tensor forward(int64_t length) const;
  // x + PE[0:T] for x (T, d_model) or (B, T, d_model).
  Tensor add_to(const Tensor& x) const;
  const Tensor& table() const { return table_; }

 private:
  Tensor table_;
};

// A learnt position table (GPT-2's): x + W[0:T], and the gradient of W back.
class LearnedPositionalEmbedding {
 public:
  // weight ~ N(0, 0.02²) from `seed` (GPT-2's initialisation); grad starts at zero.
  LearnedPositionalEmbedding(int64_t max_len, int64_t d_model, uint64_t seed = 0);
  // x (T, d_model) or (B, T, d_model) -> x + W[0:T]; T > max_len is an attn::Error.
  Tensor forward(const Tensor& x) const;
  // grad[t] += Σ_b d_out[b, t] for d_out of the forward's output shape.
  void backward(const Tensor& d_out);
  void zero_grad();

  Tensor weight;  // (max_len, d_model)
  Tensor grad;    // (max_len, d_model)
};

// x + PE[0:T] for x of shape (T, d_model) or (B, T, d_model); pe is a (max_len, d_model)
// table. Throws if T > max_len or the widths differ.
Tensor add_positional(const Tensor& x, const Tensor& pe);

}  // namespace attn
