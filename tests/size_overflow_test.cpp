// Sizes from a caller's numbers: every constructor and entry point that sizes memory from them
// refuses numbers whose product (or reach, for a strided view) would pass int64 or the machine,
// with attn::Error, before a product can wrap into a small buffer that the numbers then
// overrun (src/core/checked_size.hpp, src/core/memory_limit.hpp). Python's table of the same
// is in python/tests/test_bad_inputs.py.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "attn/attn.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

constexpr int64_t k2to31 = int64_t{1} << 31;
constexpr int64_t k2to62 = int64_t{1} << 62;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

struct OverflowCase {
  std::string name;
  std::function<void()> call;
};

std::vector<OverflowCase> overflow_cases() {
  const Tensor small = Tensor::zeros({2, 3});
  GptConfig wide;  // each field passes its own range; together they are far too many floats
  wide.vocab_size = int64_t{1} << 24;
  wide.block_size = int64_t{1} << 20;
  wide.n_layer = 1024;
  wide.n_embd = 65536;
  wide.n_head = 1;
  GptConfig tiny;
  tiny.vocab_size = 8;
  tiny.block_size = 8;
  tiny.n_layer = 1;
  tiny.n_embd = 8;
  tiny.n_head = 2;
  return {
      {"Tensor (2^62, 4)",
       [] {
         Tensor({k2to62, 4});
       }},
      {"Tensor (2^31)^4",
       [] {
         Tensor({k2to31, k2to31, k2to31, k2to31});
       }},
      {"Tensor::full (2^40, 2^40)",
       [] {
         Tensor::full({int64_t{1} << 40, int64_t{1} << 40}, 1);
       }},
      {"as_strided stride 2^62", [=] { small.as_strided({4}, {k2to62}); }},
      {"as_strided stride -2^62", [=] { small.as_strided({4}, {-k2to62}); }},
      {"as_strided stride max", [=] { small.as_strided({2}, {kInt64Max}); }},
      {"as_strided offset max", [=] { small.as_strided({2}, {1}, kInt64Max); }},
      {"as_strided reaches wrap",
       [=] {
         small.as_strided({3, 3}, {k2to62, k2to62});
       }},
      // 4 · (2^62 + 1) wraps to 4, inside the 6 floats: accepted before, a view reaching 2^62.
      {"as_strided reach wraps to 4", [=] { small.as_strided({5}, {k2to62 + 1}); }},
      {"from_external stride 2^62",
       [] {
         static float memory[4] = {};
         Tensor::from_external(memory, 4, {4}, {k2to62}, 0, nullptr);
       }},
      {"reshape (2^62, 4)",
       [=] {
         small.reshape({k2to62, 4});
       }},
      {"rand_normal (2^40, 2^40)",
       [] {
         rand_normal({int64_t{1} << 40, int64_t{1} << 40}, 1);
       }},
      {"causal_mask 2^40", [] { causal_mask(int64_t{1} << 40); }},
      {"causal_mask 2^31 x 2^31", [] { causal_mask(k2to31, k2to31); }},
      {"sinusoidal_encoding 2^62 x 2", [] { sinusoidal_encoding(k2to62, 2); }},
      {"TokenEmbedding 2^62 x 2^62", [] { TokenEmbedding(k2to62, k2to62); }},
      {"TokenEmbedding 2^40 x 2^20", [] { TokenEmbedding(int64_t{1} << 40, int64_t{1} << 20); }},
      {"PositionalEncoding 2^62 x 2", [] { PositionalEncoding(k2to62, 2); }},
      {"MultiHeadAttention d_model 2^62",
       [] {
         MhaConfig c;
         c.d_model = k2to62;
         c.n_heads = 1;
         MultiHeadAttention layer(c);
       }},
      {"MultiHeadAttention d_model 2^31",
       [] {
         MhaConfig c;
         c.d_model = k2to31;
         c.n_heads = 1;
         MultiHeadAttention layer(c);
       }},
      {"KVCache 2^31 each",
       [] {
         KVCache(KVCacheConfig{k2to31, k2to31, k2to31, k2to31, 0});
       }},
      {"KVCache capacity 2^60 + 1",
       [] {
         KVCache(KVCacheConfig{1, 1, 16, (int64_t{1} << 60) + 1, 0});
       }},
      {"KVCache window max",
       [] {
         KVCache(KVCacheConfig{1, 1, 16, 0, kInt64Max});
       }},
      {"MultiHeadAttention::make_cache 2^62",
       [] {
         MhaConfig c;
         c.d_model = 8;
         c.n_heads = 2;
         MultiHeadAttention(c).make_cache(k2to62, k2to62);
       }},
      {"GptConfig vocab 2^62",
       [=] {
         GptConfig c = tiny;
         c.vocab_size = k2to62;
         Gpt model(c);
       }},
      {"Gpt of 2^24 vocab, 1024 layers of 65536", [=] { Gpt model(wide); }},
      {"Trainer batch 2^62",
       [=] {
         TrainOptions o;
         o.batch_size = k2to62;
         o.max_iters = 1;
         Trainer trainer(tiny, o, std::vector<int64_t>(64, 1), 1);
       }},
      {"Trainer batch 2^40 x accumulation 2^40",
       [=] {
         TrainOptions o;
         o.batch_size = int64_t{1} << 40;
         o.grad_accum = int64_t{1} << 40;
         o.max_iters = 1;
         Trainer trainer(tiny, o, std::vector<int64_t>(64, 1), 1);
       }},
      {"sdpa key_lengths 2^62",
       [] {
         const Tensor q = Tensor::full({1, 1, 4, 4}, 0.5f);
         SdpaOptions o;
         o.key_lengths = {k2to62};
         sdpa(q, q, q, o);
       }},
      {"split_heads 2^62",
       [=] {
         split_heads(Tensor::zeros({2, 4, 8}), k2to62);
       }},
  };
}

TEST(SizeOverflow, EveryConstructorAndEntryRefusesSizesThatWrap) {
  const std::vector<OverflowCase> cases = overflow_cases();
  EXPECT_GE(cases.size(), 28u);
  for (const OverflowCase& c : cases) {
    SCOPED_TRACE(c.name);
    try {
      c.call();
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_LT(std::string(e.what()).size(), 600u) << e.what();
    } catch (const std::exception& e) {  // bad_alloc, length_error: what the checks must prevent
      ADD_FAILURE() << "not attn::Error but " << typeid(e).name() << ": " << e.what();
    }
  }
}

}  // namespace
}  // namespace attn
