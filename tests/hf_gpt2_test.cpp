// GPT-2 checkpoints in Hugging Face's layout against GPT-2's forward pass written in PyTorch
// (tests/fixtures/make_hf_gpt2_fixtures.py): three small models — F32 with the "transformer."
// prefix and a stored, tied lm_head; F16 with bare names; BF16 with the attention-mask buffers
// HF files carry — their logits for three prompts and 8 greedy tokens, through the full window
// and through the KV cache; and a clear error for each kind of broken directory.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attn/hf.hpp"
#include "attn/io.hpp"
#include "attn/threads.hpp"
#include "attn/tokenizer.hpp"
#include "attn/train.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

namespace fs = std::filesystem;
using testing::ThrowsWith;

const fs::path kHfGpt2Dir = fs::path(ATTN_FIXTURES_DIR) / "hf_gpt2";

nlohmann::json expected() {
  std::ifstream in(kHfGpt2Dir / "expected.json");
  return nlohmann::json::parse(in);
}

class HfGpt2 : public ::testing::TestWithParam<std::string> {};

TEST_P(HfGpt2, LogitsAndGreedyTokensMatchPyTorch) {
  const Gpt model = gpt_from_hf((kHfGpt2Dir / GetParam()).string());
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
    Safetensors file =
        read_safetensors((kHfGpt2Dir / "f32_prefixed" / "model.safetensors").string());
    for (auto& entry : file.tensors) entry.second = entry.second.clone();
    edit(file);
    write_safetensors((dir / "model.safetensors").string(), file.tensors, file.metadata);
    std::ofstream(dir / "config.json")
        << (config.empty() ? testing::slurp(kHfGpt2Dir / "f32_prefixed" / "config.json") : config);
    return dir.string();
  }
  static void erase(Safetensors& f, const std::string& name) {
    std::erase_if(f.tensors, [&](const auto& e) { return e.first == name; });
  }
};

TEST_F(HfGpt2Files, BrokenModelsFailClearlyNamingTheTensor) {
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
  // No tokenizer files beside the model: the model loads, load_hf_gpt2 names what is missing.
  EXPECT_TRUE(ThrowsWith([&] { load_hf_gpt2((kHfGpt2Dir / "f16_plain").string()); },
                         "not GPT-2's tokenizer files"));
}

// A config.json that attn's GPT cannot run, or that is malformed, is refused naming the file
// and the key, in attn's words (not the JSON library's, and never by a silent default).
TEST_F(HfGpt2Files, BrokenConfigsFailNamingTheFileAndTheKey) {
  const std::string shape = R"("n_layer": 2, "n_head": 2, "n_embd": 16, "n_positions": 32)";
  const struct {
    const char* name;
    std::string config, message;
  } cases[] = {
      {"relu", shape + R"(, "vocab_size": 61, "activation_function": "relu")",
       "config.json: activation_function \"relu\""},
      {"no_vocab", shape, "config.json: \"vocab_size\" must be an integer"},
      {"big",
       R"("n_layer": 1000, "n_head": 2, "n_embd": 1024, "n_positions": 32, "vocab_size": 61)",
       "the config needs"},
      {"typed", shape + R"(, "vocab_size": 61, "activation_function": 7)",
       "config.json: \"activation_function\" must be a string"},
      {"eps", shape + R"(, "vocab_size": 61, "layer_norm_epsilon": "1e-5")",
       "config.json: \"layer_norm_epsilon\" must be a number"},
  };
  for (const auto& c : cases) {
    const std::string dir = broken(
        c.name, [](Safetensors&) {}, "{" + c.config + "}");
    EXPECT_TRUE(ThrowsWith([&] { gpt_from_hf(dir); }, c.message)) << c.name;
  }
  // A missing config names its path once.
  try {
    gpt_from_hf(path("nowhere"));
    ADD_FAILURE() << "a directory without config.json loaded";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              path("nowhere") + "/config.json: cannot open: No such file or directory");
  }
}

// Text that is not a config at all says what it is, in the JSON parser's words where it has
// them; a FIFO in a model directory is refused rather than read (it would block).
TEST_F(HfGpt2Files, ConfigsThatAreNotJsonObjectsSayWhatTheyAre) {
  const struct {
    const char* name;
    std::string text, message;
  } cases[] = {
      {"nan", R"({"n_layer": NaN})",
       "config.json: not valid JSON: [json.exception.parse_error.101] "
       "parse error at line 1, column 13"},
      {"blank", " ", "config.json: not valid JSON: "},
      {"truncated", R"({"n_layer": 2, )", "unexpected end of input"},
      {"deep", std::string(200000, '[') + std::string(200000, ']'),
       "config.json: nested deeper than 16 levels"},
      {"array", "[1, 2]", "config.json: not a JSON object but array"},
  };
  for (const auto& c : cases) {
    const std::string dir = broken(
        c.name, [](Safetensors&) {}, c.text);
    EXPECT_TRUE(ThrowsWith([&] { gpt_from_hf(dir); }, c.message)) << c.name;
  }
  const fs::path fifo_dir = path("fifo");
  fs::create_directories(fifo_dir);
  ASSERT_EQ(::mkfifo((fifo_dir / "config.json").c_str(), 0600), 0);
  EXPECT_TRUE(ThrowsWith([&] { gpt_from_hf(fifo_dir.string()); },
                         "config.json: not a regular file (a directory, FIFO or device)"));
}

