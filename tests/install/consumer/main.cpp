// Built against an installed attn (by find_package and by pkg-config): causal attention on the
// fused path against the reference, and the version the headers and the library report.
#include <cmath>
#include <cstdio>
#include <cstring>

#include "attn/attn.hpp"

int main() {
  const attn::Tensor q = attn::rand_normal({1, 2, 9, 16}, 1);
  const attn::Tensor k = attn::rand_normal({1, 2, 9, 16}, 2);
  const attn::Tensor v = attn::rand_normal({1, 2, 9, 16}, 3);
  attn::SdpaOptions options;
  options.causal = true;
  const attn::Tensor fast = attn::sdpa(q, k, v, options).output;
  const attn::Tensor slow = attn::reference::sdpa(q, k, v, options).output;
  double worst = 0.0;
  for (int64_t i = 0; i < fast.numel(); ++i) {
    worst = std::fmax(worst, std::fabs(fast.data()[i] - slow.data()[i]));
  }
  const bool same_version = std::strcmp(attn::version(), ATTN_VERSION_STRING) == 0;
  std::printf("attn %s: fused vs reference max |diff| = %.2e\n", attn::version(), worst);
  return worst < 1e-5 && same_version ? 0 : 1;
}
