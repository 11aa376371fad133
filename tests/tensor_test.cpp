// Tensor: construction, views that share storage, copies, and the errors of each.
#include "attn/tensor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "test_util.hpp"

namespace attn {
namespace {

using testing::ThrowsWith;

Tensor iota(const Shape& shape) {
  Tensor t(shape);
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::iota(v.begin(), v.end(), 0.0f);
  return Tensor::from_values(shape, v);
}

TEST(Tensor, ZerosHaveRowMajorStrides) {
  Tensor t({2, 3, 4});
  EXPECT_EQ(t.rank(), 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.strides(), (Shape{12, 4, 1}));
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.at({1, 2, 3}), 0.0f);
  EXPECT_EQ(t.dim(-1), 4);
  EXPECT_EQ(t.shape_string(), "(2, 3, 4)");
}

TEST(Tensor, UninitializedIsContiguousWritableAndCheckedAsZerosAre) {
  Tensor t = Tensor::uninitialized({3, 5});
  EXPECT_EQ(t.strides(), (Shape{5, 1}));
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = static_cast<float>(i);
  EXPECT_EQ(t.at({2, 4}), 14.0f);
  EXPECT_TRUE(ThrowsWith([] { Tensor::uninitialized({2, 0}); }, "dims must be >= 1"));
}

TEST(Tensor, FromValuesIsRowMajor) {
  const Tensor t = iota({2, 3});
  EXPECT_EQ(t.at({0, 2}), 2.0f);
  EXPECT_EQ(t.at({1, 0}), 3.0f);
}

TEST(Tensor, RejectsBadShapes) {
  EXPECT_TRUE(ThrowsWith([] { Tensor(Shape{}); }, "rank must be 1..4"));
  EXPECT_TRUE(ThrowsWith([] { Tensor({1, 1, 1, 1, 1}); }, "rank must be 1..4"));
  EXPECT_TRUE(ThrowsWith([] { Tensor({2, 0}); }, "dims must be >= 1"));
  EXPECT_TRUE(ThrowsWith([] { Tensor({int64_t{1} << 30, int64_t{1} << 30}); }, "too large"));
  EXPECT_TRUE(ThrowsWith([] { Tensor::from_values({2, 2}, {1, 2, 3}); }, "holds 4 values, got 3"));
}

TEST(Tensor, CheckedAccess) {
  Tensor t({2, 3});
  EXPECT_TRUE(ThrowsWith([&] { t.at({2, 0}); }, "index 2 out of range for dim 0"));
  EXPECT_TRUE(ThrowsWith([&] { t.at({0}); }, "1 indices for a tensor of shape (2, 3)"));
  EXPECT_TRUE(ThrowsWith([&] { t.dim(2); }, "dim(2) out of range"));
  EXPECT_TRUE(ThrowsWith([] { Tensor().data(); }, "undefined"));
}

TEST(Tensor, ReshapeIsAViewOfContiguousData) {
  Tensor t = iota({2, 6});
  Tensor r = t.reshape({3, -1});
  EXPECT_EQ(r.shape(), (Shape{3, 4}));
  EXPECT_TRUE(r.shares_storage(t));
  r.at({2, 3}) = 100.0f;
  EXPECT_EQ(t.at({1, 5}), 100.0f);
  EXPECT_TRUE(ThrowsWith([&] { t.reshape({5, -1}); }, "cannot view shape (2, 6) as"));
  EXPECT_TRUE(ThrowsWith([&] { t.reshape({-1, -1}); }, "at most one dim may be -1"));
  EXPECT_TRUE(ThrowsWith([&] { t.transpose(0, 1).reshape({12}); }, "needs a contiguous tensor"));
}

TEST(Tensor, PermuteAndTransposeChangeStridesOnly) {
  const Tensor t = iota({2, 3, 4});
  const Tensor p = t.permute({2, 0, 1});
  EXPECT_EQ(p.shape(), (Shape{4, 2, 3}));
  EXPECT_TRUE(p.shares_storage(t));
  EXPECT_FALSE(p.is_contiguous());
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c) EXPECT_EQ(p.at({c, a, b}), t.at({a, b, c}));
  const Tensor copy = p.contiguous();
  EXPECT_TRUE(copy.is_contiguous());
  EXPECT_FALSE(copy.shares_storage(t));
  EXPECT_TRUE(testing::BitwiseEqual(copy, p));
  EXPECT_EQ(t.transpose(0, -1).shape(), (Shape{4, 3, 2}));
  EXPECT_TRUE(ThrowsWith([&] { t.permute({0, 0, 1}); }, "must be a permutation"));
  EXPECT_TRUE(ThrowsWith([&] { t.permute({0, 1}); }, "order has 2 dims"));
  EXPECT_TRUE(ThrowsWith([&] { t.transpose(0, 3); }, "out of range"));
}

TEST(Tensor, SliceAndSelectAlongTheFirstDim) {
  Tensor t = iota({4, 3});
  Tensor s = t.slice(1, 2);
  EXPECT_EQ(s.shape(), (Shape{2, 3}));
  EXPECT_EQ(s.at({0, 0}), 3.0f);
  s.at({1, 2}) = -1.0f;
  EXPECT_EQ(t.at({2, 2}), -1.0f);
  const Tensor row = t.select(3);
  EXPECT_EQ(row.shape(), (Shape{3}));
  EXPECT_EQ(row.at({1}), 10.0f);
  EXPECT_TRUE(ThrowsWith([&] { t.slice(3, 2); }, "slice(3, 2) out of range"));
  EXPECT_TRUE(ThrowsWith([&] { t.select(4); }, "select(4) out of range"));
  EXPECT_TRUE(ThrowsWith([&] { row.select(0); }, "select needs rank >= 2"));
}

