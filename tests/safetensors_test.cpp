// safetensors I/O: round trips with metadata, the dtypes other writers use, a file laid out by
// hand as the format's specification describes, and a clear error for every malformed file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>

#include "attn/io.hpp"
#include "attn/random.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::ThrowsWith;
using Safetensor = testing::TempDirTest;

// A file image from a header text and data bytes, exactly as the specification lays it out.
std::string image(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

std::string bytes_of(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

TEST_F(Safetensor, RoundTripKeepsNamesShapesValuesAndMetadata) {
  const Tensor a = rand_normal({2, 3}, 1), b = rand_normal({4, 1, 2, 5}, 2);
  const Tensor strided = rand_normal({3, 4}, 3).transpose(0, 1);  // written contiguous
  write_safetensors(path("t.safetensors"), {{"a", a}, {"layer.0.b", b}, {"s", strided}},
                    {{"format", "test"}, {"note", "ünïcode ✓"}});
  const Safetensors f = read_safetensors(path("t.safetensors"));
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.tensors[0].first, "a");  // in data order
  EXPECT_TRUE(testing::BitwiseEqual(f.at("a"), a));
  EXPECT_TRUE(testing::BitwiseEqual(f.at("layer.0.b"), b));
  EXPECT_TRUE(testing::BitwiseEqual(f.at("s"), strided.contiguous()));
  EXPECT_EQ(f.metadata.at("note"), "ünïcode ✓");
  EXPECT_TRUE(f.contains("a"));
  EXPECT_FALSE(f.contains("b"));
  EXPECT_TRUE(ThrowsWith([&] { f.at("missing"); }, "no tensor named \"missing\""));
}

TEST_F(Safetensor, HeaderIsPaddedAndDataStartsAligned) {
  const std::string bytes = safetensors_image({{"x", Tensor::full({3}, 1.5f)}});
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 12);
  EXPECT_EQ(bytes.substr(8, 1), "{");
}

TEST_F(Safetensor, ReadsAHandWrittenFileWithOtherDtypes) {
  // F64 2.5, F16 -2 (0xC000), BF16 3 (0x4040), F32 [1, 2]; keys out of data order.
  std::string data;
  const double d = 2.5;
  data.append(reinterpret_cast<const char*>(&d), 8);
  data += std::string("\x00\xC0", 2);
  data += std::string("\x40\x40", 2);
  data += bytes_of({1.0f, 2.0f});
  const std::string header = R"({"f32":{"dtype":"F32","shape":[1,2],"data_offsets":[12,20]},)"
                             R"("f64":{"dtype":"F64","shape":[1],"data_offsets":[0,8]},)"
                             R"("f16":{"dtype":"F16","shape":[1],"data_offsets":[8,10]},)"
                             R"("bf16":{"dtype":"BF16","shape":[1],"data_offsets":[10,12]}})";
  const Safetensors f = parse_safetensors(image(header, data), "hand");
  EXPECT_EQ(f.at("f64").at({0}), 2.5f);
  EXPECT_EQ(f.at("f16").at({0}), -2.0f);
  EXPECT_EQ(f.at("bf16").at({0}), 3.0f);
  EXPECT_EQ(f.at("f32").shape(), (Shape{1, 2}));
  EXPECT_EQ(f.at("f32").at({0, 1}), 2.0f);
  EXPECT_TRUE(f.metadata.empty());
}

