// The GPT's parameter layout (gpt_layout.hpp): one loop over the structure, each piece named
// twice — attn's name and GPT-2's — and given its role.
#include "src/nn/gpt_layout.hpp"

#include <string>

#include "attn/error.hpp"
#include "src/nn/gpt_internal.hpp"

namespace attn::nn {
namespace {

// Appends the tensors to the table as they are declared, each after the last.
class Builder {
 public:
  explicit Builder(GptLayout& layout) : layout_(layout) {}
  // attn's name, GPT-2's name (without "transformer."), shape, role; returns the offset.
  int64_t add(std::string name, std::string hf_name, Shape shape, ParameterRole role) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    layout_.table.push_back(
        {std::move(name), layout_.size, std::move(shape), role, std::move(hf_name)});
    layout_.size += numel;
    return layout_.table.back().offset;
  }
  // A bias, or −1 when the model has none.
  int64_t bias(bool present, std::string name, std::string hf_name, Shape shape,
               ParameterRole role) {
    return present ? add(std::move(name), std::move(hf_name), std::move(shape), role) : -1;
  }

 private:
  GptLayout& layout_;
};

}  // namespace

const GptParameter& GptLayout::at(int64_t offset) const {
  for (const GptParameter& p : table) {
    if (p.offset == offset) return p;
  }
  throw Error(detail::concat("GptLayout: no parameter at offset ", offset));
}

GptLayout gpt_layout(const GptConfig& given) {
  validate(given);
  GptConfig config = given;
  if (config.n_kv_head == 0) config.n_kv_head = config.n_head;
  const int64_t c = config.n_embd, v = config.vocab_size;
  const int64_t width = qkv_width(config);
  const bool b = config.bias;
  using R = ParameterRole;
  GptLayout layout;
  Builder add(layout);
  layout.global.wte = add.add("wte", "wte.weight", {v, c}, R::kEmbedding);
  if (config.positions == PositionKind::kLearned) {
    layout.global.wpe = add.add("wpe", "wpe.weight", {config.block_size, c}, R::kEmbedding);
  }
  for (int64_t l = 0; l < config.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    LayerOffsets o;
    o.ln1_w = add.add(p + "ln_1.weight", p + "ln_1.weight", {c}, R::kNormGain);
    o.ln1_b = add.bias(b, p + "ln_1.bias", p + "ln_1.bias", {c}, R::kNormBias);
    o.wqkv = add.add(p + "attn.wqkv", p + "attn.c_attn.weight", {c, width}, R::kWeight);
    o.bqkv = add.bias(b, p + "attn.bqkv", p + "attn.c_attn.bias", {width}, R::kBias);
    o.wo = add.add(p + "attn.wo", p + "attn.c_proj.weight", {c, c}, R::kResidualProjection);
    o.bo = add.bias(b, p + "attn.bo", p + "attn.c_proj.bias", {c}, R::kBias);
    o.ln2_w = add.add(p + "ln_2.weight", p + "ln_2.weight", {c}, R::kNormGain);
    o.ln2_b = add.bias(b, p + "ln_2.bias", p + "ln_2.bias", {c}, R::kNormBias);
    o.wfc = add.add(p + "mlp.wfc", p + "mlp.c_fc.weight", {c, 4 * c}, R::kWeight);
    o.bfc = add.bias(b, p + "mlp.bfc", p + "mlp.c_fc.bias", {4 * c}, R::kBias);
    o.wproj = add.add(p + "mlp.wproj", p + "mlp.c_proj.weight", {4 * c, c}, R::kResidualProjection);
    o.bproj = add.bias(b, p + "mlp.bproj", p + "mlp.c_proj.bias", {c}, R::kBias);
    layout.blocks.push_back(o);
  }
  layout.global.lnf_w = add.add("ln_f.weight", "ln_f.weight", {c}, R::kNormGain);
  layout.global.lnf_b = add.bias(b, "ln_f.bias", "ln_f.bias", {c}, R::kNormBias);
  return layout;
}

}  // namespace attn::nn
