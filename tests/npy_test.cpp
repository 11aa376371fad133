// .npy I/O: round trips, the dtypes and versions NumPy writes, and a clear error for every
// malformed file (never a crash, and never an allocation sized by an unchecked header).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "attn/files.hpp"
#include "attn/io.hpp"
#include "attn/random.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

namespace fs = std::filesystem;
using testing::ThrowsWith;

using Npy = testing::TempDirTest;

// A .npy image with the given header dict and payload.
std::string npy_bytes(const std::string& dict, const std::string& payload, int major = 1) {
  std::string header = dict;
  const size_t prefix = major == 1 ? 10 : 12;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const size_t n = header.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major == 2) out += std::string(2, '\0');
  return out + header + payload;
}

std::string floats(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

std::string dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

TEST_F(Npy, RoundTripsEveryRank) {
  for (const Shape& shape : {Shape{7}, Shape{2, 3}, Shape{2, 3, 4}, Shape{1, 2, 3, 5}}) {
    const Tensor t = rand_normal(shape, 1);
    write_npy(path("t.npy"), t);
    const NpyArray back = read_npy(path("t.npy"));
    EXPECT_EQ(back.dtype, NpyDtype::kFloat32);
    EXPECT_TRUE(testing::BitwiseEqual(back.values, t));
  }
  // A strided view is written in logical order.
  const Tensor t = rand_normal({3, 4}, 2);
  write_npy(path("view.npy"), t.transpose(0, 1));
  EXPECT_TRUE(testing::BitwiseEqual(read_npy(path("view.npy")).values, t.transpose(0, 1)));
}

TEST_F(Npy, HeaderIsAlignedAndVersionOne) {
  write_npy(path("t.npy"), Tensor({5}));
  std::ifstream in(path("t.npy"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ((bytes.size() - 20) % 64, 0u);
  EXPECT_NE(bytes.find("'shape': (5,)"), std::string::npos);
}

TEST_F(Npy, ReadsDoublesBooleansAndVersionTwo) {
  const std::vector<double> d = {1.5, -2.25, 1e-3};
  const NpyArray f8 = parse_npy(
      npy_bytes(dict("<f8", "(3,)"), std::string(reinterpret_cast<const char*>(d.data()), 24)),
      "f8");
  EXPECT_EQ(f8.dtype, NpyDtype::kFloat64);
  EXPECT_EQ(f8.values.to_vector(), (std::vector<float>{1.5f, -2.25f, 1e-3f}));

  const NpyArray b1 = parse_npy(npy_bytes(dict("|b1", "(2, 2)"), std::string("\1\0\0\1", 4)), "b1");
  EXPECT_EQ(b1.dtype, NpyDtype::kBool);
  EXPECT_EQ(b1.values.to_vector(), (std::vector<float>{1, 0, 0, 1}));

  const NpyArray v2 = parse_npy(npy_bytes(dict("<f4", "(2,)"), floats({3, 4}), 2), "v2");
  EXPECT_EQ(v2.values.to_vector(), (std::vector<float>{3, 4}));

  write_npy_bool(path("mask.npy"), Tensor::from_values({3}, {0, 2, 1}));
  EXPECT_EQ(read_npy(path("mask.npy")).values.to_vector(), (std::vector<float>{0, 1, 1}));
}

// Files numpy itself wrote (tests/fixtures/make_npy_dtype_fixtures.py) against numpy's own
// conversion of the same values to float32: bit for bit, NaN for NaN.
TEST(NpyDtypes, ReadsWhatNumpyWritesAsNumpyConvertsIt) {
  const std::string dir = std::string(ATTN_FIXTURES_DIR) + "/npy_dtypes/";
  const std::pair<const char*, NpyDtype> cases[] = {
      {"f2", NpyDtype::kFloat16}, {"bf16_v2", NpyDtype::kBFloat16}, {"i1", NpyDtype::kInt8},
      {"u1", NpyDtype::kUInt8},   {"i2", NpyDtype::kInt16},         {"u2", NpyDtype::kUInt16},
      {"i4", NpyDtype::kInt32},   {"u4", NpyDtype::kUInt32},        {"i8", NpyDtype::kInt64},
      {"u8", NpyDtype::kUInt64}};
  for (const auto& [name, dtype] : cases) {
    SCOPED_TRACE(name);
    const NpyArray got = read_npy(dir + name + ".npy");
    const NpyArray expected = read_npy(dir + "expected_" + name + ".npy");
    EXPECT_EQ(got.dtype, dtype);
    EXPECT_EQ(is_integer(got.dtype), std::string(name)[0] == 'i' || std::string(name)[0] == 'u');
    ASSERT_EQ(got.values.shape(), expected.values.shape());
    const std::vector<float> a = got.values.to_vector(), b = expected.values.to_vector();
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::isnan(b[i])) {
        EXPECT_TRUE(std::isnan(a[i])) << i;
      } else {
        EXPECT_EQ(std::memcmp(&a[i], &b[i], 4), 0) << i << ": " << a[i] << " vs " << b[i];
      }
    }
  }
}

TEST(NpyDtypes, TheDescrBfloat16IsAcceptedToo) {
  const uint16_t bits[] = {0x3f80, 0xc000};  // 1, -2
  const std::string payload(reinterpret_cast<const char*>(bits), 4);
  const NpyArray a = parse_npy(npy_bytes(dict("bfloat16", "(2,)"), payload), "B");
  EXPECT_EQ(a.dtype, NpyDtype::kBFloat16);
  EXPECT_EQ(a.values.to_vector(), (std::vector<float>{1.0f, -2.0f}));
}

TEST_F(Npy, RejectsWhatItCannotRepresent) {
  const std::string four = floats({1, 2, 3, 4});
  EXPECT_TRUE(ThrowsWith([&] { parse_npy(npy_bytes(dict("<f4", "(2, 2)", true), four), "F"); },
                         "F: Fortran-order arrays are not supported"));
  EXPECT_TRUE(ThrowsWith([&] { parse_npy(npy_bytes(dict(">f4", "(2, 2)"), four), "BE"); },
                         "BE: big-endian data ('>f4') is not supported"));
  EXPECT_TRUE(ThrowsWith([&] { parse_npy(npy_bytes(dict("<c8", "(2,)"), four), "C"); },
                         "C: unsupported dtype '<c8'"));
  EXPECT_TRUE(ThrowsWith([&] { parse_npy(npy_bytes(dict(">i4", "(2, 2)"), four), "BI"); },
                         "BI: big-endian data ('>i4') is not supported; save it as '<i4'"));
  EXPECT_TRUE(ThrowsWith([&] { parse_npy(npy_bytes(dict("<f4", "()"), floats({1})), "S"); },
                         "S: rank 0 array (); expected rank 1 to 4"));
  EXPECT_TRUE(
      ThrowsWith([&] { parse_npy(npy_bytes(dict("<f4", "(1, 1, 1, 1, 1)"), floats({1})), "R"); },
                 "rank 5 array"));
  EXPECT_TRUE(ThrowsWith([&] { parse_npy(npy_bytes(dict("<f4", "(0, 3)"), ""), "E"); },
                         "E: empty array (0, 3) is not supported"));
  const std::vector<double> huge = {1e300};
  EXPECT_TRUE(ThrowsWith(
      [&] {
        parse_npy(npy_bytes(dict("<f8", "(1,)"),
                            std::string(reinterpret_cast<const char*>(huge.data()), 8)),
                  "H");
      },
      "does not fit in float32"));
}

TEST_F(Npy, RejectsHeadersThatLieAboutTheSize) {
  const std::string four = floats({1, 2, 3, 4});
  EXPECT_TRUE(
      ThrowsWith([&] { parse_npy(npy_bytes(dict("<f4", "(3, 2)"), four), "L"); },
                 "L: shape (3, 2) of '<f4' needs 24 data bytes but the file has 16 (truncated)"));
  EXPECT_TRUE(ThrowsWith([&] { parse_npy(npy_bytes(dict("<f4", "(3,)"), four), "T"); },
                         "(trailing bytes)"));
  // A shape whose product would need terabytes: rejected before any allocation.
  EXPECT_TRUE(ThrowsWith(
      [&] { parse_npy(npy_bytes(dict("<f4", "(1048576, 1048576, 1048576)"), four), "B"); },
      "is too large"));
  EXPECT_TRUE(
      ThrowsWith([&] { parse_npy(npy_bytes(dict("<f4", "(99999999999999999999,)"), four), "D"); },
                 "a shape dim is too large"));
  // The header length field points past the end of the file.
  std::string truncated = npy_bytes(dict("<f4", "(4,)"), four).substr(0, 30);
  EXPECT_TRUE(ThrowsWith([&] { parse_npy(truncated, "H"); }, "H: truncated .npy header"));
  EXPECT_TRUE(
      ThrowsWith([&] { parse_npy(std::string("\x93NUMPY\x01", 7), "S"); }, "not a .npy file"));
}

TEST_F(Npy, RejectsMalformedHeaders) {
  const std::string four = floats({1, 2, 3, 4});
  EXPECT_TRUE(ThrowsWith([&] { parse_npy("PK\3\4 definitely a zip", "Z"); }, "Z: not a .npy file"));
  EXPECT_TRUE(ThrowsWith([&] { parse_npy(npy_bytes(dict("<f4", "(4,)"), four, 3), "V"); },
                         "V: unsupported .npy version 3.0"));
  EXPECT_TRUE(
      ThrowsWith([&] { parse_npy(npy_bytes("{'descr': '<f4', 'shape': (4,), }", four), "M"); },
                 "lacks one of"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        parse_npy(npy_bytes("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (4,)}", four), "B");
      },
      "expected True or False"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        parse_npy(npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (-4,)}", four), "N");
      },
      "expected a non-negative integer"));
  EXPECT_TRUE(ThrowsWith(
      [&] {
        parse_npy(
            npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 1}", four),
            "K");
      },
      "unknown header key 'x'"));
  EXPECT_TRUE(ThrowsWith([&] { parse_npy(npy_bytes("{'descr: '<f4'", four), "Q"); },
                         "malformed .npy header"));
}

