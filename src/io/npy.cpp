// .npy reading and writing. The header is a Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// parsed here by a small tokenizer that accepts exactly what NumPy writes and reports
// anything else. See https://numpy.org/devdocs/reference/generated/numpy.lib.format.html.
#include <unistd.h>

#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include "attn/bfloat16.hpp"
#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/io.hpp"

namespace attn {
namespace {

static_assert(std::endian::native == std::endian::little, ".npy I/O assumes a little-endian host");

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
constexpr int64_t kMaxDim = int64_t{1} << 40;
constexpr size_t kMaxNpyHeaderBytes = size_t{1} << 20;  // numpy writes tens of bytes

// The three entries of a header dict.
struct Header {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// A cursor over the header text with the few token kinds the dict uses.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& name) : text_(text), name_(name) {}

  Header parse() {
    Header header;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (!accept('}')) {
      const std::string key = quoted();
      expect(':');
      if (key == "descr") {
        header.descr = quoted();
        have_descr = true;
      } else if (key == "fortran_order") {
        header.fortran_order = boolean();
        have_order = true;
      } else if (key == "shape") {
        header.shape = tuple();
        have_shape = true;
      } else {
        fail("unknown header key '" + key + "'");
      }
      if (!accept(',')) {
        expect('}');
        break;
      }
    }
    if (!have_descr || !have_order || !have_shape) {
      fail("header lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return header;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(name_ + ": malformed .npy header: " + what);
  }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool accept(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) fail(std::string("expected '") + c + "'");
  }
  std::string quoted() {
    skip_space();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      fail("expected a string");
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string::npos) fail("unterminated string");
    std::string s = text_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (text_.compare(pos_, std::strlen(word), word) == 0) {
        pos_ += std::strlen(word);
        return value;
      }
    }
    fail("expected True or False");
  }
  Shape tuple() {
    Shape shape;
    expect('(');
    while (!accept(')')) {
      skip_space();
      int64_t dim = 0;
      size_t digits = 0;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
        dim = dim * 10 + (text_[pos_++] - '0');
        if (dim > kMaxDim) fail("a shape dim is too large");
        ++digits;
      }
      if (digits == 0) fail("expected a non-negative integer in the shape");
      shape.push_back(dim);
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }

