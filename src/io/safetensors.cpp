// safetensors reading and writing (format in include/attn/io.hpp). The header is parsed with
// nlohmann-json; every number in it is checked before it is used as a size or an offset.
#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "attn/bfloat16.hpp"
#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/io.hpp"

namespace attn {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

using json = nlohmann::json;

constexpr uint64_t kMaxSafetensorsHeaderBytes = 100u << 20;  // the reference implementation's limit
constexpr char kMetadataKey[] = "__metadata__";

// Why a header of `header_bytes` is refused, or "" when it is not; `file_bytes` is unknown
// for a pipe. The limit is checked first: it is the reason when both fail.
std::string header_length_problem(uint64_t header_bytes, std::optional<uint64_t> file_bytes) {
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    return detail::concat("its header length ", header_bytes, " is more than the ",
                          byte_count_text(kMaxSafetensorsHeaderBytes), " a header may have");
  }
  if (file_bytes && header_bytes > *file_bytes - 8) {
    return detail::concat("its header length ", header_bytes, " does not fit the ", *file_bytes,
                          "-byte file");
  }
  return "";
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // zero or subnormal
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? std::numeric_limits<float>::infinity()
                              : std::numeric_limits<float>::quiet_NaN();
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), static_cast<int>(exponent) - 25);
  }
  return sign ? -magnitude : magnitude;
}

// Bytes per element of a dtype this reader converts, or 0 for one it does not.
int64_t element_size(const std::string& dtype) {
  if (dtype == "F32") return 4;
  if (dtype == "F64") return 8;
  if (dtype == "F16" || dtype == "BF16") return 2;
  return 0;
}

void convert(const char* src, const std::string& dtype, int64_t count, float* out) {
  if (dtype == "F32") {
    std::memcpy(out, src, static_cast<size_t>(count) * 4);
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    if (dtype == "F64") {
      double d;
      std::memcpy(&d, src + 8 * i, 8);
      out[i] = static_cast<float>(d);
    } else {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, 2);
      out[i] = dtype == "F16" ? half_to_float(h) : from_bfloat16(h);
    }
  }
}

uint64_t read_u64(std::string_view bytes) {
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  return n;
}

// A non-negative integer from the header, or an error naming where it was.
uint64_t header_count(const json& value, const std::string& where) {
  ATTN_CHECK(value.is_number_unsigned() || (value.is_number_integer() && value.get<int64_t>() >= 0),
             where, " must be a non-negative integer, got ", value.dump());
  return value.get<uint64_t>();
}

// One tensor entry of the header, checked against the size of the data section.
struct Entry {
  std::string name, dtype;
  Shape shape;
  uint64_t begin, end;
};

Entry parse_entry(const std::string& name, const json& value, uint64_t data_bytes,
                  const std::string& file) {
  const std::string where = file + ": tensor \"" + name + "\"";
  ATTN_CHECK(value.is_object() && value.contains("dtype") && value.contains("shape") &&
                 value.contains("data_offsets"),
             where, " needs dtype, shape and data_offsets");
  Entry e{name, "", {}, 0, 0};
  ATTN_CHECK(value["dtype"].is_string(), where, ": dtype must be a string");
  e.dtype = value["dtype"].get<std::string>();
  const int64_t size = element_size(e.dtype);
  ATTN_CHECK(size > 0, where, " has dtype ", e.dtype, "; this reader takes F32, F64, F16, BF16");
  const json& shape = value["shape"];
  ATTN_CHECK(shape.is_array() && !shape.empty() && shape.size() <= Tensor::kMaxRank, where,
             " has shape ", shape.dump(), "; attn tensors have rank 1..4");
  uint64_t numel = 1;
  for (const json& d : shape) {
    const uint64_t dim = header_count(d, where + " shape");
    ATTN_CHECK(dim >= 1, where, " has an empty dim in shape ", shape.dump());
    ATTN_CHECK(dim <= data_bytes && numel <= data_bytes / dim, where, " shape ", shape.dump(),
               " is larger than the file");
    numel *= dim;
    e.shape.push_back(static_cast<int64_t>(dim));
  }
  const json& offsets = value["data_offsets"];
  ATTN_CHECK(offsets.is_array() && offsets.size() == 2, where,
             ": data_offsets must be [begin, end]");
  e.begin = header_count(offsets[0], where + " data_offsets");
  e.end = header_count(offsets[1], where + " data_offsets");
  ATTN_CHECK(e.begin <= e.end && e.end <= data_bytes, where, " data_offsets [", e.begin, ", ",
             e.end, "] fall outside the ", data_bytes, " data bytes");
  ATTN_CHECK(e.end - e.begin == numel * static_cast<uint64_t>(size), where, " holds ",
             e.end - e.begin, " bytes but shape ", shape.dump(), " of ", e.dtype, " needs ",
             numel * static_cast<uint64_t>(size));
  return e;
}

