// Tensors made as views of one allocation (src/core/tensor_block.hpp), and the backward's
// gradients made that way: dQ, dK and dV of one call share a block (so a large set is mapped in
// huge pages, not faulted in a small page at a time every call), each contiguous, apart from the
// others by more than a page, and still the gradients.
#include "src/core/tensor_block.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "attn/sdpa_varlen.hpp"

namespace attn {
namespace {

uintptr_t address(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data()); }

// Views of one block, in order, contiguous, on lines of their own and a page and more apart.
void expect_one_block(const std::vector<Tensor>& views) {
  for (size_t i = 0; i < views.size(); ++i) {
    EXPECT_TRUE(views[i].is_contiguous()) << i;
    EXPECT_EQ(address(views[i]) % 64, 0u) << i;
    if (i == 0) continue;
    EXPECT_TRUE(views[i].shares_storage(views[0])) << i;
    const uintptr_t end = address(views[i - 1]) + views[i - 1].numel() * sizeof(float);
    EXPECT_GE(address(views[i]), end + 4096) << i;
  }
}

TEST(TensorBlock, ViewsOfOneBlockApartAndAligned) {
  const std::vector<Tensor> views =
      detail::uninitialized_in_one_block({{2, 3, 5}, {7}, {1, 4, 4, 9}});
  ASSERT_EQ(views.size(), 3u);
  EXPECT_EQ(views[0].shape(), (Shape{2, 3, 5}));
  EXPECT_EQ(views[1].shape(), (Shape{7}));
  EXPECT_EQ(views[2].shape(), (Shape{1, 4, 4, 9}));
  expect_one_block(views);
}

TEST(TensorBlock, TheBackwardsGradientsShareOneBlock) {
  const Tensor q = rand_normal({1, 4, 40, 16}, 1), k = rand_normal({1, 2, 40, 16}, 2),
               v = rand_normal({1, 2, 40, 16}, 3), d_out = rand_normal({1, 4, 40, 16}, 4);
  SdpaOptions causal;
  causal.causal = true;
  const SdpaResult r = sdpa(q, k, v, causal);
  const SdpaGradients g = sdpa_backward(q, k, v, r.output, r.logsumexp, d_out, causal);
  expect_one_block({g.dq, g.dk, g.dv});

  const std::vector<int64_t> cu = {0, 15, 40};
  const Tensor pq = rand_normal({40, 4, 16}, 5), pk = rand_normal({40, 2, 16}, 6),
               pv = rand_normal({40, 2, 16}, 7), pd = rand_normal({40, 4, 16}, 8);
  const SdpaResult pr = sdpa_varlen(pq, pk, pv, cu, cu, causal);
  const SdpaGradients pg =
      sdpa_varlen_backward(pq, pk, pv, pr.output, pr.logsumexp, pd, cu, cu, causal);
  expect_one_block({pg.dq, pg.dk, pg.dv});
}

}  // namespace
}  // namespace attn
