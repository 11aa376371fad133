// attn's GPT written in Hugging Face's GPT-2 layout (format in include/attn/hf.hpp).
#include <filesystem>
#include <nlohmann/json.hpp>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/hf.hpp"
#include "attn/io.hpp"

namespace attn {
namespace {

// Refuses what GPT-2's layout cannot hold, naming the field.
void check_expressible(const GptConfig& c) {
  ATTN_CHECK(c.positions == PositionKind::kLearned, "GPT-2 has learned positions; this model has ",
             to_string(c.positions), " ones");
  ATTN_CHECK(c.bias, "GPT-2 has biases; this model was trained without them (bias false)");
  ATTN_CHECK(c.n_kv_head == 0 || c.n_kv_head == c.n_head,
             "GPT-2 has as many K/V heads as query heads; this model has ", c.n_kv_head, " of ",
             c.n_head);
}

}  // namespace

std::string hf_config_json(const GptConfig& c, std::optional<int64_t> end_of_text_id) {
  check_expressible(c);
  ATTN_CHECK(!end_of_text_id || (*end_of_text_id >= 0 && *end_of_text_id < c.vocab_size),
             "end_of_text_id ", end_of_text_id.value_or(0), " is outside the vocabulary of ",
             c.vocab_size);
  const nlohmann::ordered_json token =
      end_of_text_id ? nlohmann::ordered_json(*end_of_text_id) : nlohmann::ordered_json(nullptr);
  const nlohmann::ordered_json j = {{"architectures", {"GPT2LMHeadModel"}},
                                    {"model_type", "gpt2"},
                                    {"activation_function", "gelu_new"},
                                    {"layer_norm_epsilon", 1e-5},
                                    {"n_ctx", c.block_size},
                                    {"n_embd", c.n_embd},
                                    {"n_head", c.n_head},
                                    {"n_inner", nullptr},
                                    {"n_layer", c.n_layer},
                                    {"n_positions", c.block_size},
                                    {"vocab_size", c.vocab_size},
                                    {"bos_token_id", token},
                                    {"eos_token_id", token},
                                    {"tie_word_embeddings", true},
                                    {"torch_dtype", "float32"}};
  return j.dump(2) + "\n";
}

std::string hf_safetensors_image(const Gpt& model) {
  check_expressible(model.config());
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const GptParameter& p : model.parameter_table()) {
    tensors.emplace_back("transformer." + p.hf_name, model.parameter(p.name));
  }
  return safetensors_image(tensors, {{"format", "pt"}});
}

void save_hf(const Gpt& model, const std::string& dir,
             const std::vector<std::pair<std::string, std::string>>& extra_files,
             std::optional<int64_t> end_of_text_id) {
  std::vector<std::pair<std::string, std::string>> files = {
      {dir + "/config.json", hf_config_json(model.config(), end_of_text_id)},
      {dir + "/model.safetensors", hf_safetensors_image(model)}};
  for (const auto& [name, bytes] : extra_files) files.emplace_back(dir + "/" + name, bytes);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ATTN_CHECK(!ec, dir, ": cannot create the directory: ", ec.message());
  write_files_atomically(files);
}

GptConfig gpt2_shape(std::string_view name) {
  struct Shape {
    const char* name;
    int64_t n_layer, n_head, n_embd;
  };
  constexpr Shape kShapes[] = {{"gpt2", 12, 12, 768},
                               {"gpt2-medium", 24, 16, 1024},
                               {"gpt2-large", 36, 20, 1280},
                               {"gpt2-xl", 48, 25, 1600}};
  for (const Shape& s : kShapes) {
    if (name != s.name) continue;
    GptConfig c;
    c.n_layer = s.n_layer;
    c.n_head = s.n_head;
    c.n_embd = s.n_embd;
    c.block_size = 1024;
    c.vocab_size = 50257;
    return c;
  }
  throw Error("unknown GPT-2 shape \"" + std::string(name) +
              "\" (gpt2, gpt2-medium, gpt2-large or gpt2-xl)");
}

}  // namespace attn
