// LayerNorm forward and backward (src/nn/layer_norm.hpp) against the formulas in double, at
// widths that are whole vectors, a vector and a tail, and a tail alone, on every CPU.
#include "src/nn/layer_norm.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace attn::nn {
namespace {

struct Reference {
  std::vector<double> y, dx, d_weight, d_bias;
};

// The double-precision forward and backward of rows × c, dx starting from dx0.
Reference reference(const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& b, const std::vector<float>& dy,
                    const std::vector<float>& dx0, int64_t rows, int64_t c) {
  Reference r{std::vector<double>(x.size()), std::vector<double>(dx0.begin(), dx0.end()),
              std::vector<double>(c, 0.0), std::vector<double>(c, 0.0)};
  for (int64_t row = 0; row < rows; ++row) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < c; ++i) mean += x[row * c + i];
    mean /= c;
    for (int64_t i = 0; i < c; ++i) var += (x[row * c + i] - mean) * (x[row * c + i] - mean);
    const double rstd = 1.0 / std::sqrt(var / c + kLayerNormEps);
    double g_mean = 0, gx_mean = 0;
    std::vector<double> xhat(c);
    for (int64_t i = 0; i < c; ++i) {
      xhat[i] = (x[row * c + i] - mean) * rstd;
      r.y[row * c + i] = xhat[i] * w[i] + b[i];
      const double g = double{dy[row * c + i]} * w[i];
      g_mean += g / c;
      gx_mean += g * xhat[i] / c;
      r.d_weight[i] += dy[row * c + i] * xhat[i];
      r.d_bias[i] += dy[row * c + i];
    }
    for (int64_t i = 0; i < c; ++i) {
      const double g = double{dy[row * c + i]} * w[i];
      r.dx[row * c + i] += rstd * (g - g_mean - xhat[i] * gx_mean);
    }
  }
  return r;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, double tol,
                  const char* what, int64_t c) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol) << what << " element " << i << ", c = " << c;
  }
}

TEST(LayerNorm, MatchesTheFormulasInDoubleAtEveryWidth) {
  for (const int64_t c : {5, 8, 16, 37, 128}) {
    const int64_t rows = 70;  // more than one parallel range of 64
    std::vector<float> x(rows * c), dy(rows * c), dx(rows * c), w(c), b(c);
    for (int64_t i = 0; i < rows * c; ++i) {
      x[i] = 3.0f * std::sin(0.37f * i) + 0.5f;
      dy[i] = std::cos(0.91f * i);
      dx[i] = 0.1f * std::sin(1.7f * i);  // the residual gradient it accumulates into
    }
    for (int64_t i = 0; i < c; ++i) {
      w[i] = 1.0f + 0.1f * std::sin(1.1f * i);
      b[i] = 0.2f * std::cos(0.3f * i);
    }
    const Reference want = reference(x, w, b, dy, dx, rows, c);
    std::vector<float> y(rows * c), mean(rows), rstd(rows), d_weight(c, 0.0f), d_bias(c, 0.0f);
    layer_norm_forward(x.data(), w.data(), b.data(), rows, c, y.data(), mean.data(), rstd.data());
    layer_norm_backward(dy.data(), x.data(), w.data(), mean.data(), rstd.data(), rows, c, dx.data(),
                        d_weight.data(), d_bias.data());
    expect_close(y, want.y, 1e-5, "y", c);
    expect_close(dx, want.dx, 1e-5, "dx", c);
    expect_close(d_weight, want.d_weight, 1e-4, "d_weight", c);
    expect_close(d_bias, want.d_bias, 1e-4, "d_bias", c);
  }
}

TEST(LayerNorm, WorksWithoutABias) {
  const int64_t rows = 3, c = 11;
  std::vector<float> x(rows * c), y(rows * c), dy(rows * c, 1.0f), dx(rows * c, 0.0f);
  std::vector<float> w(c, 2.0f), mean(rows), rstd(rows), d_weight(c, 0.0f);
  for (int64_t i = 0; i < rows * c; ++i) x[i] = static_cast<float>(i % 7);
  layer_norm_forward(x.data(), w.data(), nullptr, rows, c, y.data(), mean.data(), rstd.data());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < c; ++i) sum += y[r * c + i];
    EXPECT_NEAR(sum, 0.0, 1e-5);  // weight 2, no bias: the row still has mean 0
  }
  layer_norm_backward(dy.data(), x.data(), w.data(), mean.data(), rstd.data(), rows, c, dx.data(),
                      d_weight.data(), nullptr);
  // A constant upstream gradient moves no normalised value: dx is 0.
  for (float v : dx) EXPECT_NEAR(v, 0.0f, 1e-5f);
}

}  // namespace
}  // namespace attn::nn
