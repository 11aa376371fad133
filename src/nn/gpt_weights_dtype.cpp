// Gpt with its matrices in bfloat16 (set_weights_dtype): the switch, what it refuses after,
// and the tied head's product on either dtype.
#include <cstring>

#include "attn/error.hpp"
#include "attn/gemm.hpp"
#include "attn/gpt.hpp"
#include "src/core/phase_scope.hpp"
#include "src/core/release_pages.hpp"
#include "src/core/storage.hpp"
#include "src/kernels/bfloat16.hpp"
#include "src/linalg/gemm_bf16.hpp"
#include "src/nn/gpt_internal.hpp"

namespace attn {

// The matrices a generated token streams: wte (the embedding and the tied head) and the
// blocks' four. wpe is read one row per token, so halving it would save no time.
bool Gpt::is_matrix(const GptParameter& p) const {
  return p.name == "wte" || p.role == ParameterRole::kWeight ||
         p.role == ParameterRole::kResidualProjection;
}

void Gpt::check_float_weights(const char* what) const {
  ATTN_CHECK(!bf16_, "Gpt: ", what,
             " needs the float weights, but this model keeps its matrices in bf16 and released "
             "their floats; load it again without bf16 weights");
}

void Gpt::set_weights_dtype(Dtype dtype) {
  check_float_dtype(dtype, "Gpt::set_weights_dtype");
  if (dtype == weights_dtype()) return;
  ATTN_CHECK(dtype == Dtype::kBFloat16,
             "Gpt::set_weights_dtype: bf16 weights cannot become float again (their floats were "
             "released); load the model again");
  const int64_t n = parameters_.numel();
  auto* bits = static_cast<uint16_t*>(detail::allocate_storage(static_cast<size_t>(n) * 2));
  std::shared_ptr<uint16_t> bf16(bits, [](uint16_t* p) { detail::free_storage(p); });
  float* floats = parameters_.data();
  // One matrix at a time: rounded, then its float pages released, so the peak stays near the
  // float model plus one matrix.
  for (const GptParameter& p : layout_->table) {
    if (!is_matrix(p)) continue;
    const int64_t numel = p.shape[0] * p.shape[1];
    kernels::round_to_bfloat16(floats + p.offset, p.shape[0], p.shape[1], p.shape[1],
                               bits + p.offset);
    detail::release_pages(floats + p.offset, static_cast<size_t>(numel) * sizeof(float));
  }
  bf16_ = std::move(bf16);
  gradients_ = Tensor();  // training is over for this model
  acts_.reset();
}

int64_t Gpt::weight_bytes() const {
  int64_t bytes = 0;
  for (const GptParameter& p : layout_->table) {
    int64_t numel = 1;
    for (int64_t d : p.shape) numel *= d;
    bytes += numel * (bf16_ && is_matrix(p) ? 2 : 4);
  }
  return bytes;
}

void Gpt::head_logits(const float* ln, int64_t rows, Dtype precision, float* logits,
                      nn::Activations* pass) const {
  const int64_t c = config_.n_embd, v = config_.vocab_size;
  if (pass != nullptr && precision == Dtype::kBFloat16 && !pass->lnf_bits.empty()) {
    const detail::PhaseScope clock(Phase::kMatmul);  // the rounding of ln too
    detail::round_rows_to_bfloat16(ln, rows, c, c, pass->lnf_bits.data());
    detail::gemm_bf16(
        false, true, rows, v, c, 1.0f, detail::MatrixOperand::of(pass->lnf_bits.data(), c),
        detail::MatrixOperand::of(pass->rounded_at(layout_->global.wte), c), 0.0f, logits, v);
    return;
  }
  if (bf16_) {
    detail::gemm_bf16_weights(true, rows, v, c, 1.0f, ln, c, bf16_.get() + layout_->global.wte, c,
                              0.0f, logits, v);
    return;
  }
  gemm(false, true, rows, v, c, 1.0f, ln, c, parameters_.data() + layout_->global.wte, c, 0.0f,
       logits, v, precision);
}

}  // namespace attn
