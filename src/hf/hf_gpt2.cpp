// GPT-2 in Hugging Face's layout (format in include/attn/hf.hpp).
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/hf.hpp"
#include "attn/io.hpp"
#include "src/core/release_pages.hpp"
#include "src/nn/stored_model.hpp"

namespace attn {

namespace {

using nlohmann::json;

// The file's tensors by GPT-2's bare name (the "transformer." prefix removed).
std::map<std::string, const Tensor*> by_bare_name(const Safetensors& file) {
  std::map<std::string, const Tensor*> tensors;
  for (const auto& [name, t] : file.tensors) {
    const std::string bare = name.rfind("transformer.", 0) == 0 ? name.substr(12) : name;
    ATTN_CHECK(tensors.emplace(bare, &t).second, "tensor \"", bare, "\" appears twice");
  }
  return tensors;
}

bool is_mask_buffer(const std::string& name) {
  const auto ends_with = [&](const std::string& tail) {
    return name.size() >= tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return name.rfind("h.", 0) == 0 && (ends_with(".attn.bias") || ends_with(".attn.masked_bias"));
}

void copy_parameters(const std::map<std::string, const Tensor*>& tensors, Gpt& model) {
  std::set<std::string> used = {"lm_head.weight"};
  for (const GptParameter& p : model.parameter_table()) {
    const std::string& name = p.hf_name;
    const auto it = tensors.find(name);
    model.parameter(p.name).copy_from(
        detail::checked_parameter(it != tensors.end() ? it->second : nullptr, name, p, ""));
    used.insert(name);
  }
  for (const auto& [name, t] : tensors) {
    ATTN_CHECK(used.count(name) || is_mask_buffer(name), "unexpected tensor \"", name,
               "\" (not part of GPT-2)");
  }
  // attn's GPT ties the output layer to wte: a separate lm_head must be the same matrix.
  if (const auto head = tensors.find("lm_head.weight"); head != tensors.end()) {
    const Tensor wte = model.parameter("wte");
    ATTN_CHECK(head->second->shape() == wte.shape() &&
                   std::equal(wte.data(), wte.data() + wte.numel(), head->second->data()),
               "lm_head.weight differs from wte.weight: untied output layers are not supported");
  }
}

// config.json is an object of numbers and strings, two levels at most; a document nested
// deeper is refused as the parser meets it (200 000 levels once took seconds to say "not a
// JSON object").
constexpr int kMaxConfigDepth = 16;

json parse_json(std::string_view text) {
  try {
    return json::parse(text, [](int depth, json::parse_event_t, json&) {
      ATTN_CHECK(depth <= kMaxConfigDepth, "nested deeper than ", kMaxConfigDepth,
                 " levels; a config is a flat JSON object");
      return true;
    });
  } catch (const json::exception& e) {  // the parser's own words: where, and what it read
    throw Error(detail::concat("not valid JSON: ", detail::excerpt(e.what(), 160)));
  }
}

// The config of config.json's text; errors say what is wrong, the caller says where.
GptConfig parse_config(std::string_view text) {
  const json j = parse_json(text);
  ATTN_CHECK(j.is_object(), "not a JSON object but ", j.type_name());
  auto integer = [&](const char* key) {
    ATTN_CHECK(j.contains(key) && j[key].is_number_integer(), "\"", key, "\" must be an integer");
    return j[key].get<int64_t>();
  };
  GptConfig c;
  c.n_layer = integer("n_layer");
  c.n_head = integer("n_head");
  c.n_embd = integer("n_embd");
  c.block_size = integer("n_positions");
  c.vocab_size = integer("vocab_size");
  c.n_kv_head = 0;
  c.dropout = 0.0f;
  c.bias = true;
  c.positions = PositionKind::kLearned;
  ATTN_CHECK(!j.contains("activation_function") || j["activation_function"].is_string(),
             "\"activation_function\" must be a string");
  const std::string activation = j.value("activation_function", "gelu_new");
  ATTN_CHECK(activation == "gelu_new", "activation_function \"", activation,
             "\"; attn's GPT uses GPT-2's gelu_new");
  ATTN_CHECK(!j.contains("layer_norm_epsilon") || j["layer_norm_epsilon"].is_number(),
             "\"layer_norm_epsilon\" must be a number");
  const double eps = j.value("layer_norm_epsilon", 1e-5);
  ATTN_CHECK(std::fabs(eps - 1e-5) < 1e-12, "layer_norm_epsilon ", eps,
             "; attn's GPT uses GPT-2's 1e-5");
  ATTN_CHECK(!j.contains("n_inner") || j["n_inner"].is_null() ||
                 (j["n_inner"].is_number_integer() && j["n_inner"].get<int64_t>() == 4 * c.n_embd),
             "n_inner must be null or 4 * n_embd");
  validate(c);
  return c;
}

// parse_config with its errors prefixed by `where` (a path, or "config.json").
GptConfig parse_config_from(std::string_view text, const std::string& where) {
  try {
    return parse_config(text);
  } catch (const Error& e) {
    throw e.in_file(where);
  }
}

}  // namespace

GptConfig gpt2_config_from_hf(std::string_view text) {
  return parse_config_from(text, "config.json");
}

GptConfig gpt2_config_from_hf_dir(const std::string& dir) {
  const std::string path = dir + "/config.json";
  // A model directory holds files: a FIFO there would block the read until someone writes.
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw Error::about_file(path, "not a regular file (a directory, FIFO or device)");
  }
  // read_whole_file's own errors name the path already.
  return parse_config_from(read_whole_file(path, kMaxConfigBytes), path);
}

Gpt gpt_from_hf(const std::string& dir) {
  const std::string weights = dir + "/model.safetensors";
  const GptConfig config = gpt2_config_from_hf_dir(dir);
  Gpt model = [&] {
    const Safetensors file = read_safetensors(weights);
    try {
      const std::map<std::string, const Tensor*> tensors = by_bare_name(file);
      detail::check_file_holds(file, config, 1, "");
      Gpt m = Gpt::zeros(config);
      copy_parameters(tensors, m);
      return m;
    } catch (const Error& e) {
      throw e.in_file(weights);
    }
  }();
  // The file's tensors are freed, but glibc keeps the freed ones below its mmap threshold
  // (which grows to 32 MiB once the first large block is returned) on its heap: GPT-2 small
  // then stayed 257 MB above its parameters and cache while it generated (830 MB resident in
  // float, 592 MB with bf16 weights), until this hands that memory back.
  detail::release_free_heap();
  return model;
}

HfGpt2 load_hf_gpt2(const std::string& dir) {
  Gpt model = gpt_from_hf(dir);
  Gpt2Tokenizer tokenizer = Gpt2Tokenizer::load(dir);
  ATTN_CHECK(tokenizer.vocab_size() <= model.config().vocab_size, dir, ": the tokenizer has ",
             tokenizer.vocab_size(), " tokens, the model ", model.config().vocab_size);
  return {std::move(model), std::move(tokenizer)};
}

}  // namespace attn
