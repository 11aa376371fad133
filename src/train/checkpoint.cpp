// Checkpoints: one safetensors file holding the parameters, AdamW's moments and, in its
// metadata, everything else a resumed run needs (format in include/attn/train.hpp).
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attn/error.hpp"
#include "attn/io.hpp"
#include "attn/train.hpp"
#include "src/nn/stored_model.hpp"
#include "src/train/train_internal.hpp"

namespace attn {
namespace {

constexpr char kCheckpointFormat[] = "attn-gpt-checkpoint";
constexpr char kCheckpointVersion[] = "1";

std::string options_json(const TrainOptions& o) {
  const nlohmann::json j = {{"batch_size", o.batch_size},
                            {"max_iters", o.max_iters},
                            {"warmup_iters", o.warmup_iters},
                            {"lr_decay_iters", o.lr_decay_iters},
                            {"lr", o.lr},
                            {"min_lr", o.min_lr},
                            {"grad_clip", o.grad_clip},
                            {"grad_accum", o.grad_accum},
                            {"eval_iters", o.eval_iters},
                            {"eval_interval", o.eval_interval},
                            {"beta1", o.adamw.beta1},
                            {"beta2", o.adamw.beta2},
                            {"eps", o.adamw.eps},
                            {"weight_decay", o.adamw.weight_decay},
                            {"decay_embeddings", o.adamw.decay_embeddings},
                            {"seed", o.seed},
                            {"val_fraction", o.val_fraction},
                            {"precision", to_string(o.precision)}};
  return j.dump();
}

TrainOptions options_from_json(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  TrainOptions o;
  o.batch_size = j.at("batch_size").get<int64_t>();
  o.max_iters = j.at("max_iters").get<int64_t>();
  o.warmup_iters = j.at("warmup_iters").get<int64_t>();
  o.lr_decay_iters = j.at("lr_decay_iters").get<int64_t>();
  o.lr = j.at("lr").get<float>();
  o.min_lr = j.at("min_lr").get<float>();
  o.grad_clip = j.at("grad_clip").get<float>();
  o.grad_accum = j.at("grad_accum").get<int64_t>();
  o.eval_iters = j.at("eval_iters").get<int64_t>();
  // Checkpoints from before the option (same format version) kept the cadence elsewhere.
  o.eval_interval = j.value("eval_interval", TrainOptions{}.eval_interval);
  o.adamw.beta1 = j.at("beta1").get<float>();
  o.adamw.beta2 = j.at("beta2").get<float>();
  o.adamw.eps = j.at("eps").get<float>();
  o.adamw.weight_decay = j.at("weight_decay").get<float>();
  // Checkpoints from before the option (same format version) decayed no embedding.
  o.adamw.decay_embeddings = j.value("decay_embeddings", false);
  o.seed = j.at("seed").get<uint64_t>();
  o.val_fraction = j.at("val_fraction").get<double>();
  // Checkpoints from before the option (same format version) trained in float.
  o.precision = matmul_precision_from_string(j.value("precision", "f32"));
  detail::check_options(o);
  return o;
}

const std::string& metadata(const Safetensors& file, const std::string& key) {
  const auto it = file.metadata.find(key);
  ATTN_CHECK(it != file.metadata.end(), "checkpoint: the metadata has no \"", key, "\"");
  return it->second;
}

int64_t metadata_integer(const Safetensors& file, const std::string& key) {
  const std::string& text = metadata(file, key);
  size_t used = 0;
  int64_t value = -1;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
  }
  ATTN_CHECK(used == text.size() && value >= 0, "checkpoint: \"", key,
             "\" must be a non-negative integer, got \"", text, "\"");
  return value;
}

// Copies each named tensor of `file` (prefix + parameter name) into `buffer`, checked.
void restore(const Safetensors& file, const Gpt& model, const std::string& prefix, Tensor& buffer) {
  for (const GptParameter& p : model.parameter_table()) {
    const std::string name = prefix + p.name;
    const Tensor& stored = detail::checked_parameter(file.contains(name) ? &file.at(name) : nullptr,
                                                     name, p, "checkpoint: ");
    buffer.as_strided(p.shape, contiguous_strides(p.shape), p.offset).copy_from(stored);
  }
}

// The checkpoint's file, checked for format and version; errors name the path.
Safetensors open_checkpoint(const std::string& path) {
  Safetensors file = read_safetensors(path);
  const auto format = file.metadata.find("format");
  ATTN_CHECK(format != file.metadata.end() && format->second == kCheckpointFormat, path,
             ": not an attn GPT checkpoint (metadata \"format\" is not \"", kCheckpointFormat,
             "\")");
  ATTN_CHECK(metadata(file, "version") == kCheckpointVersion, path, ": checkpoint version \"",
             metadata(file, "version"), "\"; this build reads version ", kCheckpointVersion);
  return file;
}

// Runs `body`, prefixing an attn::Error (or a JSON error) with the path.
template <class Body>
auto with_path(const std::string& path, const Body& body) {
  try {
    return body();
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": checkpoint metadata: " + e.what());
  } catch (const Error& e) {
    throw e.in_file(path);
  }
}