TEST(Tensor, AsStridedStaysInsideItsStorage) {
  const Tensor t = iota({2, 3});
  const Tensor broadcast = t.select(1).as_strided({4, 3}, {0, 1});
  EXPECT_EQ(broadcast.at({3, 2}), 5.0f);
  EXPECT_TRUE(ThrowsWith([&] { t.as_strided({3, 3}, {3, 1}); }, "reaches outside its storage"));
  EXPECT_TRUE(ThrowsWith([&] { t.as_strided({2}, {-1}); }, "reaches outside its storage"));
  EXPECT_TRUE(ThrowsWith([&] { t.as_strided({2}, {1, 1}); }, "differ in rank"));
}

TEST(Tensor, CopyFromThroughStridesAndOverlap) {
  Tensor t = iota({3, 3});
  Tensor transposed = t.clone();
  transposed.copy_from(t.transpose(0, 1));
  EXPECT_EQ(transposed.at({0, 1}), 3.0f);
  // In-place transpose: source and destination share storage.
  t.copy_from(t.transpose(0, 1));
  EXPECT_TRUE(testing::BitwiseEqual(t, transposed));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        t.copy_from(Tensor({2, 2}));
      },
      "copy_from: shape (2, 2) into (3, 3)"));
}

TEST(Tensor, FullAndToVector) {
  const Tensor t = Tensor::full({2, 2}, 1.5f);
  EXPECT_EQ(t.to_vector(), (std::vector<float>{1.5f, 1.5f, 1.5f, 1.5f}));
  EXPECT_EQ(iota({2, 2}).transpose(0, 1).to_vector(), (std::vector<float>{0, 2, 1, 3}));
}

}  // namespace
}  // namespace attn

namespace attn {
namespace {

TEST(TensorStorage, LargeBuffersAreAlignedAndColouredApart) {
  // Two 32 MiB tensors (the huge-page path): rows start 64-byte aligned, zero-filled, and the
  // two blocks do not start at the same offset within a 2 MiB page (their "colours" differ).
  const int64_t rows = 8 << 10, cols = 1 << 10;  // 32 MiB
  Tensor a({rows, cols}), b({rows, cols});
  const auto address_a = reinterpret_cast<uintptr_t>(a.data());
  const auto address_b = reinterpret_cast<uintptr_t>(b.data());
  EXPECT_EQ(address_a % 64, 0u);
  EXPECT_EQ(address_b % 64, 0u);
  EXPECT_NE(address_a % (2u << 20), address_b % (2u << 20));
  EXPECT_EQ(a.at({rows - 1, cols - 1}), 0.0f);
  a.at({rows - 1, cols - 1}) = 3.0f;  // the last element is writable
  EXPECT_EQ(a.at({rows - 1, cols - 1}), 3.0f);
  const Tensor small({3, 5});
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 64, 0u);
}

// A new tensor reads as zeros also where a freed one's memory is reused: the small blocks come
// back from malloc's heap and are cleared, the mapped ones (32 MiB and more) are fresh pages
// that nothing writes before the tensor's own writes.
TEST(TensorStorage, NewTensorsReadAsZerosWhereFreedOnesWere) {
  for (const Shape& shape : {Shape{3, 5}, Shape{1000, 300}, Shape{8 << 10, 1 << 10}}) {
    for (int round = 0; round < 3; ++round) {
      Tensor t(shape);
      float* data = t.data();
      const bool all_zero = std::all_of(data, data + t.numel(), [](float x) { return x == 0.0f; });
      EXPECT_TRUE(all_zero) << to_string(shape) << " round " << round;
      std::fill(data, data + t.numel(), 7.0f);  // what the next round's tensor must not see
    }
  }
}

}  // namespace
}  // namespace attn

namespace attn {
namespace {

// Memory the tensor does not own: viewed in place (writes land in it), bounds-checked, and kept
// alive by the owner for as long as any view lives.
TEST(Tensor, FromExternalViewsMemoryInPlaceAndKeepsItsOwnerAlive) {
  auto memory = std::make_shared<std::vector<float>>(std::vector<float>{0, 1, 2, 3, 4, 5});
  std::weak_ptr<std::vector<float>> watch = memory;
  Tensor view = Tensor::from_external(memory->data(), 6, {2, 3}, {3, 1}, 0, memory);
  const Tensor transposed = Tensor::from_external(memory->data(), 6, {3, 2}, {1, 3}, 0, memory);
  EXPECT_EQ(view.at({1, 2}), 5.0f);
  EXPECT_EQ(transposed.at({2, 1}), 5.0f);
  view.at({0, 1}) = 9.0f;
  EXPECT_EQ((*memory)[1], 9.0f);  // no copy
  EXPECT_EQ(view.external_owner(), memory);
  EXPECT_EQ(Tensor({2}).external_owner(), nullptr);
  EXPECT_TRUE(testing::ThrowsWith(
      [&] {
        Tensor::from_external(memory->data(), 6, {2, 4}, {4, 1}, 0, memory);
      },
      "reaches outside its storage of 6 elements"));
  memory.reset();
  EXPECT_FALSE(watch.expired());  // the views hold it
  const Tensor row = view.select(1);
  view = Tensor{};
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(row.at({0}), 3.0f);
}

}  // namespace
}  // namespace attn
