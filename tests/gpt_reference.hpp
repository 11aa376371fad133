// A plain double-precision GPT forward, written from the formulas for the tests: the oracle
// of the gradient check (central differences) and of the model's float forward.
#pragma once

#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "attn/gpt.hpp"

namespace attn::testing {

// Parameters as doubles, in the model's layout (Gpt::parameter_table()).
class DoubleGpt {
 public:
  DoubleGpt(const Gpt& model) : config_(model.config()), table_(model.parameter_table()) {
    const std::vector<float> p = model.parameters().to_vector();
    params_.assign(p.begin(), p.end());
  }
  std::vector<double>& params() { return params_; }

  // Dropout masks by (site, layer) as multipliers of each element (rows·C), or none.
  std::function<const std::vector<float>*(int site, int64_t layer)> masks;
  // When set, loss() writes every attention weight here, (n_layer, batch, n_head, T, T).
  std::vector<double>* weights_out = nullptr;

  double loss(std::span<const int64_t> ids, std::span<const int64_t> targets, int64_t batch) const {
    const int64_t t = static_cast<int64_t>(ids.size()) / batch, c = config_.n_embd;
    const int64_t v = config_.vocab_size;
    std::vector<double> x(static_cast<size_t>(batch * t * c));
    const double* wte = find("wte");
    for (int64_t r = 0; r < batch * t; ++r) {
      for (int64_t e = 0; e < c; ++e) {
        double pos = 0.0;
        const int64_t p = r % t;
        if (config_.positions == PositionKind::kLearned) pos = find("wpe")[p * c + e];
        if (config_.positions == PositionKind::kSinusoidal) {
          const double angle =
              p / std::pow(10000.0, static_cast<double>(e - e % 2) / static_cast<double>(c));
          pos = e % 2 == 0 ? std::sin(angle) : std::cos(angle);
        }
        x[static_cast<size_t>(r * c + e)] = wte[ids[static_cast<size_t>(r)] * c + e] + pos;
      }
    }
    mask(x, 1, 0);
    if (weights_out) {
      weights_out->assign(static_cast<size_t>(config_.n_layer * batch * config_.n_head * t * t), 0);
    }
    for (int64_t l = 0; l < config_.n_layer; ++l) x = block(x, batch, t, l);
    const std::vector<double> h = layer_norm(x, "ln_f");
    double total = 0.0;
    for (int64_t r = 0; r < batch * t; ++r) {
      std::vector<double> logits(static_cast<size_t>(v));
      double max = -1e300;
      for (int64_t j = 0; j < v; ++j) {
        double s = 0.0;
        for (int64_t e = 0; e < c; ++e) s += h[static_cast<size_t>(r * c + e)] * wte[j * c + e];
        logits[static_cast<size_t>(j)] = s;
        max = std::max(max, s);
      }
      double sum = 0.0;
      for (double l : logits) sum += std::exp(l - max);
      total += std::log(sum) + max - logits[static_cast<size_t>(targets[static_cast<size_t>(r)])];
    }
    return total / static_cast<double>(batch * t);
  }

 private:
  const double* find(const std::string& name) const {
    for (const GptParameter& p : table_) {
      if (p.name == name) return params_.data() + p.offset;
    }
    return nullptr;
  }

  void mask(std::vector<double>& x, int site, int64_t layer) const {
    if (!masks) return;
    const std::vector<float>* m = masks(site, layer);
    if (!m) return;
    for (size_t i = 0; i < x.size(); ++i) x[i] *= (*m)[i];
  }

  std::vector<double> layer_norm(const std::vector<double>& x, const std::string& name) const {
    const int64_t c = config_.n_embd, rows = static_cast<int64_t>(x.size()) / c;
    const double *w = find(name + ".weight"), *b = find(name + ".bias");
    std::vector<double> y(x.size());
    for (int64_t r = 0; r < rows; ++r) {
      double mean = 0.0, var = 0.0;
      for (int64_t e = 0; e < c; ++e) mean += x[static_cast<size_t>(r * c + e)];
      mean /= static_cast<double>(c);
      for (int64_t e = 0; e < c; ++e) var += std::pow(x[static_cast<size_t>(r * c + e)] - mean, 2);
      const double rstd = 1.0 / std::sqrt(var / static_cast<double>(c) + 1e-5);
      for (int64_t e = 0; e < c; ++e) {
        y[static_cast<size_t>(r * c + e)] =
            (x[static_cast<size_t>(r * c + e)] - mean) * rstd * w[e] + (b ? b[e] : 0.0);
      }
    }
    return y;
  }

