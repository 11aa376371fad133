// Writes the seed corpus of every fuzz harness: valid files as the project writes them, small
// enough for the fuzzer to mutate quickly. Usage: attn_fuzz_seeds DIR (makes DIR/<harness>/).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "attn/files.hpp"
#include "attn/hf.hpp"
#include "attn/io.hpp"
#include "attn/random.hpp"
#include "attn/tokenizer.hpp"
#include "attn/train.hpp"
#include "fuzz_corpus_text.hpp"
#include "src/tokenizer/gpt2_byte_alphabet.hpp"

namespace {

namespace fs = std::filesystem;

attn::Tensor random_tensor(const attn::Shape& shape, uint64_t seed) {
  attn::Tensor t(shape);
  attn::fill_normal(t, seed, 0.0f, 1.0f);
  return t;
}

void write(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  attn::write_file_atomically((dir / name).string(), bytes);
}

void npy_seeds(const fs::path& dir) {
  write(dir, "vector.npy", attn::npy_bytes(random_tensor({5}, 1)));
  write(dir, "matrix.npy", attn::npy_bytes(random_tensor({3, 4}, 2)));
  write(dir, "rank4.npy", attn::npy_bytes(random_tensor({1, 2, 3, 2}, 3)));
}

void safetensors_seeds(const fs::path& dir) {
  write(
      dir, "two.safetensors",
      attn::safetensors_image({{"a", random_tensor({2, 3}, 4)}, {"b.bias", random_tensor({3}, 5)}},
                              {{"format", "seed"}}));
  write(dir, "one.safetensors", attn::safetensors_image({{"w", random_tensor({1, 1, 2, 2}, 6)}}));
}

attn::BpeTokenizer bpe(bool byte_level) {
  attn::BpeOptions options;
  options.vocab_size = byte_level ? 300 : 60;
  options.byte_level = byte_level;
  options.special_tokens = {"<|endoftext|>"};
  return attn::BpeTokenizer::train(attn::fuzz::kCorpusText, options);
}

void tokenizer_seeds(const fs::path& dir) {
  write(dir, "char.json",
        attn::Tokenizer(attn::CharTokenizer::train(attn::fuzz::kCorpusText)).to_json());
  write(dir, "bpe_chars.json", bpe(false).to_json());
  write(dir, "bpe_bytes.json", bpe(true).to_json());
}

void text_seeds(const fs::path& dir) {
  write(dir, "english.txt", attn::fuzz::kCorpusText);
  write(dir, "mixed.txt", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac 42 <|endoftext|>\n\t  x's we'll");
  write(dir, "invalid_utf8.txt", "ab\xff\xfe\xc3 \x80z");
}

void id_seeds(const fs::path& dir) {
  write(dir, "ids.txt", "0 1 2 3\n17\t42   299\n");
  write(dir, "one.txt", "7");
}

// Texts for GPT-2's encoder (first byte even) and small GPT-2-format files (first byte odd): a
// tokenizer.json, and a vocab.json + NUL + merges.txt, each of the 256 bytes and two merges.
void gpt2_seeds(const fs::path& dir) {
  write(dir, "text.txt", std::string("\0") + attn::fuzz::kCorpusText);
  write(dir, "mixed.txt", "\2caf\xc3\xa9 \xe6\x97\xa5 42 <|endoftext|>\n\t  x's we'll \xff");
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.push_back(attn::detail::gpt2_byte_spelling(b));
  std::string vocab = "{";
  for (size_t b = 0; b < bytes.size(); ++b) {
    std::string key = bytes[b] == "\"" ? "\\\"" : bytes[b] == "\\" ? "\\\\" : bytes[b];
    vocab += "\"" + key + "\": " + std::to_string(b) + ", ";
  }
  const std::string space = bytes[' '];
  vocab += "\"" + space + "t\": 256, \"" + space + "th\": 257, \"<|endoftext|>\": 258}";
  const std::string merges = "#version: 0.2\n" + space + " t\n" + space + "t h\n";
  write(dir, "vocab_and_merges.bin", "\1" + vocab + std::string(1, '\0') + merges);
  write(dir, "tokenizer.json",
        "\3{\"added_tokens\": [{\"id\": 258, \"content\": \"<|endoftext|>\"}], \"model\": "
        "{\"type\": \"BPE\", \"vocab\": " +
            vocab + ", \"merges\": [\"" + space + " t\", [\"" + space + "t\", \"h\"]]}}");
}

// A tiny model, trained two steps so that the optimizer's moments are not zero.
void checkpoint_seed(const fs::path& dir, const std::string& name, const attn::Tokenizer& tokenizer,
                     attn::GptConfig config) {
  config.vocab_size = tokenizer.vocab_size();
  attn::TrainOptions options;
  options.batch_size = 2;
  options.max_iters = 2;
  options.eval_iters = 1;
  attn::Trainer trainer(config, options, tokenizer.encode(attn::fuzz::kCorpusText));
  trainer.step();
  trainer.step();
  fs::create_directories(dir);
  trainer.save((dir / name).string(), tokenizer);
}

void checkpoint_seeds(const fs::path& dir) {
  attn::GptConfig small;
  small.block_size = 8;
  small.n_layer = 1;
  small.n_head = 2;
  small.n_embd = 8;
  checkpoint_seed(dir, "char_learned.safetensors",
                  attn::CharTokenizer::train(attn::fuzz::kCorpusText), small);
  small.positions = attn::PositionKind::kRotary;
  small.bias = false;
  small.n_kv_head = 1;
  checkpoint_seed(dir, "bpe_rotary_gqa.safetensors", bpe(false), small);
}

// GPT-2's own shape as attn writes it, a small one, and one with every optional key set.
void hf_config_seeds(const fs::path& dir) {
  write(dir, "gpt2.json", attn::hf_config_json(attn::gpt2_shape("gpt2")));
  attn::GptConfig small;
  small.n_layer = 2;
  small.n_head = 2;
  small.n_embd = 16;
  small.block_size = 32;
  small.vocab_size = 61;
  write(dir, "small.json", attn::hf_config_json(small));
  write(dir, "optional_keys.json",
        R"({"n_layer": 1, "n_head": 2, "n_embd": 8, "n_positions": 16, "vocab_size": 300,)"
        R"( "activation_function": "gelu_new", "layer_norm_epsilon": 1e-05, "n_inner": null})");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: attn_fuzz_seeds DIR\n");
    return 2;
  }
  const fs::path root = argv[1];
  npy_seeds(root / "npy");
  safetensors_seeds(root / "safetensors");
  tokenizer_seeds(root / "tokenizer_json");
  text_seeds(root / "bpe");
  id_seeds(root / "id_parser");
  checkpoint_seeds(root / "checkpoint");
  gpt2_seeds(root / "gpt2");
  hf_config_seeds(root / "hf_config");
  return 0;
}
