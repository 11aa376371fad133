// Tensor storage, views and copies. Every view checks that it stays inside its storage, so
// no user-supplied shape can make a later access read out of bounds.
#include "attn/tensor.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

#include "attn/error.hpp"
#include "src/core/memory_limit.hpp"
#include "src/core/storage.hpp"

namespace attn {
namespace {

// 2^40 floats = 4 TiB: far beyond this machine, small enough that products never overflow.
constexpr int64_t kMaxElements = int64_t{1} << 40;

void check_shape(const Shape& shape) {
  ATTN_CHECK(!shape.empty() && shape.size() <= Tensor::kMaxRank, "tensor rank must be 1..",
             Tensor::kMaxRank, ", got shape ", to_string(shape));
  int64_t total = 1;
  for (int64_t d : shape) {
    ATTN_CHECK(d >= 1, "tensor dims must be >= 1, got shape ", to_string(shape));
    ATTN_CHECK(d <= kMaxElements / total, "tensor shape ", to_string(shape), " is too large");
    total *= d;
  }
}

}  // namespace

std::string to_string(const Shape& shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + ")";
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * shape[i + 1];
  }
  return strides;
}

Tensor::Tensor(Shape shape) : Tensor(std::move(shape), true) {}

Tensor Tensor::uninitialized(Shape shape) { return Tensor(std::move(shape), false); }

Tensor::Tensor(Shape shape, bool zeroed) {
  check_shape(shape);
  detail::check_fits_in_memory(shape, "a tensor");
  int64_t total = 1;
  for (int64_t d : shape) total *= d;
  const size_t bytes = static_cast<size_t>(std::max<int64_t>(total, 1)) * sizeof(float);
  auto* data = static_cast<float*>(zeroed ? detail::allocate_zeroed_storage(bytes)
                                          : detail::allocate_storage(bytes));
  std::shared_ptr<void> memory(data, [](void* p) { detail::free_storage(p); });
  storage_ =
      std::make_shared<detail::Storage>(detail::Storage{data, total, std::move(memory), false});
  strides_ = contiguous_strides(shape);
  shape_ = std::move(shape);
}

Tensor Tensor::full(Shape shape, float value) {
  Tensor t(std::move(shape));
  std::fill(t.storage_->data, t.storage_->data + t.storage_->size, value);
  return t;
}

Tensor Tensor::from_values(const Shape& shape, const std::vector<float>& values) {
  Tensor t(shape);
  ATTN_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "from_values: shape ",
             to_string(shape), " holds ", t.numel(), " values, got ", values.size());
  std::copy(values.begin(), values.end(), t.storage_->data);
  return t;
}

Tensor Tensor::from_external(float* data, int64_t size, Shape shape, Shape strides, int64_t offset,
                             std::shared_ptr<void> owner) {
  ATTN_CHECK(data != nullptr && size >= 1, "from_external: no memory (", size, " floats)");
  Tensor whole;
  whole.storage_ =
      std::make_shared<detail::Storage>(detail::Storage{data, size, std::move(owner), true});
  whole.shape_ = {size};
  whole.strides_ = {1};
  return whole.as_strided(std::move(shape), std::move(strides), offset);
}

const std::shared_ptr<void>& Tensor::external_owner() const {
  static const std::shared_ptr<void> none;
  if (!defined()) return none;
  return storage_->external ? storage_->owner : none;
}

int64_t Tensor::dim(int i) const {
  const int r = rank();
  ATTN_CHECK(i >= -r && i < r, "dim(", i, ") out of range for shape ", shape_string());
  return shape_[i < 0 ? i + r : i];
}

int64_t Tensor::numel() const {
  if (!defined()) return 0;
  return std::accumulate(shape_.begin(), shape_.end(), int64_t{1}, std::multiplies<>());
}

bool Tensor::is_contiguous() const {
  // A dim of size 1 is never stepped over, so its stride says nothing about the layout (numpy
  // and the Python bindings give it 0).
  int64_t expected = 1;
  for (size_t d = shape_.size(); d-- > 0;) {
    if (shape_[d] == 1) continue;
    if (strides_[d] != expected) return false;
    expected *= shape_[d];
  }
  return true;
}

