// attn::Dtype: one enum and one spelling for every float32/bfloat16 choice.
#include "attn/dtype.hpp"

#include <gtest/gtest.h>

#include <type_traits>

#include "test_util.hpp"

namespace attn {
namespace {

TEST(Dtype, OneEnumServesEveryChoiceWithOneSpelling) {
  static_assert(std::is_same_v<CacheDtype, Dtype> && std::is_same_v<WeightsDtype, Dtype> &&
                std::is_same_v<MatmulPrecision, Dtype>);
  for (Dtype d : {Dtype::kFloat32, Dtype::kBFloat16}) EXPECT_EQ(dtype_from_string(to_string(d)), d);
  EXPECT_EQ(to_string(Dtype::kFloat32), "f32");
  EXPECT_EQ(to_string(Dtype::kBFloat16), "bf16");
  EXPECT_TRUE(testing::ThrowsWith([] { dtype_from_string("f16"); },
                                  "dtype must be \"f32\" or \"bf16\", got \"f16\""));
  EXPECT_TRUE(testing::ThrowsWith([] { dtype_from_string("float32", "--cache-dtype"); },
                                  "--cache-dtype must be \"f32\" or \"bf16\", got \"float32\""));
  EXPECT_EQ(weights_dtype_from_string("bf16"), Dtype::kBFloat16);
  EXPECT_TRUE(testing::ThrowsWith([] { matmul_precision_from_string(""); }, "precision must be"));
}

}  // namespace
}  // namespace attn
