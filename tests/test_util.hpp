// Helpers shared by the tests: comparisons that report the worst element, error checks.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

#include "attn/error.hpp"
#include "attn/sdpa.hpp"
#include "attn/tensor.hpp"

namespace attn::testing {

inline constexpr float kInf = std::numeric_limits<float>::infinity();

// The step of a sweep that calls the library once per element position (a NaN planted at each
// in turn): `step` in Release and ASan; coarser under ThreadSanitizer, where each call costs
// about ten times more and what the sweep checks (that some task reads every element, for any
// split of the work) is the same whatever the threads' interleaving TSan watches. 8·step + 1
// still lands on every column of a row over the sweep.
inline constexpr int64_t sweep_step(int64_t step) {
#if defined(__SANITIZE_THREAD__)
  return 8 * step + 1;
#else
  return step;
#endif
}

// Max |a − b| over all elements; shapes must match. NaN anywhere counts as infinite error.
inline ::testing::AssertionResult AllClose(const Tensor& a, const Tensor& b, double tolerance) {
  if (a.shape() != b.shape()) {
    return ::testing::AssertionFailure()
           << "shapes differ: " << a.shape_string() << " vs " << b.shape_string();
  }
  const std::vector<float> x = a.to_vector(), y = b.to_vector();
  double worst = 0.0;
  size_t worst_at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double err =
        std::isnan(x[i]) || std::isnan(y[i]) ? INFINITY : std::fabs(double{x[i]} - y[i]);
    if (err > worst || (std::isinf(err) && !std::isinf(worst))) {
      worst = err;
      worst_at = i;
    }
  }
  if (worst <= tolerance) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "max |a - b| = " << worst << " > " << tolerance << " at flat index " << worst_at
         << " (a = " << x[worst_at] << ", b = " << y[worst_at] << ") for shape "
         << a.shape_string();
}

// max |a − b| ≤ tolerance · max |b| (relative to the tensor's largest expected value), the
// worst element and `what` in the message.
inline ::testing::AssertionResult RelativelyClose(const Tensor& a, const Tensor& b,
                                                  double tolerance, const std::string& what) {
  double largest = 0.0;
  for (float x : b.to_vector()) largest = std::max(largest, std::fabs(double{x}));
  auto result = AllClose(a, b, tolerance * std::max(largest, 1e-30));
  if (!result) result << " [" << what << ", max |expected| = " << largest << "]";
  return result;
}

// Every element bitwise equal.
inline ::testing::AssertionResult BitwiseEqual(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) {
    return ::testing::AssertionFailure()
           << "shapes differ: " << a.shape_string() << " vs " << b.shape_string();
  }
  const std::vector<float> x = a.to_vector(), y = b.to_vector();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::memcmp(&x[i], &y[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure()
             << "element " << i << " differs: " << x[i] << " vs " << y[i];
    }
  }
  return ::testing::AssertionSuccess();
}

// The bytes of a file ("" when it cannot be opened).
inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

#ifdef ATTN_TEST_DATA_DIR
// The first 256 KiB of tinyshakespeare (cut at a line end), committed with the tests.
inline const std::string& shakespeare_excerpt() {
  static const std::string text = [] {
    const std::filesystem::path path = ATTN_TEST_DATA_DIR "/shakespeare_excerpt.txt";
    std::string bytes = slurp(path);
    if (bytes.empty()) throw std::runtime_error("cannot read test data " + path.string());
    return bytes;
  }();
  return text;
}
#endif

// A pipe holding `bytes` (at most the pipe's 64 KiB buffer), readable at path(); its write end
// stays open until close_writer() or the end, so a reader that reads past `bytes` would wait.
class Pipe {
 public:
  explicit Pipe(const std::string& bytes) {
    if (::pipe(ends_) != 0 ||
        ::write(ends_[1], bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size())) {
      throw std::runtime_error("cannot fill a pipe");
    }
  }
  ~Pipe() {
    ::close(ends_[0]);
    close_writer();
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(ends_[0]); }
  void close_writer() {
    if (ends_[1] >= 0) ::close(ends_[1]);
    ends_[1] = -1;
  }

 private:
  int ends_[2] = {-1, -1};
};

// Runs fn, expecting attn::Error whose message contains `expected`.
inline ::testing::AssertionResult ThrowsWith(const std::function<void()>& fn,
                                             const std::string& expected) {
  try {
    fn();
  } catch (const Error& e) {
    if (std::string(e.what()).find(expected) != std::string::npos) {
      return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "message \"" << e.what() << "\" lacks \"" << expected << "\"";
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-attn exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw (expected \"" << expected << "\")";
}

// Options with the causal mask on.
inline SdpaOptions causal() {
  SdpaOptions o;
  o.causal = true;
  return o;
}

// A fixture with a fresh folder per test, removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("attn_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

}  // namespace attn::testing