float* Tensor::data() {
  ATTN_CHECK(defined(), "data() of an undefined tensor");
  return storage_->data + offset_;
}

const float* Tensor::data() const {
  ATTN_CHECK(defined(), "data() of an undefined tensor");
  return storage_->data + offset_;
}

int64_t Tensor::offset_of(std::initializer_list<int64_t> index) const {
  ATTN_CHECK(defined(), "at() of an undefined tensor");
  ATTN_CHECK(static_cast<int>(index.size()) == rank(), "at(): ", index.size(),
             " indices for a tensor of shape ", shape_string());
  int64_t offset = 0;
  int d = 0;
  for (int64_t i : index) {
    ATTN_CHECK(i >= 0 && i < shape_[d], "at(): index ", i, " out of range for dim ", d,
               " of shape ", shape_string());
    offset += i * strides_[d++];
  }
  return offset;
}

float& Tensor::at(std::initializer_list<int64_t> index) { return data()[offset_of(index)]; }

float Tensor::at(std::initializer_list<int64_t> index) const { return data()[offset_of(index)]; }

Tensor Tensor::as_strided(Shape shape, Shape strides, int64_t offset) const {
  ATTN_CHECK(defined(), "as_strided of an undefined tensor");
  check_shape(shape);
  ATTN_CHECK(strides.size() == shape.size(), "as_strided: shape ", to_string(shape),
             " and strides ", to_string(strides), " differ in rank");
  // The lowest and highest element the view can reach must lie inside the storage, computed
  // without wrapping: strides of 2^62 once wrapped to a small reach and passed the check.
  auto wraps = [&] {
    return Error(detail::concat("as_strided: view ", to_string(shape), " with strides ",
                                to_string(strides), " and offset ", offset,
                                " reaches past int64: outside any storage"));
  };
  int64_t lo = 0, hi = 0;
  if (__builtin_add_overflow(offset_, offset, &lo)) throw wraps();
  hi = lo;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t reach = 0;
    if (__builtin_mul_overflow(strides[d], shape[d] - 1, &reach) ||
        __builtin_add_overflow(reach < 0 ? lo : hi, reach, reach < 0 ? &lo : &hi)) {
      throw wraps();
    }
  }
  const int64_t size = storage_->size;
  ATTN_CHECK(lo >= 0 && hi < size, "as_strided: view ", to_string(shape), " with strides ",
             to_string(strides), " reaches outside its storage of ", size, " elements");
  Tensor view = *this;
  view.offset_ = offset_ + offset;
  view.shape_ = std::move(shape);
  view.strides_ = std::move(strides);
  return view;
}

Tensor Tensor::reshape(Shape shape) const {
  ATTN_CHECK(defined(), "reshape of an undefined tensor");
  ATTN_CHECK(is_contiguous(), "reshape needs a contiguous tensor, got shape ", shape_string(),
             " with strides ", to_string(strides_), "; call contiguous() first");
  int64_t known = 1;
  int inferred = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      ATTN_CHECK(inferred < 0, "reshape: at most one dim may be -1, got ", to_string(shape));
      inferred = static_cast<int>(i);
    } else {
      ATTN_CHECK(shape[i] >= 1, "reshape: dims must be >= 1 or -1, got ", to_string(shape));
      // Past numel() it cannot fit; checked before the product can wrap.
      ATTN_CHECK(shape[i] <= numel() / known, "reshape: cannot view shape ", shape_string(), " as ",
                 to_string(shape));
      known *= shape[i];
    }
  }
  const bool fits = inferred >= 0 ? numel() % known == 0 : known == numel();
  ATTN_CHECK(fits, "reshape: cannot view shape ", shape_string(), " as ", to_string(shape));
  if (inferred >= 0) shape[inferred] = numel() / known;
  return as_strided(shape, contiguous_strides(shape));
}