  // y (rows, out) = x (rows, in)·W + b.
  std::vector<double> linear(const std::vector<double>& x, int64_t in, int64_t out,
                             const std::string& w_name, const std::string& b_name) const {
    const int64_t rows = static_cast<int64_t>(x.size()) / in;
    const double *w = find(w_name), *b = find(b_name);
    std::vector<double> y(static_cast<size_t>(rows * out));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t o = 0; o < out; ++o) {
        double s = b ? b[o] : 0.0;
        for (int64_t i = 0; i < in; ++i) s += x[static_cast<size_t>(r * in + i)] * w[i * out + o];
        y[static_cast<size_t>(r * out + o)] = s;
      }
    }
    return y;
  }

  void rotate(double* row, int64_t d, int64_t position) const {
    for (int64_t i = 0; i < d / 2; ++i) {
      const double angle =
          position * std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(d));
      const double a = row[2 * i], b = row[2 * i + 1];
      row[2 * i] = a * std::cos(angle) - b * std::sin(angle);
      row[2 * i + 1] = a * std::sin(angle) + b * std::cos(angle);
    }
  }

  std::vector<double> block(std::vector<double> x, int64_t batch, int64_t t, int64_t l) const {
    const std::string p = "h." + std::to_string(l) + ".";
    const int64_t c = config_.n_embd, h = config_.n_head, hkv = config_.n_kv_head, dh = c / h;
    const int64_t width = (h + 2 * hkv) * dh;
    std::vector<double> qkv =
        linear(layer_norm(x, p + "ln_1"), c, width, p + "attn.wqkv", p + "attn.bqkv");
    if (config_.positions == PositionKind::kRotary) {
      for (int64_t r = 0; r < batch * t; ++r) {
        for (int64_t head = 0; head < h + hkv; ++head)
          rotate(&qkv[static_cast<size_t>(r * width + head * dh)], dh, r % t);
      }
    }
    std::vector<double> att(static_cast<size_t>(batch * t * c));
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t head = 0; head < h; ++head) {
        const int64_t g = head / (h / hkv);
        for (int64_t i = 0; i < t; ++i) {
          const double* q = &qkv[static_cast<size_t>((b * t + i) * width + head * dh)];
          std::vector<double> s(static_cast<size_t>(i + 1));
          double max = -1e300;
          for (int64_t j = 0; j <= i; ++j) {
            const double* k = &qkv[static_cast<size_t>((b * t + j) * width + (h + g) * dh)];
            double dot = 0.0;
            for (int64_t e = 0; e < dh; ++e) dot += q[e] * k[e];
            s[static_cast<size_t>(j)] = dot / std::sqrt(static_cast<double>(dh));
            max = std::max(max, s[static_cast<size_t>(j)]);
          }
          double sum = 0.0;
          for (double& v : s) sum += (v = std::exp(v - max));
          if (weights_out) {
            double* row = weights_out->data() + (((l * batch + b) * h + head) * t + i) * t;
            for (int64_t j = 0; j <= i; ++j) row[j] = s[static_cast<size_t>(j)] / sum;
          }
          for (int64_t j = 0; j <= i; ++j) {
            const double* v = &qkv[static_cast<size_t>((b * t + j) * width + (h + hkv + g) * dh)];
            for (int64_t e = 0; e < dh; ++e) {
              att[static_cast<size_t>((b * t + i) * c + head * dh + e)] +=
                  s[static_cast<size_t>(j)] / sum * v[e];
            }
          }
        }
      }
    }
    std::vector<double> branch = linear(att, c, c, p + "attn.wo", p + "attn.bo");
    mask(branch, 2, l);
    for (size_t i = 0; i < x.size(); ++i) x[i] += branch[i];
    std::vector<double> hidden =
        linear(layer_norm(x, p + "ln_2"), c, 4 * c, p + "mlp.wfc", p + "mlp.bfc");
    for (double& u : hidden) {
      u = 0.5 * u * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (u + 0.044715 * u * u * u)));
    }
    branch = linear(hidden, 4 * c, c, p + "mlp.wproj", p + "mlp.bproj");
    mask(branch, 3, l);
    for (size_t i = 0; i < x.size(); ++i) x[i] += branch[i];
    return x;
  }

  GptConfig config_;
  std::vector<GptParameter> table_;
  std::vector<double> params_;
};

}  // namespace attn::testing