  const std::string& text_;
  const std::string& name_;
  size_t pos_ = 0;
};

struct DtypeName {
  const char* descr;
  NpyDtype dtype;
  size_t bytes;
};
constexpr DtypeName kDtypes[] = {
    {"<f4", NpyDtype::kFloat32, 4},  {"<f8", NpyDtype::kFloat64, 8},
    {"<f2", NpyDtype::kFloat16, 2},  {"<V2", NpyDtype::kBFloat16, 2},
    {"|V2", NpyDtype::kBFloat16, 2}, {"bfloat16", NpyDtype::kBFloat16, 2},
    {"|b1", NpyDtype::kBool, 1},     {"|i1", NpyDtype::kInt8, 1},
    {"|u1", NpyDtype::kUInt8, 1},    {"<i2", NpyDtype::kInt16, 2},
    {"<u2", NpyDtype::kUInt16, 2},   {"<i4", NpyDtype::kInt32, 4},
    {"<u4", NpyDtype::kUInt32, 4},   {"<i8", NpyDtype::kInt64, 8},
    {"<u8", NpyDtype::kUInt64, 8}};

size_t item_size(NpyDtype dtype) {
  for (const DtypeName& d : kDtypes) {
    if (d.dtype == dtype) return d.bytes;
  }
  return 0;
}

NpyDtype dtype_of(const std::string& descr, const std::string& name) {
  for (const DtypeName& d : kDtypes) {
    if (descr == d.descr) return d.dtype;
  }
  if (descr.size() >= 2 && descr[0] == '>' && descr[1] != '\0') {
    throw Error(name + ": big-endian data ('" + descr + "') is not supported; save it as '<" +
                descr.substr(1) + "'");
  }
  throw Error(name + ": unsupported dtype '" + descr +
              "'; expected a float ('<f4', '<f8', '<f2', bfloat16), '|b1' or an integer");
}

// Reads a little-endian unsigned integer of `n` bytes.
uint32_t read_le(const std::string& bytes, size_t at, size_t n) {
  uint32_t value = 0;
  for (size_t i = 0; i < n; ++i)
    value |= uint32_t{static_cast<unsigned char>(bytes[at + i])} << (8 * i);
  return value;
}

// float16 bits -> float, exactly: sign, 5 exponent bits (bias 15), 10 mantissa bits.
float from_float16(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16, exponent = (h >> 10) & 0x1fu,
                 mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {  // zero or subnormal: mantissa · 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

template <class T>
T load(const char* at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

// Element i of the payload as a float.
float element(const char* payload, NpyDtype dtype, int64_t i, const std::string& name) {
  switch (dtype) {
    case NpyDtype::kFloat32:
      return load<float>(payload + 4 * i);
    case NpyDtype::kFloat64: {
      const double x = load<double>(payload + 8 * i);
      if (std::isfinite(x) && std::fabs(x) > std::numeric_limits<float>::max()) {
        throw Error(
            detail::concat(name, ": value ", x, " at flat index ", i, " does not fit in float32"));
      }
      return static_cast<float>(x);
    }
    case NpyDtype::kFloat16:
      return from_float16(load<uint16_t>(payload + 2 * i));
    case NpyDtype::kBFloat16:
      return from_bfloat16(load<uint16_t>(payload + 2 * i));
    case NpyDtype::kBool:
      return payload[i] != 0 ? 1.0f : 0.0f;
    case NpyDtype::kInt8:
      return static_cast<float>(load<int8_t>(payload + i));
    case NpyDtype::kUInt8:
      return static_cast<float>(load<uint8_t>(payload + i));
    case NpyDtype::kInt16:
      return static_cast<float>(load<int16_t>(payload + 2 * i));
    case NpyDtype::kUInt16:
      return static_cast<float>(load<uint16_t>(payload + 2 * i));
    case NpyDtype::kInt32:
      return static_cast<float>(load<int32_t>(payload + 4 * i));
    case NpyDtype::kUInt32:
      return static_cast<float>(load<uint32_t>(payload + 4 * i));
    case NpyDtype::kInt64:
      return static_cast<float>(load<int64_t>(payload + 8 * i));
    case NpyDtype::kUInt64:
      return static_cast<float>(load<uint64_t>(payload + 8 * i));
  }
  return 0.0f;
}

// Converts the payload into float32 values.
void convert_payload(const char* payload, NpyDtype dtype, Tensor& out, const std::string& name) {
  float* dst = out.data();
  const int64_t n = out.numel();
  if (dtype == NpyDtype::kFloat32) {
    std::memcpy(dst, payload, sizeof(float) * static_cast<size_t>(n));
    return;
  }
  for (int64_t i = 0; i < n; ++i) dst[i] = element(payload, dtype, i, name);
}

std::string header_text(const char* descr, const Shape& shape) {
  std::string dims;
  for (int64_t d : shape) dims += std::to_string(d) + ", ";
  if (shape.size() > 1)
    dims.resize(dims.size() - 2);  // "(5,)" keeps its comma, "(2, 3)" not
  else
    dims.pop_back();
  std::string text =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Pad with spaces so that magic + version + length + text + '\n' is a multiple of 64.
  const size_t prefix = kMagicSize + 2 + 2;
  while ((prefix + text.size() + 1) % 64 != 0) text += ' ';
  return text + '\n';
}

std::string npy_image(const Tensor& t, NpyDtype dtype) {
  ATTN_CHECK(t.defined(), "write_npy: undefined tensor");
  const std::string text = header_text(dtype == NpyDtype::kBool ? "|b1" : "<f4", t.shape());
  std::string bytes(kMagic, kMagicSize);
  bytes += '\x01';
  bytes += '\x00';
  bytes += static_cast<char>(text.size() & 0xff);
  bytes += static_cast<char>(text.size() >> 8);
  bytes += text;
  const std::vector<float> values = t.to_vector();
  if (dtype == NpyDtype::kBool) {
    for (float v : values) bytes += v != 0.0f ? '\x01' : '\x00';
  } else {
    bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  }
  return bytes;
}

}  // namespace

bool is_floating(NpyDtype dtype) {
  return dtype == NpyDtype::kFloat32 || dtype == NpyDtype::kFloat64 ||
         dtype == NpyDtype::kFloat16 || dtype == NpyDtype::kBFloat16;
}

bool is_integer(NpyDtype dtype) { return !is_floating(dtype) && dtype != NpyDtype::kBool; }

namespace {

// Where the header text starts: after the magic, the version and the header's length field.
// attn::Error unless bytes (at least 8 of them) begin like a version 1.0 or 2.0 .npy file.
size_t header_start_of(const std::string& bytes, const std::string& name) {
  if (bytes.size() < kMagicSize + 2 || bytes.compare(0, kMagicSize, kMagic, kMagicSize) != 0) {
    throw Error(name + ": not a .npy file (missing the \\x93NUMPY magic)");
  }
  const int major = static_cast<unsigned char>(bytes[kMagicSize]);
  const int minor = static_cast<unsigned char>(bytes[kMagicSize + 1]);
  if ((major != 1 && major != 2) || minor != 0) {
    throw Error(detail::concat(name, ": unsupported .npy version ", major, ".", minor,
                               "; expected 1.0 or 2.0"));
  }
  return kMagicSize + 2 + (major == 1 ? 2 : 4);
}

// Where the data starts, given the bytes up to the header's start.
size_t data_start_of(const std::string& bytes, size_t header_start, const std::string& name) {
  if (bytes.size() < header_start) throw Error(name + ": truncated .npy header");
  const size_t header_len = read_le(bytes, kMagicSize + 2, header_start - kMagicSize - 2);
  if (header_len > kMaxNpyHeaderBytes) {
    throw Error(detail::concat(name, ": .npy header of ", header_len, " bytes; at most ",
                               byte_count_text(kMaxNpyHeaderBytes), " are read"));
  }
  return header_start + header_len;
}

struct Layout {
  Header header;
  NpyDtype dtype;
  size_t data_start, data_bytes;
};

// The header's meaning, from the bytes up to the data (the payload is not needed).
Layout layout_of(const std::string& bytes, const std::string& name) {
  Layout layout;
  const size_t header_start = header_start_of(bytes, name);
  layout.data_start = data_start_of(bytes, header_start, name);
  if (layout.data_start > bytes.size()) {
    throw Error(detail::concat(name, ": truncated .npy header (claims ",
                               layout.data_start - header_start, " bytes, the file has ",
                               bytes.size() - header_start, " left)"));
  }
  const std::string text = bytes.substr(header_start, layout.data_start - header_start);
  layout.header = HeaderParser(text, name).parse();
  const Header& header = layout.header;
  layout.dtype = dtype_of(header.descr, name);
  if (header.fortran_order) {
    throw Error(name + ": Fortran-order arrays are not supported; save with np.ascontiguousarray");
  }
  if (header.shape.empty() || header.shape.size() > Tensor::kMaxRank) {
    throw Error(detail::concat(name, ": rank ", header.shape.size(), " array ",
                               to_string(header.shape), "; expected rank 1 to 4"));
  }
  int64_t count = 1;
  for (int64_t d : header.shape) {
    if (d == 0)
      throw Error(name + ": empty array " + to_string(header.shape) + " is not supported");
    if (d > kMaxDim / count)
      throw Error(name + ": shape " + to_string(header.shape) + " is too large");
    count *= d;
  }
  layout.data_bytes = static_cast<size_t>(count) * item_size(layout.dtype);
  if (layout.data_bytes > kMaxNpyBytes) {
    throw Error(detail::concat(name, ": shape ", to_string(header.shape), " of '", header.descr,
                               "' is ", layout.data_bytes, " bytes; at most ",
                               byte_count_text(kMaxNpyBytes), " are read"));
  }
  return layout;
}

// attn::Error unless `have` data bytes are what the header needs.
void check_data_size(const Layout& layout, uint64_t have, const std::string& name) {
  if (have == layout.data_bytes) return;
  throw Error(detail::concat(name, ": shape ", to_string(layout.header.shape), " of '",
                             layout.header.descr, "' needs ", layout.data_bytes,
                             " data bytes but the file has ", have,
                             have < layout.data_bytes ? " (truncated)" : " (trailing bytes)"));
}

}  // namespace

namespace {

// The array of bytes whose header is `layout`: every size is checked against the payload
// before anything is allocated.
NpyArray array_of(const std::string& bytes, const Layout& layout, const std::string& name) {
  check_data_size(layout, bytes.size() - layout.data_start, name);
  NpyArray array{Tensor(layout.header.shape), layout.dtype};
  convert_payload(bytes.data() + layout.data_start, layout.dtype, array.values, name);
  return array;
}

}  // namespace

NpyArray parse_npy(const std::string& bytes, const std::string& name) {
  return array_of(bytes, layout_of(bytes, name), name);
}

// The header first, checked, then exactly the data it promises (a regular file's size is
// checked before the data is read; a pipe that goes on past it is refused).
NpyArray read_npy(const std::string& path) {
  const InputFile input(path);
  std::string bytes = read_bytes(input.get(), kMagicSize + 2, path);
  const size_t header_start = header_start_of(bytes, path);
  bytes += read_bytes(input.get(), header_start - bytes.size(), path);
  const size_t data_start = data_start_of(bytes, header_start, path);
  bytes += read_bytes(input.get(), data_start - bytes.size(), path);
  const Layout layout = layout_of(bytes, path);
  if (input.size())
    check_data_size(layout, *input.size() - std::min<uint64_t>(*input.size(), data_start), path);
  bytes += read_bytes(input.get(), layout.data_bytes + 1, path);
  return array_of(bytes, layout, path);
}

std::string npy_bytes(const Tensor& t) { return npy_image(t, NpyDtype::kFloat32); }

void write_npy(const std::string& path, const Tensor& t) {
  write_file_atomically(path, npy_image(t, NpyDtype::kFloat32));
}

void write_npy_bool(const std::string& path, const Tensor& t) {
  write_file_atomically(path, npy_image(t, NpyDtype::kBool));
}

}  // namespace attn