TEST_F(Npy, FileErrors) {
  EXPECT_TRUE(ThrowsWith([&] { read_npy(path("missing.npy")); }, "missing.npy: cannot open"));
  EXPECT_TRUE(ThrowsWith([&] { read_npy(dir_.string()); }, "is a directory"));
  EXPECT_TRUE(ThrowsWith([&] { write_npy(path("no/such/dir/t.npy"), Tensor({2})); },
                         "cannot open for writing"));
  EXPECT_FALSE(fs::exists(path("no")));
  EXPECT_TRUE(ThrowsWith([&] { write_npy(path("u.npy"), Tensor{}); }, "undefined tensor"));
  EXPECT_FALSE(fs::exists(path("u.npy")));
}

TEST_F(Npy, WritingReplacesTheFileWholeAndLeavesNoTemporary) {
  write_npy(path("t.npy"), Tensor::full({100}, 1.0f));
  write_npy(path("t.npy"), Tensor::full({3}, 2.0f));
  EXPECT_EQ(read_npy(path("t.npy")).values.to_vector(), (std::vector<float>{2, 2, 2}));
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir_)) entries += e.is_regular_file();
  EXPECT_EQ(entries, 1);
}

// The reader under .npy, safetensors and the tokenizer file: exact bytes (empty, binary, larger
// than its 16 KiB reads, from a pipe), and its byte limit.
TEST(ByteCountText, SaysWholeGibAndMib) {
  EXPECT_EQ(byte_count_text(kMaxNpyBytes), "17179869184 bytes (16 GiB)");
  EXPECT_EQ(byte_count_text(kMaxConfigBytes), "1048576 bytes (1 MiB)");
  EXPECT_EQ(byte_count_text(3 * kMaxConfigBytes + 1), "3145729 bytes");
  EXPECT_EQ(byte_count_text(0), "0 bytes");
}

