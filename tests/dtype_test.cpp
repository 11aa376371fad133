// attn::Dtype: one enum and one spelling for every float32/bfloat16/q8 choice; q8 refused
// where a number format is computed in.
#include "attn/dtype.hpp"

#include <gtest/gtest.h>

#include <type_traits>

#include "attn/gemm.hpp"
#include "attn/gpt.hpp"
#include "attn/mha.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

TEST(Dtype, OneEnumServesEveryChoiceWithOneSpelling) {
  static_assert(std::is_same_v<CacheDtype, Dtype> && std::is_same_v<WeightsDtype, Dtype> &&
                std::is_same_v<MatmulPrecision, Dtype>);
  for (Dtype d : {Dtype::kFloat32, Dtype::kBFloat16, Dtype::kQ8})
    EXPECT_EQ(dtype_from_string(to_string(d)), d);
  EXPECT_EQ(to_string(Dtype::kFloat32), "f32");
  EXPECT_EQ(to_string(Dtype::kBFloat16), "bf16");
  EXPECT_EQ(to_string(Dtype::kQ8), "q8");
  EXPECT_TRUE(testing::ThrowsWith([] { dtype_from_string("f16"); },
                                  "dtype must be \"f32\", \"bf16\" or \"q8\", got \"f16\""));
  EXPECT_TRUE(
      testing::ThrowsWith([] { dtype_from_string("float32", "--cache-dtype"); },
                          "--cache-dtype must be \"f32\", \"bf16\" or \"q8\", got \"float32\""));
  EXPECT_EQ(weights_dtype_from_string("bf16"), Dtype::kBFloat16);
  EXPECT_TRUE(testing::ThrowsWith([] { matmul_precision_from_string(""); }, "precision must be"));
}

TEST(Dtype, Q8IsAStorageNotAFormatToComputeIn) {
  EXPECT_TRUE(testing::ThrowsWith([] { weights_dtype_from_string("q8"); },
                                  "weights must be \"f32\" or \"bf16\", got \"q8\""));
  EXPECT_TRUE(testing::ThrowsWith([] { check_float_dtype(Dtype::kQ8, "gemm: precision"); },
                                  "gemm: precision: q8 is a KV cache storage"));
  check_float_dtype(Dtype::kBFloat16, "no error");
  // Each place that computes in a Dtype refuses q8 by name.
  EXPECT_TRUE(testing::ThrowsWith(
      [] {
        float a = 1.0f, b = 1.0f, c = 0.0f;
        gemm(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1, Dtype::kQ8);
      },
      "gemm: precision: q8 is a KV cache storage"));
  EXPECT_TRUE(testing::ThrowsWith(
      [] {
        MhaConfig c;
        c.d_model = 8;
        c.n_heads = 2;
        c.precision = Dtype::kQ8;
        MultiHeadAttention layer(c);
      },
      "MultiHeadAttention: precision: q8"));
  Gpt model(GptConfig{});
  EXPECT_TRUE(testing::ThrowsWith([&] { model.set_weights_dtype(Dtype::kQ8); },
                                  "Gpt::set_weights_dtype: q8"));
  EXPECT_TRUE(testing::ThrowsWith([&] { model.set_training_precision(Dtype::kQ8); },
                                  "Gpt::set_training_precision: q8"));
  EXPECT_EQ(model.weights_dtype(), Dtype::kFloat32);
}

}  // namespace
}  // namespace attn
