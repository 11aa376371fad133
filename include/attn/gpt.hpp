// A decoder-only transformer in the GPT-2 layout, trained end to end on the CPU:
//
//   x = wte[ids] + positions                                   (B, T, C)   C = n_embd
//   for each of n_layer blocks:
//     x = x + Wo·attention(LayerNorm₁(x))        causal, n_head heads (n_kv_head K/V heads)
//     x = x + W₂·gelu(W₁·LayerNorm₂(x))          W₁ (C, 4C), W₂ (4C, C)
//   logits = LayerNorm_f(x)·wteᵀ                               (B, T, vocab)  (tied head)
//
// Weights follow the rest of the library: a linear layer is y = x·W + b with W (in, out).
// All parameters live in one contiguous buffer (parameters()) and their gradients in another
// of the same layout (gradients(), allocated at its first use: a model that only generates
// never holds it); parameter_table() names the pieces.
//
// Training: forward(ids, targets) keeps every activation (allocated once per batch shape and
// reused), backward() adds dLoss/dθ into gradients(). Attention runs the fused kernels, forward
// and backward; every product runs on oneDNN. Results are bitwise the same for every thread
// count (each reduction has a fixed order).
// Decoding: a GptCache holds one KVCache per layer; decode() feeds new tokens only.
// Threads: the const methods (logits, loss, attention_weights, decode, make_cache, …) change
// nothing in the model — each call owns its buffers, and a decode's state is the caller's
// GptCache — so any number of threads may call them on one Gpt at once, with the answers one
// thread gets. The non-const ones (forward, backward, zero_grad, set_weights_dtype, the
// parameters' and gradients' writable views) need the model to themselves.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attn/gemm.hpp"
#include "attn/kv_cache.hpp"
#include "attn/mha.hpp"
#include "attn/tensor.hpp"

namespace attn {

// How positions enter: a learned table added to the token vectors (GPT-2), the fixed
// sinusoidal table added the same way, or rotary embeddings applied to Q and K in every layer.
enum class PositionKind { kLearned, kSinusoidal, kRotary };

struct GptConfig {
  int64_t vocab_size = 65;
  int64_t block_size = 64;  // the longest sequence the model sees
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_kv_head = 0;  // 0 = n_head; fewer: grouped-query attention (must divide n_head)
  int64_t n_embd = 128;   // must divide by n_head
  float dropout = 0.0f;   // on the embeddings and on both residual branches, while training
  bool bias = true;       // biases in the linear layers and the LayerNorms
  PositionKind positions = PositionKind::kLearned;
};

// Throws attn::Error naming the first field that is out of range.
void validate(const GptConfig& config);
std::string to_json(const GptConfig& config);
// Parses and validates what to_json wrote; attn::Error for anything missing or out of range.
GptConfig gpt_config_from_json(std::string_view json);
// The number of floats Gpt(config) holds, computed without allocating them: readers check a
// file against it before they build the model the file describes.
int64_t parameter_count(const GptConfig& config);
std::string to_string(PositionKind kind);  // "learned", "sinusoidal", "rotary"
PositionKind position_kind_from_string(std::string_view name);

// What a parameter is for. Initialisation and weight decay read the role, never the name:
//   kEmbedding            wte, wpe                   N(0, 0.02²)              no decay (option)
//   kNormGain, kNormBias  LayerNorm's γ and β        1 and 0                  no decay
//   kWeight               Wqkv, Wfc                  N(0, 0.02²)              decay
//   kResidualProjection   Wo, Wproj (into the        N(0, (0.02/√(2L))²)      decay
//                         residual stream)
//   kBias                 the linear layers' biases  0                        no decay
enum class ParameterRole { kEmbedding, kNormGain, kNormBias, kWeight, kResidualProjection, kBias };

// AdamW's weight decay applies: the matrices of the blocks, not the embeddings (unless
// AdamWOptions::decay_embeddings), biases or LayerNorm parameters.
inline bool decays(ParameterRole role) {
  return role == ParameterRole::kWeight || role == ParameterRole::kResidualProjection;
}

// One named tensor inside the parameter buffer.
struct GptParameter {
  std::string name;  // e.g. "wte", "h.0.attn.wqkv", "ln_f.weight"
  int64_t offset;    // in floats, into parameters()
  Shape shape;
  ParameterRole role;
  std::string hf_name;  // GPT-2's name in Hugging Face's files, without "transformer."
};

// Which new positions Gpt::decode returns logits for: every one, or only the last of each
// sequence — all that choosing the next token needs. With kLast the head (50257 × 768 per
// position in GPT-2: 30 % of a 512-token prompt's FLOPs), and the last layer after its keys
// and values are cached (6 % more), run on one row per sequence.
enum class LogitRows { kEvery, kLast };

class GptCache;
namespace nn {
struct Activations;  // src/nn/gpt_internal.hpp
struct LayerActivations;
struct GptLayout;  // src/nn/gpt_layout.hpp
}  // namespace nn

class Gpt {
 public:
  // Initialised as GPT-2: every matrix and embedding ~ N(0, 0.02²), the two projections back
  // into the residual stream ~ N(0, (0.02/√(2·n_layer))²), biases 0, LayerNorm weights 1.
  explicit Gpt(const GptConfig& config, uint64_t seed = 0);
  // Every parameter 0, without drawing the initialisation: for readers that then set them all
  // (a GPT-2 small's draw takes seconds).
  static Gpt zeros(const GptConfig& config);
  Gpt(Gpt&&) noexcept;
  Gpt& operator=(Gpt&&) noexcept;
  Gpt(const Gpt&) = delete;  // the attention layers view the parameter buffer
  Gpt& operator=(const Gpt&) = delete;
  ~Gpt();

