// Walk-through 2, the lab:
//   (a) attention with 2 queries over 5 keys: each row of weights sums to 1;
//   (b) a query built to match key 2: key 2 dominates, but the output is not its value;
//   (c) the causal weight matrix: zeros above the diagonal;
//   (d) 2-head attention on a (6, 8) input.
#include <cmath>
#include <cstdio>

#include "attn/attn.hpp"

namespace {

void print_matrix(const char* name, const attn::Tensor& m) {
  std::printf("%s %s\n", name, m.shape_string().c_str());
  for (int64_t i = 0; i < m.dim(0); ++i) {
    for (int64_t j = 0; j < m.dim(1); ++j) std::printf(" %7.4f", m.at({i, j}));
    std::printf("\n");
  }
}

bool rows_sum_to_one(const attn::Tensor& w) {
  for (int64_t i = 0; i < w.dim(0); ++i) {
    double sum = 0.0;
    for (int64_t j = 0; j < w.dim(1); ++j) sum += w.at({i, j});
    if (std::fabs(sum - 1.0) > 1e-6) return false;
  }
  return true;
}

}  // namespace

int main() {
  bool ok = true;

  std::printf("(a) 2 queries over 5 keys, d_k = 4\n");
  const attn::Tensor q = attn::rand_normal({2, 4}, 10);
  const attn::Tensor k = attn::rand_normal({5, 4}, 11);
  const attn::Tensor v = attn::rand_normal({5, 3}, 12);
  attn::SdpaOptions with_weights;
  with_weights.return_weights = true;  // the fused path builds them only on request
  const attn::SdpaResult a = attn::sdpa(q, k, v, with_weights);
  print_matrix("weights", a.weights);
  const bool sums = rows_sum_to_one(a.weights);
  std::printf("rows sum to 1: %s\n", sums ? "yes" : "NO");
  ok &= sums;

  std::printf("\n(b) a query built to match key 2\n");
  const attn::MatchingKeyExample e = attn::matching_key_example();
  const attn::SdpaResult b = attn::sdpa(e.q, e.k, e.v, with_weights);
  print_matrix("weights", b.weights);
  const float w2 = b.weights.at({0, 2}), out = b.output.at({0, 0});
  std::printf("weight on key 2 = %.4f, output = %.2f (value of key 2 is 99)\n", w2, out);
  std::printf(
      "key 2 dominates; the output is pulled towards 99 but the other keys still share "
      "%.1f%% of the weight\n",
      100.0 * (1.0 - w2));
  ok &= std::fabs(w2 - 0.8024f) < 5e-5f && std::fabs(out - 80.10f) < 0.01f;

  std::printf("\n(c) causal attention, 5 positions\n");
  const attn::Tensor x = attn::rand_normal({5, 4}, 13);
  attn::SdpaOptions causal;
  causal.causal = true;
  causal.return_weights = true;
  const attn::SdpaResult c = attn::sdpa(x, x, x, causal);
  print_matrix("weights", c.weights);
  for (int64_t i = 0; i < 5; ++i) {
    for (int64_t j = i + 1; j < 5; ++j) ok &= c.weights.at({i, j}) == 0.0f;
  }
  ok &= rows_sum_to_one(c.weights);

  std::printf("\n(d) 2-head attention on a (6, 8) input\n");
  const attn::Tensor x6 = attn::rand_normal({6, 8}, 14);
  const attn::Tensor wq = attn::rand_normal({8, 8}, 15, 0.f, 0.35f);
  const attn::Tensor wk = attn::rand_normal({8, 8}, 16, 0.f, 0.35f);
  const attn::Tensor wv = attn::rand_normal({8, 8}, 17, 0.f, 0.35f);
  const attn::MhaResult d = attn::multi_head_attention(x6, wq, wk, wv, /*wo=*/{}, 2, causal);
  std::printf("output %s, weights %s (2 heads of 6×6)\n", d.output.shape_string().c_str(),
              d.weights.shape_string().c_str());
  print_matrix("head 1 weights", d.weights.select(1));

  std::printf("\n%s\n", ok ? "all lab checks passed" : "A LAB CHECK FAILED");
  return ok ? 0 : 1;
}