std::map<std::string, std::string> parse_metadata(const json& value, const std::string& file) {
  ATTN_CHECK(value.is_object(), file, ": __metadata__ must be an object of strings");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, v] : value.items()) {
    ATTN_CHECK(v.is_string(), file, ": __metadata__ entry \"", key, "\" is not a string");
    metadata[key] = v.get<std::string>();
  }
  return metadata;
}

}  // namespace

const Tensor& Safetensors::at(const std::string& name) const {
  for (const auto& [n, t] : tensors) {
    if (n == name) return t;
  }
  throw Error("safetensors: no tensor named \"" + name + "\"");
}

bool Safetensors::contains(const std::string& name) const {
  return std::any_of(tensors.begin(), tensors.end(),
                     [&](const auto& e) { return e.first == name; });
}

namespace {

// `parsed`: the header's JSON when the caller has parsed it already (read_safetensors does, to
// size the data before reading it), so that it is not parsed twice.
Safetensors parse_image(std::string_view bytes, const std::string& name,
                        const json* parsed = nullptr) {
  ATTN_CHECK(bytes.size() >= 8, name, ": too short for a safetensors file (", bytes.size(),
             " bytes)");
  const uint64_t header_bytes = read_u64(bytes);
  const std::string problem = header_length_problem(header_bytes, bytes.size());
  ATTN_CHECK(problem.empty(), name, ": not a safetensors file: ", problem);
  json own;
  try {
    if (parsed == nullptr) own = json::parse(bytes.substr(8, header_bytes));
  } catch (const json::exception& e) {
    throw Error(name + ": not a safetensors file: the header is not JSON: " + e.what());
  }
  const json& header = parsed != nullptr ? *parsed : own;
  ATTN_CHECK(header.is_object(), name, ": the header must be a JSON object");
  const uint64_t data_bytes = bytes.size() - 8 - header_bytes;
  const char* data = bytes.data() + 8 + header_bytes;

  Safetensors result;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      result.metadata = parse_metadata(value, name);
    } else {
      entries.push_back(parse_entry(key, value, data_bytes, name));
    }
  }
  // The tensors must tile the data section: sorted by offset, each begins where the last ended.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (const Entry& e : entries) {
    ATTN_CHECK(e.begin == covered, name, ": tensor \"", e.name, "\" starts at byte ", e.begin,
               e.begin < covered ? ", overlapping the tensor before it" : ", leaving a gap",
               " (expected ", covered, ")");
    covered = e.end;
  }
  ATTN_CHECK(covered == data_bytes, name, ": the tensors cover ", covered, " of the ", data_bytes,
             " data bytes");
  for (const Entry& e : entries) {
    Tensor t(e.shape);
    convert(data + e.begin, e.dtype, t.numel(), t.data());
    result.tensors.emplace_back(e.name, std::move(t));
  }
  return result;
}

}  // namespace

Safetensors parse_safetensors(const std::string& bytes, const std::string& name) {
  return parse_image(bytes, name);
}

namespace {

// The size of the data section a header (a JSON object) promises: the largest end offset (the
// tensors must tile it; parse_image checks that they do).
uint64_t promised_data_bytes(const json& header) {
  uint64_t end = 0;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey || !value.is_object() || !value.contains("data_offsets")) continue;
    const json& offsets = value["data_offsets"];
    if (offsets.is_array() && offsets.size() == 2 && offsets[1].is_number_unsigned()) {
      end = std::max(end, offsets[1].get<uint64_t>());
    }
  }
  return end;
}

