// attn::Gpt against PyTorch autograd on the same tiny models (fixtures written by
// tests/fixtures/make_gpt_fixtures.py): logits, loss, every parameter gradient, and the losses
// of 10 AdamW steps with clipping. The worst element of each tensor is reported.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "attn/gpt.hpp"
#include "attn/io.hpp"
#include "attn/train.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

struct Fixture {
  Safetensors file;
  GptConfig config;
  std::vector<int64_t> ids, targets;
  int64_t batch;
};

Fixture load(const std::string& name) {
  Fixture f{read_safetensors(std::string(ATTN_FIXTURES_DIR) + "/gpt_" + name + ".safetensors"),
            {},
            {},
            {},
            0};
  f.config = gpt_config_from_json(f.file.metadata.at("config"));
  for (float v : f.file.at("ids").to_vector()) f.ids.push_back(static_cast<int64_t>(v));
  for (float v : f.file.at("targets").to_vector()) f.targets.push_back(static_cast<int64_t>(v));
  f.batch = f.file.at("ids").dim(0);
  return f;
}

void set_weights(Gpt& model, const Fixture& f) {
  for (const GptParameter& p : model.parameter_table()) {
    Tensor view = model.parameter(p.name);
    view.copy_from(f.file.at("param." + p.name));
  }
}

// |got − expected| ≤ tolerance·(1 + max|expected|) element-wise; the worst element is named.
::testing::AssertionResult Close(const Tensor& got, const Tensor& expected, double tolerance,
                                 const std::string& what) {
  const std::vector<float> a = got.to_vector(), b = expected.to_vector();
  if (a.size() != b.size()) return ::testing::AssertionFailure() << what << ": sizes differ";
  double largest = 0.0, worst = 0.0;
  size_t worst_at = 0;
  for (size_t i = 0; i < b.size(); ++i)
    largest = std::max(largest, std::abs(static_cast<double>(b[i])));
  for (size_t i = 0; i < a.size(); ++i) {
    const double error = std::abs(static_cast<double>(a[i]) - b[i]);
    if (error > worst) worst = error, worst_at = i;
  }
  const double bound = tolerance * (1.0 + largest);
  std::printf("  %-22s worst element %5zu off by %.2e (bound %.2e)\n", what.c_str(), worst_at,
              worst, bound);
  if (worst <= bound) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << what << ": element " << worst_at << " is " << a[worst_at] << ", PyTorch " << b[worst_at]
         << " (off by " << worst << ", bound " << bound << ")";
}

class GptParity : public ::testing::TestWithParam<std::string> {};

TEST_P(GptParity, LogitsLossAndGradientsMatchPyTorch) {
  const Fixture f = load(GetParam());
  Gpt model(f.config);
  set_weights(model, f);
  // Tolerances from the sizes: float32 sums of ≤ 4·n_embd products, through 2 blocks.
  const double tolerance = 1e-6 * std::sqrt(4.0 * static_cast<double>(f.config.n_embd));
  EXPECT_TRUE(Close(model.logits(f.ids, f.batch), f.file.at("logits"), tolerance, "logits"));
  model.zero_grad();
  const float loss = model.forward(f.ids, f.targets, f.batch);
  EXPECT_NEAR(loss, f.file.at("loss").at({0}), 1e-5);
  model.backward();
  for (const GptParameter& p : model.parameter_table()) {
    EXPECT_TRUE(
        Close(model.gradient(p.name), f.file.at("grad." + p.name), tolerance, "grad " + p.name));
  }
  // Every fixture tensor has a counterpart in the model, and the other way round.
  int64_t params = 0;
  for (const auto& [name, t] : f.file.tensors) params += name.rfind("param.", 0) == 0;
  EXPECT_EQ(params, static_cast<int64_t>(model.parameter_table().size()));
}

TEST_P(GptParity, TenAdamWStepsFollowPyTorchsLosses) {
  const Fixture f = load(GetParam());
  const std::vector<double> expected =
      nlohmann::json::parse(f.file.metadata.at("adamw_losses")).get<std::vector<double>>();
  ASSERT_EQ(expected.size(), 10u);
  Gpt model(f.config);
  set_weights(model, f);
  AdamWOptions options;
  options.beta1 = 0.9f;
  options.beta2 = 0.99f;
  options.weight_decay = 0.1f;
  AdamW adam(model, options);
  for (size_t step = 0; step < expected.size(); ++step) {
    model.zero_grad();
    const float loss = model.forward(f.ids, f.targets, f.batch);
    EXPECT_NEAR(loss, expected[step], 2e-5 * (1.0 + expected[step])) << "step " << step;
    model.backward();
    clip_grad_norm(model, 1.0f);
    adam.step(model, 1e-2f);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GptParity,
                         ::testing::Values("learned_bias", "rotary_gqa_nobias"));

}  // namespace
}  // namespace attn
