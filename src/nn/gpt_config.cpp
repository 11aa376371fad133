// GptConfig: its checks and its JSON form (stored in checkpoints).
#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/gpt.hpp"

namespace attn {

std::string to_string(PositionKind kind) {
  switch (kind) {
    case PositionKind::kLearned:
      return "learned";
    case PositionKind::kSinusoidal:
      return "sinusoidal";
    case PositionKind::kRotary:
      return "rotary";
  }
  return "?";
}

PositionKind position_kind_from_string(std::string_view name) {
  if (name == "learned") return PositionKind::kLearned;
  if (name == "sinusoidal") return PositionKind::kSinusoidal;
  if (name == "rotary") return PositionKind::kRotary;
  throw Error(
      detail::concat("positions must be learned, sinusoidal or rotary, got \"", name, "\""));
}

void validate(const GptConfig& c) {
  constexpr int64_t kLimit = int64_t{1} << 20;
  ATTN_CHECK_ARGUMENT(c.vocab_size >= 1 && c.vocab_size <= kLimit, "vocab_size",
                      "GptConfig: vocab_size must be in [1, 2^20], got ", c.vocab_size);
  ATTN_CHECK_ARGUMENT(c.block_size >= 1 && c.block_size <= kLimit, "block_size",
                      "GptConfig: block_size must be in [1, 2^20], got ", c.block_size);
  ATTN_CHECK_ARGUMENT(c.n_layer >= 0 && c.n_layer <= 1024, "n_layer",
                      "GptConfig: n_layer must be in [0, 1024], got ", c.n_layer);
  ATTN_CHECK_ARGUMENT(c.n_embd >= 1 && c.n_embd <= 65536, "n_embd",
                      "GptConfig: n_embd must be in [1, 65536], got ", c.n_embd);
  ATTN_CHECK_ARGUMENT(c.n_head >= 1 && c.n_embd % c.n_head == 0, "n_embd", "GptConfig: n_embd (",
                      c.n_embd, ") must divide by n_head (", c.n_head, ")");
  ATTN_CHECK_ARGUMENT(c.n_kv_head >= 0 && (c.n_kv_head == 0 || c.n_head % c.n_kv_head == 0),
                      "n_kv_head", "GptConfig: n_kv_head (", c.n_kv_head, ") must divide n_head (",
                      c.n_head, ")");
  ATTN_CHECK_ARGUMENT(c.dropout >= 0.0f && c.dropout < 1.0f, "dropout",
                      "GptConfig: dropout must be in [0, 1), got ", c.dropout);
  ATTN_CHECK_ARGUMENT(c.positions != PositionKind::kRotary || (c.n_embd / c.n_head) % 2 == 0,
                      "positions",
                      "GptConfig: positions rotary needs an even head size (n_embd / n_head), got ",
                      c.n_embd / c.n_head);
}

std::string to_json(const GptConfig& c) {
  const nlohmann::json j = {{"vocab_size", c.vocab_size},
                            {"block_size", c.block_size},
                            {"n_layer", c.n_layer},
                            {"n_head", c.n_head},
                            {"n_kv_head", c.n_kv_head},
                            {"n_embd", c.n_embd},
                            {"dropout", c.dropout},
                            {"bias", c.bias},
                            {"positions", to_string(c.positions)}};
  return j.dump();
}

GptConfig gpt_config_from_json(std::string_view text) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    GptConfig c;
    c.vocab_size = j.at("vocab_size").get<int64_t>();
    c.block_size = j.at("block_size").get<int64_t>();
    c.n_layer = j.at("n_layer").get<int64_t>();
    c.n_head = j.at("n_head").get<int64_t>();
    c.n_kv_head = j.at("n_kv_head").get<int64_t>();
    c.n_embd = j.at("n_embd").get<int64_t>();
    c.dropout = j.at("dropout").get<float>();
    c.bias = j.at("bias").get<bool>();
    c.positions = position_kind_from_string(j.at("positions").get<std::string>());
    validate(c);
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("GptConfig: ") + e.what());
  }
}

}  // namespace attn