// A regular file mapped read-only for as long as the object lives.
class MappedFile {
 public:
  MappedFile(std::FILE* file, uint64_t size, const std::string& path) : size_(size) {
    if (size_ == 0) return;
    data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, ::fileno(file), 0);
    ATTN_CHECK(data_ != MAP_FAILED, path, ": cannot map the file: ", std::strerror(errno));
  }
  ~MappedFile() {
    if (size_ != 0) ::munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  std::string_view bytes() const { return {static_cast<const char*>(data_), size_}; }

 private:
  void* data_ = nullptr;
  uint64_t size_;
};

}  // namespace

// The length and the header first, checked against the file's size (or, for a pipe, against
// the limit), then the data: a lying header is refused before the data is read.
Safetensors read_safetensors(const std::string& path) {
  const InputFile input(path);
  const std::optional<uint64_t> size = input.size();
  ATTN_CHECK(!size || *size <= kMaxSafetensorsBytes, path, ": ", *size, " bytes; at most ",
             byte_count_text(kMaxSafetensorsBytes), " are read");
  std::string bytes = read_bytes(input.get(), 8, path);
  if (bytes.size() == 8) {
    const uint64_t header_bytes = read_u64(bytes);
    const std::string problem = header_length_problem(header_bytes, size);
    ATTN_CHECK(problem.empty(), path, ": not a safetensors file: ", problem);
    bytes += read_bytes(input.get(), header_bytes, path);
    // Parsed once here and handed to parse_image; a header that is not a JSON object is left
    // for parse_image to describe, from the bytes read so far.
    const json header = json::parse(std::string_view(bytes).substr(8), nullptr,
                                    /*allow_exceptions=*/false);
    if (header.is_object()) {
      const uint64_t data = promised_data_bytes(header);
      if (size) {
        const uint64_t left = *size - 8 - header_bytes;
        ATTN_CHECK(data == left, path, ": the header's tensors need ", data,
                   " data bytes but the file has ", left, data > left ? " (truncated)" : "");
        // A regular file is mapped, not read: each tensor is converted from the mapping, so the
        // file's bytes never sit in memory beside the tensors made of them.
        const MappedFile mapped(input.get(), *size, path);
        return parse_image(mapped.bytes(), path, &header);
      }
      // A pipe: what the header promises and one byte more, to tell trailing data.
      ATTN_CHECK(data <= kMaxSafetensorsBytes, path, ": the header's tensors need ", data,
                 " bytes; at most ", byte_count_text(kMaxSafetensorsBytes), " are read");
      bytes += read_bytes(input.get(), data + 1, path);
      return parse_image(bytes, path, &header);
    }
  }
  return parse_image(bytes, path);
}

std::string safetensors_image(const std::vector<std::pair<std::string, Tensor>>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    ATTN_CHECK(!name.empty() && name != kMetadataKey, "write_safetensors: bad tensor name \"", name,
               "\"");
    ATTN_CHECK(!header.contains(name), "write_safetensors: tensor \"", name, "\" given twice");
    ATTN_CHECK(t.defined(), "write_safetensors: tensor \"", name, "\" is undefined");
    const uint64_t end = offset + static_cast<uint64_t>(t.numel()) * 4;
    header[name] = {{"dtype", "F32"}, {"shape", t.shape()}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {  // e.g. a name or metadata value that is not UTF-8
    throw Error(std::string("write_safetensors: ") + e.what());
  }
  while (text.size() % 8 != 0) text += ' ';  // so the data starts 8-byte aligned
  std::string bytes(8, '\0');
  const uint64_t length = text.size();
  std::memcpy(bytes.data(), &length, 8);
  bytes += text;
  bytes.reserve(bytes.size() + offset);
  for (const auto& [name, t] : tensors) {
    const Tensor c = t.contiguous();
    bytes.append(reinterpret_cast<const char*>(c.data()), static_cast<size_t>(c.numel()) * 4);
  }
  return bytes;
}

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomically(path, safetensors_image(tensors, metadata));
}

}  // namespace attn