// Whether path is a Hugging Face model directory, or its model.safetensors, rather than a
// checkpoint of attn train: both are safetensors, and the user may have the other loader in mind.
bool is_hf_model(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  const bool is_dir = fs::is_directory(p, ec);
  if (!is_dir && p.filename() != "model.safetensors") return false;
  const fs::path dir = is_dir ? p : p.parent_path();
  return !fs::exists(dir / "checkpoint.safetensors", ec) && fs::exists(dir / "config.json", ec) &&
         fs::exists(dir / "model.safetensors", ec);
}

}  // namespace

void Trainer::save(const std::string& path, const Tokenizer& tokenizer) const {
  ATTN_CHECK(tokenizer.vocab_size() == config_.vocab_size, "checkpoint: the tokenizer has ",
             tokenizer.vocab_size(), " tokens, the model ", config_.vocab_size);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const GptParameter& p : model_.parameter_table())
    tensors.emplace_back(p.name, model_.parameter(p.name));
  for (const char* moment : {"m", "v"}) {
    const Tensor& buffer = moment[0] == 'm' ? optimizer_.m : optimizer_.v;
    for (const GptParameter& p : model_.parameter_table()) {
      tensors.emplace_back(std::string("optimizer.") + moment + "." + p.name,
                           buffer.as_strided(p.shape, contiguous_strides(p.shape), p.offset));
    }
  }
  std::ostringstream rng_state;
  rng_state << data_rng_;
  const std::map<std::string, std::string> meta = {
      {"format", kCheckpointFormat},
      {"version", kCheckpointVersion},
      {"config", to_json(config_)},
      {"train_options", options_json(options_)},
      {"iteration", std::to_string(iteration_)},
      {"adam_steps", std::to_string(optimizer_.steps)},
      {"data_rng", rng_state.str()},
      {"tokens_fingerprint", std::to_string(fingerprint_)},
      {"tokenizer", tokenizer.to_json()}};
  write_safetensors(path, tensors, meta);
}

Trainer Trainer::resume_from(const Safetensors& file, std::vector<int64_t> tokens) {
  const GptConfig config = gpt_config_from_json(metadata(file, "config"));
  const TrainOptions options = options_from_json(metadata(file, "train_options"));
  const uint64_t fingerprint = detail::token_fingerprint(tokens);
  ATTN_CHECK(metadata(file, "tokens_fingerprint") == std::to_string(fingerprint),
             "the corpus differs from the one this run was trained on (token fingerprint)");
  detail::check_file_holds(file, config, 3, "checkpoint: ");
  Trainer trainer(config, options, std::move(tokens));
  restore(file, trainer.model_, "", trainer.model_.parameters());
  restore(file, trainer.model_, "optimizer.m.", trainer.optimizer_.m);
  restore(file, trainer.model_, "optimizer.v.", trainer.optimizer_.v);
  trainer.iteration_ = metadata_integer(file, "iteration");
  trainer.optimizer_.steps = metadata_integer(file, "adam_steps");
  std::istringstream rng_state(metadata(file, "data_rng"));
  rng_state >> trainer.data_rng_;
  ATTN_CHECK(!rng_state.fail(), "the data sampler's state is unreadable");
  return trainer;
}

Trainer Trainer::resume(const std::string& path, std::vector<int64_t> tokens) {
  return with_path(path, [&] { return resume_from(open_checkpoint(path), std::move(tokens)); });
}

Trainer::Resumed Trainer::resume_on_text(const std::string& path, std::string_view corpus) {
  return with_path(path, [&] {
    const Safetensors file = open_checkpoint(path);
    Tokenizer tokenizer = Tokenizer::from_json(metadata(file, "tokenizer"));
    Trainer trainer = resume_from(file, tokenizer.encode(corpus));
    return Resumed{std::move(trainer), std::move(tokenizer)};
  });
}

Checkpoint load_checkpoint(const std::string& given) {
  ATTN_CHECK(!is_hf_model(given), given,
             ": a Hugging Face model (config.json, model.safetensors), not a checkpoint of attn "
             "train: load it as GPT-2 (attn generate --model, attn.Gpt.from_hf, "
             "attn::load_hf_gpt2)");
  std::error_code ec;
  const std::string path =
      std::filesystem::is_directory(given, ec) ? given + "/checkpoint.safetensors" : given;
  return with_path(path, [&] {
    const Safetensors file = open_checkpoint(path);
    const GptConfig config = gpt_config_from_json(metadata(file, "config"));
    detail::check_file_holds(file, config, 1, "checkpoint: ");
    Gpt model = Gpt::zeros(config);
    restore(file, model, "", model.parameters());
    Tokenizer tokenizer = Tokenizer::from_json(metadata(file, "tokenizer"));
    ATTN_CHECK(tokenizer.vocab_size() == model.config().vocab_size, "the tokenizer has ",
               tokenizer.vocab_size(), " tokens, the model ", model.config().vocab_size);
    return Checkpoint{std::move(model), std::move(tokenizer), metadata_integer(file, "iteration")};
  });
}

}  // namespace attn