  const GptConfig& config() const { return config_; }
  int64_t num_parameters() const { return parameters_.numel(); }
  // The float parameters; attn::Error once the matrices are bf16 (their floats are gone).
  Tensor& parameters();
  const Tensor& parameters() const;
  // The gradients, in the parameters' layout: allocated (zeros) by the first non-const call;
  // the const forms are attn::Error before that (a const model never allocates).
  Tensor& gradients();
  const Tensor& gradients() const;
  const std::vector<GptParameter>& parameter_table() const;
  // A view of one parameter (or its gradient) by name; attn::Error for an unknown name, and
  // for a matrix whose floats a switch to bf16 released.
  Tensor parameter(const std::string& name) const;
  Tensor gradient(const std::string& name);
  Tensor gradient(const std::string& name) const;

  // Inference with bf16 weights: set_weights_dtype(kBFloat16) rounds the matrices — wte and
  // every block's Wqkv, Wo, Wfc and Wproj — to bfloat16 (to nearest, ties to even) and returns
  // their float pages to the system, one matrix at a time, so memory about halves (LayerNorms,
  // biases and wpe stay float). From then on logits(), loss(), attention_weights() and decode()
  // read the bf16 matrices, widened to the floats they stand for: the results are the bits a
  // float model holding those values gives (a token's products read half the bytes; a
  // prompt's widen a piece at a time for the float product). It is one way: training, saving and
  // parameters() are attn::Error after it (load the model again for them), and views of
  // parameters() taken before it read zeros where the matrices were. kFloat32 keeps a float
  // model as it is.
  void set_weights_dtype(Dtype dtype);
  Dtype weights_dtype() const { return bf16_ ? Dtype::kBFloat16 : Dtype::kFloat32; }
  // Bytes of the weights as held: 4 a parameter, 2 for each matrix parameter once bf16.
  int64_t weight_bytes() const;

  // Training step, first half: ids and targets are (batch, T) row-major, 1 ≤ T ≤ block_size.
  // Returns the mean cross-entropy and keeps the activations for backward(). Dropout (when
  // configured) draws its masks from dropout_seed. The matrix products of forward() and
  // backward() run in training_precision() (bf16: mixed precision, the parameters and every
  // sum stay float); logits(), loss() and decoding always run in float.
  // first_window: the index of ids' first window in a larger batch whose rows this forward
  // runs a slice of (data parallel), so that dropout draws the masks the whole batch would.
  float forward(std::span<const int64_t> ids, std::span<const int64_t> targets, int64_t batch,
                uint64_t dropout_seed = 0, int64_t first_window = 0);
  void set_training_precision(Dtype precision) {
    check_float_dtype(precision, "Gpt::set_training_precision");
    training_precision_ = precision;
  }
  Dtype training_precision() const { return training_precision_; }
  // Second half: gradients() += loss_scale · dLoss/dθ for the last forward (loss_scale < 1
  // averages accumulated micro-batches). final_from(o), when given, is called each time the
  // gradients [o, num_parameters()) are final — after ln_f, after each block (the buffer holds
  // the blocks in order, the last block's gradients are done first), and with 0 at the end —
  // so that a data-parallel group can start summing them while the rest is computed.
  void backward(float loss_scale = 1.0f, const std::function<void(int64_t)>& final_from = {});
  void zero_grad();

  // Inference (no dropout): logits (batch, T, vocab) for ids (batch, T).
  Tensor logits(std::span<const int64_t> ids, int64_t batch) const;
  // The mean cross-entropy without dropout (evaluation). It leaves a pending backward() as it
  // is.
  float loss(std::span<const int64_t> ids, std::span<const int64_t> targets, int64_t batch) const;

  // Every layer's attention weights for one sequence of ids (1 ≤ T ≤ block_size):
  // (n_layer, n_head, T, T), row i of head h in layer l the softmax query i of that head spreads
  // over keys 0 … i (the causal triangle above is 0). The forward runs as logits() does; the
  // weights come from the reference softmax of the queries and keys each layer computed, so the
  // training path never materialises them.
  Tensor attention_weights(std::span<const int64_t> ids) const;

  // Decoding: a cache of block_size positions per layer.
  GptCache make_cache(int64_t batch, Dtype dtype = Dtype::kFloat32) const;
  // Feeds new tokens (batch, T_new) at positions cache.position() …; returns their logits
  // (batch, T_new, vocab), or with LogitRows::kLast (batch, 1, vocab) for the last of them.
  // More than block_size positions in all is an attn::Error.
  Tensor decode(std::span<const int64_t> ids, int64_t batch, GptCache& cache,
                LogitRows rows = LogitRows::kEvery) const;