// attn export: a model written in the layout reads back to the same parameters and logits;
// what GPT-2 cannot hold is refused by name.
TEST_F(HfGpt2Files, ExportedModelsReadBackToTheSameLogits) {
  GptConfig config;
  config.vocab_size = 300;
  config.block_size = 24;
  config.n_layer = 2;
  config.n_head = 2;
  config.n_embd = 16;
  const Gpt model(config, 11);
  save_hf(model, path("exported"), {{"notes.txt", "beside the model"}});
  const Safetensors file = read_safetensors(path("exported/model.safetensors"));
  EXPECT_EQ(file.tensors.front().first.rfind("transformer.", 0), 0u);
  EXPECT_EQ(testing::slurp(path("exported/notes.txt")), "beside the model");
  const Gpt back = gpt_from_hf(path("exported"));
  EXPECT_EQ(gpt2_config_from_hf(testing::slurp(path("exported/config.json"))).n_embd, 16);
  EXPECT_TRUE(testing::BitwiseEqual(back.parameters(), model.parameters()));
  const std::vector<int64_t> ids = {1, 7, 299, 0, 42, 42, 3};
  EXPECT_TRUE(testing::BitwiseEqual(back.logits(ids, 1), model.logits(ids, 1)));
  // Given to the checkpoint loader, the directory or its weights file says which loader to use.
  for (const std::string& given : {path("exported"), path("exported/model.safetensors")}) {
    EXPECT_TRUE(ThrowsWith([&] { load_checkpoint(given); },
                           given + ": a Hugging Face model (config.json, model.safetensors), not "
                                   "a checkpoint of attn train: load it as GPT-2"));
  }

  GptConfig rotary = config, no_bias = config, grouped = config;
  rotary.positions = PositionKind::kRotary;
  no_bias.bias = false;
  grouped.n_kv_head = 1;
  EXPECT_TRUE(ThrowsWith([&] { hf_config_json(rotary); }, "GPT-2 has learned positions"));
  EXPECT_TRUE(ThrowsWith([&] { save_hf(Gpt(no_bias), path("x")); }, "GPT-2 has biases"));
  EXPECT_TRUE(ThrowsWith([&] { hf_config_json(grouped); }, "has 1 of 2"));
  EXPECT_FALSE(fs::exists(path("x/config.json")));
}

TEST(Gpt2Shapes, AreOpenAIsModels) {
  EXPECT_EQ(parameter_count(gpt2_shape("gpt2")), 124439808);  // GPT-2 small, tied head
  EXPECT_EQ(gpt2_shape("gpt2-xl").n_embd, 1600);
  EXPECT_TRUE(ThrowsWith([] { gpt2_shape("gpt3"); }, "unknown GPT-2 shape \"gpt3\""));
}

// A byte-level BpeTokenizer written as Hugging Face's tokenizer.json reads back as a
// Gpt2Tokenizer with attn's word split: the same ids for text GPT-2's pattern would cut
// differently (runs of spaces, a space before digits and punctuation, non-ASCII letters,
// the special token), whole and in parallel.
TEST(HfTokenizerJson, ReadsBackWithTheSameIds) {
  std::string corpus;
  for (int i = 0; i < 50; ++i) {
    corpus += "The cat's  hat, 12 naïve  cafés; ünïcödé \t words " + std::to_string(i * 37) +
              "!\n<|endoftext|>";
  }
  BpeOptions options;
  options.vocab_size = 400;
  options.byte_level = true;
  options.special_tokens = {"<|endoftext|>"};
  const BpeTokenizer bpe = BpeTokenizer::train(corpus, options);
  const Gpt2Tokenizer hf = Gpt2Tokenizer::from_tokenizer_json(bpe.to_hf_json());
  EXPECT_EQ(hf.vocab_size(), bpe.vocab_size());
  EXPECT_EQ(hf.special_id("<|endoftext|>"), 0);
  for (const std::string& text :
       {std::string("The cat's  hat"), std::string("  12,345 naïve\n\n  x "),
        std::string("\xff\xfe bytes \xe2\x82"), std::string("a<|endoftext|>b  "), corpus}) {
    EXPECT_EQ(hf.encode(text), bpe.encode(text)) << text.substr(0, 40);
    EXPECT_EQ(hf.decode(hf.encode(text)), text);
  }
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    EXPECT_EQ(hf.encode_parallel(corpus), bpe.encode(corpus));
  }
  set_num_threads(0);
  BpeOptions chars = options;
  chars.byte_level = false;
  EXPECT_TRUE(ThrowsWith([&] { BpeTokenizer::train(corpus, chars).to_hf_json(); },
                         "only a byte-level BPE tokenizer"));
  // GPT-2's own files keep GPT-2's pattern: " 12" is one piece for it, two for split_words.
  const Gpt2Tokenizer gpt2 = Gpt2Tokenizer::load((fs::path(ATTN_FIXTURES_DIR) / "gpt2").string());
  EXPECT_EQ(gpt2.encode("a  b").size(), 3u);  // "a", " ", " b"
}

}  // namespace
}  // namespace attn