TEST_F(Safetensor, BrokenFilesFailClearly) {
  const std::string ok = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data = bytes_of({1, 2});
  struct Case {
    std::string bytes, message;
  };
  const std::vector<Case> cases = {
      {"abc", "too short"},
      {image(ok, data).substr(0, 20), "does not fit"},
      {image("{\"x\": ", data), "not JSON"},
      {image("[1, 2]", ""), "must be a JSON object"},
      {image(R"({"x":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}})", "ab"), "dtype I8"},
      {image(R"({"x":{"dtype":"F32","shape":[],"data_offsets":[0,4]}})", "abcd"), "rank 1..4"},
      {image(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})", ""), "empty dim"},
      {image(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data), "non-negative"},
      {image(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data), "needs 12"},
      {image(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,80]}})", data), "fall outside"},
      {image(R"({"x":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", data),
       "larger than the file"},
      {image(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", data), "leaving a gap"},
      {image(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
             R"("y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
             data),
       "overlapping"},
      {image(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", data),
       "cover 4 of the 8"},
      {image(R"({"x":{"dtype":"F32","shape":[2]}})", data), "needs dtype, shape and data_offsets"},
      {image(R"({"__metadata__":{"a":1}})", ""), "is not a string"},
  };
  for (const Case& c : cases) {
    EXPECT_TRUE(ThrowsWith([&] { parse_safetensors(c.bytes, "bad.safetensors"); }, c.message))
        << c.message;
  }
  // A length past the limit is said to be past it, whether or not it fits the file.
  std::string huge(8, '\xff');
  EXPECT_TRUE(ThrowsWith([&] { parse_safetensors(huge + "{}", "h"); },
                         "its header length 18446744073709551615 is more than the 104857600 bytes "
                         "(100 MiB) a header may have"));
  std::string past_limit(8, '\0');
  past_limit[3] = '\x08';  // 2^27 = 128 MiB of header, in a file 8 bytes longer
  past_limit.resize(8 + (size_t{1} << 27), ' ');
  EXPECT_TRUE(
      ThrowsWith([&] { parse_safetensors(past_limit, "h"); }, "is more than the 104857600 bytes"));
  // From a pipe, which has no size, the limit is all there is to check before reading.
  EXPECT_TRUE(ThrowsWith([&] { read_safetensors(testing::Pipe(past_limit.substr(0, 100)).path()); },
                         "its header length 134217728 is more than the 104857600 bytes"));
  EXPECT_TRUE(ThrowsWith([&] { read_safetensors(path("absent.safetensors")); }, "cannot open"));
}

// The length and the header are read and checked first: a file whose size disagrees with them
// is refused before the data is read (a sparse 20 GiB file here), and a pipe is read only as far
// as the header promises, so a writer that never stops cannot make the reader wait or grow.
TEST_F(Safetensor, HeaderIsCheckedBeforeTheData) {
  const std::string header = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::ofstream(path("sparse.safetensors"), std::ios::binary) << image(header, bytes_of({1, 2}));
  ASSERT_EQ(::truncate(path("sparse.safetensors").c_str(), off_t{20} << 30), 0);
  EXPECT_TRUE(ThrowsWith([&] { read_safetensors(path("sparse.safetensors")); },
                         "the header's tensors need 8 data bytes but the file has"));
  ASSERT_EQ(
      ::truncate(path("sparse.safetensors").c_str(), static_cast<off_t>(8 + header.size() + 4)), 0);
  EXPECT_TRUE(ThrowsWith([&] { read_safetensors(path("sparse.safetensors")); }, "(truncated)"));

  const std::string lying =
      image(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", bytes_of({1, 2})) +
      "and more";
  // The write end stays open: the reader must stop at the data's end plus one byte.
  EXPECT_TRUE(ThrowsWith([&] { read_safetensors(testing::Pipe(lying).path()); },
                         "cover 8 of the 9 data bytes"));
  const std::string huge =
      image(R"({"x":{"dtype":"F32","shape":[17179869184,2],"data_offsets":[0,137438953472]}})", "");
  EXPECT_TRUE(ThrowsWith([&] { read_safetensors(testing::Pipe(huge).path()); },
                         "at most 68719476736 bytes (64 GiB) are read"));
}

TEST_F(Safetensor, RandomMutationsNeverCrash) {
  const std::string valid =
      safetensors_image({{"w", rand_normal({3, 4}, 1)}, {"b", rand_normal({4}, 2)}}, {{"k", "v"}});
  std::mt19937_64 rng(7);
  int errors = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string bytes = valid;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % bytes.size();
      if (rng() % 8 == 0) {
        bytes.resize(at);  // truncate
        if (bytes.empty()) break;
      } else {
        bytes[at] = static_cast<char>(rng());
      }
    }
    try {
      parse_safetensors(bytes, "mutated");
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 1000);  // most mutations break the file, and each one is reported
}

TEST_F(Safetensor, WriteRejectsBadNames) {
  const Tensor t = Tensor::full({1}, 1.0f);
  EXPECT_TRUE(ThrowsWith([&] { safetensors_image({{"a", t}, {"a", t}}); }, "given twice"));
  EXPECT_TRUE(ThrowsWith([&] { safetensors_image({{"", t}}); }, "bad tensor name"));
  EXPECT_TRUE(ThrowsWith([&] { safetensors_image({{"__metadata__", t}}); }, "bad tensor name"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        safetensors_image({{"a", t}}, {{"k", "\xff"}});
      },
      "write_safetensors"));
}

}  // namespace
}  // namespace attn
