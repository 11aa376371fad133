// GPT-2 checkpoints in Hugging Face's layout against GPT-2's forward pass written in PyTorch
// (tests/fixtures/make_hf_gpt2_fixtures.py): three small models — F32 with the "transformer."
// prefix and a stored, tied lm_head; F16 with bare names; BF16 with the attention-mask buffers
// HF files carry — their logits for three prompts and 8 greedy tokens, through the full window
// and through the KV cache; and a clear error for each kind of broken directory.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attn/hf.hpp"
#include "attn/io.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

namespace fs = std::filesystem;
using testing::ThrowsWith;

const fs::path kDir = fs::path(ATTN_FIXTURES_DIR) / "hf_gpt2";

nlohmann::json expected() {
  std::ifstream in(kDir / "expected.json");
  return nlohmann::json::parse(in);
}

class HfGpt2 : public ::testing::TestWithParam<std::string> {};

TEST_P(HfGpt2, LogitsAndGreedyTokensMatchPyTorch) {
  const Gpt model = gpt_from_hf((kDir / GetParam()).string());
  EXPECT_EQ(model.config().n_layer, 2);
  EXPECT_EQ(model.config().vocab_size, 61);
  const nlohmann::json cases = expected().at(GetParam());  // kept: the loop views into it
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& c : cases) {
    const std::vector<int64_t> prompt = c["prompt"].get<std::vector<int64_t>>();
    const std::vector<double> want = c["last_logits"].get<std::vector<double>>();
    const Tensor logits = model.logits(prompt, 1);
    const int64_t t = static_cast<int64_t>(prompt.size());
    // float32 sums over n_embd = 16 terms of ~1 against float64: 1e-5 of the largest logit.
    double largest = 0, worst = 0;
    int64_t worst_at = 0;
    for (size_t v = 0; v < want.size(); ++v) largest = std::max(largest, std::fabs(want[v]));
    for (size_t v = 0; v < want.size(); ++v) {
      const double err = std::fabs(logits.at({0, t - 1, static_cast<int64_t>(v)}) - want[v]);
      if (err > worst) worst = err, worst_at = static_cast<int64_t>(v);
    }
    EXPECT_LE(worst, 1e-5 * (1 + largest))
        << GetParam() << ": worst logit " << worst_at << " off by " << worst;
    GenerateOptions options;
    options.max_new_tokens = 8;
    options.sampling.temperature = 0;  // greedy
    const std::vector<int64_t> greedy = c["greedy"].get<std::vector<int64_t>>();
    for (const bool cache : {true, false}) {
      options.use_cache = cache;
      EXPECT_EQ(generate(model, prompt, options), greedy)
          << GetParam() << (cache ? " with" : " without") << " the cache";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, HfGpt2,
                         ::testing::Values("f32_prefixed", "f16_plain", "bf16_plain"));

class HfGpt2Files : public testing::TempDirTest {
 protected:
  // A copy of the F32 model with `edit` applied to its tensors or config; returns its dir.
  template <typename Edit>
  std::string broken(const std::string& name, Edit edit, std::string config = "") {
    const fs::path dir = path(name);
    fs::create_directories(dir);
    Safetensors file = read_safetensors((kDir / "f32_prefixed" / "model.safetensors").string());
    for (auto& entry : file.tensors) entry.second = entry.second.clone();
    edit(file);
    write_safetensors((dir / "model.safetensors").string(), file.tensors, file.metadata);
    std::ofstream(dir / "config.json")
        << (config.empty() ? testing::slurp(kDir / "f32_prefixed" / "config.json") : config);
    return dir.string();
  }
  static void erase(Safetensors& f, const std::string& name) {
    std::erase_if(f.tensors, [&](const auto& e) { return e.first == name; });
  }
};

TEST_F(HfGpt2Files, BrokenModelsFailClearlyNamingTheTensor) {
  const auto none = [](Safetensors&) {};
  EXPECT_TRUE(ThrowsWith(
      [&] {
        gpt_from_hf(
            broken("missing", [](Safetensors& f) { erase(f, "transformer.h.1.mlp.c_fc.bias"); }));
      },
      "tensor \"h.1.mlp.c_fc.bias\" is missing"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        gpt_from_hf(broken("shape", [](Safetensors& f) {
          for (auto& [name, t] : f.tensors)
            if (name == "transformer.h.0.attn.c_attn.weight") t = Tensor({48, 16});
        }));
      },
      "tensor \"h.0.attn.c_attn.weight\" is (48, 16), the config needs (16, 48)"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        gpt_from_hf(broken("nan", [](Safetensors& f) {
          for (auto& [name, t] : f.tensors)
            if (name == "transformer.ln_f.bias") t.data()[2] = std::nanf("");
        }));
      },
      "tensor \"ln_f.bias\" holds nan at flat index 2"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        gpt_from_hf(broken("untied", [](Safetensors& f) {
          for (auto& [name, t] : f.tensors)
            if (name == "lm_head.weight") t.data()[0] += 1;
        }));
      },
      "untied output layers are not supported"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        gpt_from_hf(broken("extra", [](Safetensors& f) {
          f.tensors.emplace_back("transformer.h.0.attn.q_proj.weight", Tensor({2}));
        }));
      },
      "unexpected tensor \"h.0.attn.q_proj.weight\""));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        gpt_from_hf(broken("relu", none, R"({"n_layer": 2, "n_head": 2,
      "n_embd": 16, "n_positions": 32, "vocab_size": 61, "activation_function": "relu"})"));
      },
      "config.json: activation_function \"relu\""));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        gpt_from_hf(broken("small", none, R"({"n_layer": 2, "n_head": 2,
      "n_embd": 16, "n_positions": 32})"));
      },
      "\"vocab_size\" must be an integer"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        gpt_from_hf(broken("big", none, R"({"n_layer": 1000, "n_head": 2,
      "n_embd": 1024, "n_positions": 32, "vocab_size": 61})"));
      },
      "the config needs"));
  EXPECT_TRUE(ThrowsWith([&] { gpt_from_hf(path("nowhere")); }, "config.json"));
  // No tokenizer files beside the model: the model loads, load_hf_gpt2 names what is missing.
  EXPECT_TRUE(ThrowsWith([&] { load_hf_gpt2((kDir / "f16_plain").string()); },
                         "not GPT-2's tokenizer files"));
}

}  // namespace
}  // namespace attn