Tensor Tensor::permute(const std::vector<int>& order) const {
  ATTN_CHECK(static_cast<int>(order.size()) == rank(), "permute: order has ", order.size(),
             " dims for shape ", shape_string());
  std::vector<bool> seen(rank(), false);
  Shape shape(rank()), strides(rank());
  for (int i = 0; i < rank(); ++i) {
    const int from = order[i];
    ATTN_CHECK(from >= 0 && from < rank() && !seen[from],
               "permute: order must be a permutation of 0..", rank() - 1);
    seen[from] = true;
    shape[i] = shape_[from];
    strides[i] = strides_[from];
  }
  return as_strided(shape, strides);
}

Tensor Tensor::transpose(int a, int b) const {
  const int r = rank();
  ATTN_CHECK(a >= -r && a < r && b >= -r && b < r, "transpose(", a, ", ", b,
             ") out of range for shape ", shape_string());
  std::vector<int> order(r);
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[a < 0 ? a + r : a], order[b < 0 ? b + r : b]);
  return permute(order);
}

Tensor Tensor::slice(int64_t start, int64_t length) const {
  ATTN_CHECK(defined(), "slice of an undefined tensor");
  ATTN_CHECK(start >= 0 && length >= 1 && start + length <= shape_[0], "slice(", start, ", ",
             length, ") out of range for dim 0 of shape ", shape_string());
  Shape shape = shape_;
  shape[0] = length;
  return as_strided(shape, strides_, start * strides_[0]);
}

Tensor Tensor::select(int64_t index) const {
  ATTN_CHECK(defined() && rank() >= 2, "select needs rank >= 2, got shape ", shape_string());
  ATTN_CHECK(index >= 0 && index < shape_[0], "select(", index,
             ") out of range for dim 0 of shape ", shape_string());
  return as_strided(Shape(shape_.begin() + 1, shape_.end()),
                    Shape(strides_.begin() + 1, strides_.end()), index * strides_[0]);
}

void Tensor::copy_from(const Tensor& src) {
  ATTN_CHECK(defined() && src.defined(), "copy_from with an undefined tensor");
  ATTN_CHECK(shape_ == src.shape_, "copy_from: shape ", src.shape_string(), " into ",
             shape_string());
  // Copying between overlapping views of one storage would read values already overwritten.
  const Tensor source = shares_storage(src) ? src.clone() : src;
  // Row by row (all dims but the last), a plain copy when both rows are contiguous: the
  // element-wise odometer this replaced took ~15 ms to assemble [Wq|Wk|Wv] at d_model = 1024.
  const int last = rank() - 1;
  const int64_t width = shape_[last], to_step = strides_[last], from_step = source.strides_[last];
  const float* from = source.data();
  float* to = data();
  std::vector<int64_t> index(static_cast<size_t>(last), 0);
  int64_t to_row = 0, from_row = 0;
  for (int64_t row = 0, rows = numel() / width; row < rows; ++row) {
    if (to_step == 1 && from_step == 1) {
      std::copy_n(from + from_row, width, to + to_row);
    } else {
      for (int64_t i = 0; i < width; ++i) to[to_row + i * to_step] = from[from_row + i * from_step];
    }
    for (int d = last - 1; d >= 0; --d) {  // odometer over the leading dims
      if (++index[d] < shape_[d]) {
        to_row += strides_[d];
        from_row += source.strides_[d];
        break;
      }
      to_row -= strides_[d] * (shape_[d] - 1);
      from_row -= source.strides_[d] * (shape_[d] - 1);
      index[d] = 0;
    }
  }
}

Tensor Tensor::clone() const {
  ATTN_CHECK(defined(), "clone of an undefined tensor");
  Tensor copy = uninitialized(shape_);  // copy_from writes every element
  copy.copy_from(*this);
  return copy;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

std::vector<float> Tensor::to_vector() const {
  const Tensor c = contiguous();
  return std::vector<float>(c.data(), c.data() + c.numel());
}

}  // namespace attn