 private:
  struct Zeros {};
  Gpt(const GptConfig& config, Zeros);  // the table and a buffer of zeros
  void draw(uint64_t seed);             // GPT-2's initialisation into the buffer
  Tensor named_view(const Tensor& buffer, const std::string& name) const;
  void check_ids(std::span<const int64_t> ids, int64_t batch, const char* what) const;
  void check_ids_and_targets(std::span<const int64_t> ids, std::span<const int64_t> targets,
                             int64_t batch, const char* what) const;
  float mean_cross_entropy(nn::Activations& a, const int64_t* targets) const;
  void embed(std::span<const int64_t> ids, int64_t batch, int64_t t, int64_t position,
             float* x) const;
  using LayerHook = std::function<void(int64_t layer, const nn::LayerActivations&)>;
  void forward_logits(std::span<const int64_t> ids, nn::Activations& a,
                      const LayerHook& after_layer = {}) const;
  // logits (rows, vocab) = ln (rows, C)·wteᵀ, on the float or the bf16 wte; in a bf16 training
  // pass that keeps rounded operands (`pass`), on its rounded wte, ln rounded into its lnf_bits.
  void head_logits(const float* ln, int64_t rows, Dtype precision, float* logits,
                   nn::Activations* pass = nullptr) const;
  bool is_matrix(const GptParameter& p) const;
  void check_float_weights(const char* what) const;

  GptConfig config_;
  Tensor parameters_;
  Tensor gradients_;                             // undefined until gradients() first allocates them
  std::shared_ptr<const nn::GptLayout> layout_;  // never changes: shared by moves
  Tensor sinusoids_;                             // (block_size, C) when positions are sinusoidal
  // bf16 weights: the matrices' bfloat16 copies at their own offsets in the parameter layout
  // (the slots of the other parameters unused); null while the matrices are float.
  std::shared_ptr<uint16_t> bf16_;
  // The training buffers, from forward() to backward(); inference never touches them.
  std::unique_ptr<nn::Activations> acts_;
  Dtype training_precision_ = Dtype::kFloat32;
};

// One KVCache per layer, all at the same position.
class GptCache {
 public:
  int64_t position() const { return layers.empty() ? 0 : layers.front().position(); }
  void reset() {
    for (KVCache& c : layers) c.reset();
  }
  std::vector<KVCache> layers;
};

// How the next token is drawn from the logits.
struct SamplingOptions {
  float temperature = 1.0f;  // 0: greedy (argmax, the lower id on ties)
  int64_t top_k = 0;         // > 0: only the k most likely tokens can be drawn
  // < 1: nucleus sampling — after top_k and the temperature, only the most likely tokens whose
  // probabilities first reach top_p together (at least one) can be drawn. In (0, 1].
  float top_p = 1.0f;
};

// Draws one token from a row of logits. The uniform draw is (rng() >> 11)·2⁻⁵³, so a seed
// gives the same tokens on every machine. Throws attn::Error for non-finite logits.
int64_t sample_token(std::span<const float> logits, const SamplingOptions& options,
                     std::mt19937_64& rng);

struct GenerateOptions {
  int64_t max_new_tokens = 200;
  SamplingOptions sampling;
  uint64_t seed = 0;
  // true: one token per step through the KV cache; false: the whole window is re-run for every
  // token (the slow path, kept to test the fast one).
  bool use_cache = true;
  // The KV cache's storage (attn/kv_cache.hpp): f32, bf16, or q8 (a quarter of the bytes).
  Dtype cache_dtype = Dtype::kFloat32;
};

// Generation one token at a time: next() samples the token after what came before, as
// generate() does (generate is a loop over it), so a caller can stream or stop at will.
class Generator {
 public:
  // prompt: at least one token; attn::Error for it or for sampling options out of range. The
  // model must outlive the generator.
  Generator(const Gpt& model, std::vector<int64_t> prompt, const GenerateOptions& options);
  int64_t next();
  const std::vector<int64_t>& tokens() const { return tokens_; }  // the prompt and all drawn

 private:
  const Gpt& model_;
  GenerateOptions options_;
  std::vector<int64_t> tokens_;
  std::mt19937_64 rng_;
  GptCache cache_;
  size_t start_ = 0;  // the model sees tokens_[start_, end); the cache holds a prefix of it
};

// Continues `prompt` (at least one token) and returns the new tokens, calling on_token for each
// as it comes. The model sees at most block_size tokens: when the context would grow past that,
// it restarts from the last block_size/2 tokens (with the cache: one prefill every
// block_size/2 tokens, not one per token). Both paths follow this rule, so they give the same
// tokens.
std::vector<int64_t> generate(const Gpt& model, std::vector<int64_t> prompt,
                              const GenerateOptions& options,
                              const std::function<void(int64_t)>& on_token = {});

}  // namespace attn
