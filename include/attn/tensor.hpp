// Tensor: float32, rank 1..4, shape + strides over shared storage. Views (reshape, permute,
// transpose, slice, select, as_strided) share the storage of the tensor they come from;
// contiguous() and clone() copy. A Tensor is a handle: copying it copies the handle, not the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace attn {

using Shape = std::vector<int64_t>;

namespace detail {
struct Storage;  // a tensor's memory and who owns it (src/core/storage.hpp)
}  // namespace detail

// "(2, 5, 16)"
std::string to_string(const Shape& shape);

class Tensor {
 public:
  static constexpr int kMaxRank = 4;

  // An undefined tensor (rank 0, no storage): used for "absent", e.g. no output projection.
  Tensor() = default;
  // A contiguous zero-filled tensor. Every dim must be ≥ 1 and the rank 1..4.
  explicit Tensor(Shape shape);

  static Tensor zeros(Shape shape) { return Tensor(std::move(shape)); }
  // A contiguous tensor whose values are unspecified until written, as torch.empty: no pass
  // to zero it. For an output that is then written in full.
  static Tensor uninitialized(Shape shape);
  static Tensor full(Shape shape, float value);
  // Row-major values; values.size() must equal the product of the shape.
  static Tensor from_values(const Shape& shape, const std::vector<float>& values);
  // A view of memory the tensor does not allocate: `size` floats at `data`, seen with this
  // shape and strides (in elements) from element `offset`, checked to stay inside; `owner`
  // keeps the memory alive as long as the view or any view of it does. No copy.
  static Tensor from_external(float* data, int64_t size, Shape shape, Shape strides, int64_t offset,
                              std::shared_ptr<void> owner);
  // The owner given to from_external (null for the tensor's own memory): lets a binding hand
  // back the array a tensor came from.
  const std::shared_ptr<void>& external_owner() const;

  bool defined() const { return storage_ != nullptr; }
  int rank() const { return static_cast<int>(shape_.size()); }
  // dim(-1) is the last dim.
  int64_t dim(int i) const;
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t numel() const;
  bool is_contiguous() const;
  std::string shape_string() const { return to_string(shape_); }

  // Pointer to element (0, ..., 0); other elements are at data()[Σ index·stride].
  float* data();
  const float* data() const;

  // Checked element access (throws attn::Error on a wrong rank or an index out of range).
  float& at(std::initializer_list<int64_t> index);
  float at(std::initializer_list<int64_t> index) const;

  // Views: no copy, shared storage.
  Tensor reshape(Shape shape) const;  // contiguous only; one dim may be -1
  Tensor permute(const std::vector<int>& order) const;
  Tensor transpose(int a, int b) const;
  Tensor slice(int64_t start, int64_t length) const;  // along dim 0, keeps the rank
  Tensor select(int64_t index) const;                 // along dim 0, drops it (rank ≥ 2)
  // A view with explicit shape and strides (in elements) starting `offset` elements after
  // data(); checked to stay inside the storage. Strides may be 0 (broadcast).
  Tensor as_strided(Shape shape, Shape strides, int64_t offset = 0) const;

  // Copies.
  Tensor contiguous() const;             // returns *this (a view) when already contiguous
  Tensor clone() const;                  // always a fresh contiguous copy
  std::vector<float> to_vector() const;  // row-major values

  // Writes src's values into this tensor (same shape), through the strides of both.
  void copy_from(const Tensor& src);
  bool shares_storage(const Tensor& other) const { return storage_ == other.storage_; }

 private:
  Tensor(Shape shape, bool zeroed);
  int64_t offset_of(std::initializer_list<int64_t> index) const;

  std::shared_ptr<detail::Storage> storage_;
  int64_t offset_ = 0;
  Shape shape_;
  Shape strides_;
};

// Row-major strides of a shape: (2, 3, 4) -> (12, 4, 1).
Shape contiguous_strides(const Shape& shape);

// Calls fn(flat_row_major_index, element_offset) for every element of a (shape, strides) view.
template <typename Fn>
void for_each_offset(const Shape& shape, const Shape& strides, Fn&& fn) {
  const int rank = static_cast<int>(shape.size());
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  std::vector<int64_t> index(rank, 0);
  int64_t offset = 0;
  for (int64_t flat = 0; flat < total; ++flat) {
    fn(flat, offset);
    // Odometer increment from the last dim.
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[d] < shape[d]) {
        offset += strides[d];
        break;
      }
      offset -= strides[d] * (shape[d] - 1);
      index[d] = 0;
    }
  }
}

}  // namespace attn
