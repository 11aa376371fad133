// A byte-level BpeTokenizer as Hugging Face's tokenizer.json: a BPE model (vocab, merges in
// rank order as pairs), its special tokens as added tokens, attn's word split as the
// pre-tokenizer and GPT-2's byte-level decoder.
#include "src/tokenizer/hf_tokenizer_json.hpp"

#include "attn/error.hpp"
#include "attn/tokenizer.hpp"

namespace attn {

using nlohmann::ordered_json;

namespace detail {

nlohmann::json attn_pre_tokenizer() {
  // Whitespace [\t\n\v\f\r ] joins the run after it: of letters (ASCII and every non-ASCII
  // character), of digits, or of the other ASCII characters; whitespace at the end stands alone.
  constexpr const char* kWords = R"([\t\n\v\f\r ]*(?:[A-Za-z\x{80}-\x{10FFFF}]+|[0-9]+|)"
                                 R"([\x00-\x08\x0E-\x1F!-/:-@\[-`{-\x7F]+)|[\t\n\v\f\r ]+)";
  return {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"},
             {"pattern", {{"Regex", kWords}}},
             {"behavior", "Isolated"},
             {"invert", false}},
            {{"type", "ByteLevel"},
             {"add_prefix_space", false},
             {"trim_offsets", false},
             {"use_regex", false}}}}};
}

}  // namespace detail

std::string BpeTokenizer::to_hf_json() const {
  ATTN_CHECK(options_.byte_level,
             "only a byte-level BPE tokenizer has a Hugging Face tokenizer.json (GPT-2's byte "
             "alphabet); this one is character-level");
  ordered_json vocab = ordered_json::object(), merges = ordered_json::array(),
               added = ordered_json::array();
  for (int64_t id = 0; id < vocab_size(); ++id) vocab[display(id)] = id;
  for (const auto& [left, right] : merges_) merges.push_back({display(left), display(right)});
  for (size_t i = 0; i < options_.special_tokens.size(); ++i) {
    added.push_back({{"id", static_cast<int64_t>(i)},
                     {"content", options_.special_tokens[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  const ordered_json file = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", ordered_json::parse(detail::attn_pre_tokenizer().dump())},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"vocab", vocab},
        {"merges", merges}}}};
  return file.dump(1) + "\n";
}

}  // namespace attn