TEST_F(Npy, WholeFileReads) {
  std::string bytes;
  for (int i = 0; i < 40000; ++i) bytes += static_cast<char>(i * 7 + i / 256);
  for (const std::string& contents : {std::string(), std::string("\0x\n", 3), bytes}) {
    std::ofstream(path("f.bin"), std::ios::binary) << contents;
    EXPECT_EQ(read_whole_file(path("f.bin"), kMaxNpyBytes), contents);
  }
  EXPECT_EQ(read_whole_file(path("f.bin"), bytes.size()), bytes);
  EXPECT_TRUE(ThrowsWith([&] { read_whole_file(path("f.bin"), bytes.size() - 1); },
                         "40000 bytes, more than the 39999 bytes this file may have"));
  // A pipe has no size: the whole of it is read, and the limit is found by reading.
  for (const uint64_t limit : {uint64_t{3000}, uint64_t{1000}}) {
    testing::Pipe pipe(bytes.substr(0, 3000));
    pipe.close_writer();
    if (limit == 3000) {
      EXPECT_EQ(read_whole_file(pipe.path(), limit), bytes.substr(0, 3000));
    } else {
      EXPECT_TRUE(
          ThrowsWith([&] { read_whole_file(pipe.path(), limit); }, "longer than the 1000 bytes"));
    }
  }
}

// The header is read and checked first: a file whose size disagrees with it is refused before
// its data is read (here a sparse 20 GiB file, which reading would take minutes and 20 GiB), and
// a pipe is read only as far as the header promises.
TEST_F(Npy, HeaderIsCheckedBeforeTheData) {
  Tensor t({4});
  write_npy(path("small.npy"), t);
  ASSERT_EQ(::truncate(path("small.npy").c_str(), off_t{20} << 30), 0);
  EXPECT_TRUE(ThrowsWith([&] { read_npy(path("small.npy")); }, "(trailing bytes)"));

  // A header promising 32 GiB: refused from the header alone, while the writer still holds
  // the pipe open (reading on would wait for ever).
  std::string header = npy_bytes(t).substr(0, 128);
  const size_t shape_at = header.find("(4,)");
  ASSERT_NE(shape_at, std::string::npos);
  header.replace(shape_at, 4, "(8589934592,)");  // 2^33 floats
  header.erase(header.rfind('\n') - 9, 9);       // 9 spaces of padding fewer: the same length
  EXPECT_TRUE(ThrowsWith([&] { read_npy(testing::Pipe(header).path()); },
                         "at most 17179869184 bytes (16 GiB) are read"));

  // A pipe that goes on past the data the header promised.
  EXPECT_TRUE(ThrowsWith([&] { read_npy(testing::Pipe(npy_bytes(t) + "extra").path()); },
                         "(trailing bytes)"));
}

}  // namespace
}  // namespace attn
