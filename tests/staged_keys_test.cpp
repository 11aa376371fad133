// K and V whose rows lie apart in memory — (B, T, H, d) storage viewed (B, H, T, d), as a
// layer's QKV columns or a packed batch's rows are — are copied a head at a time by the fused
// kernels' tasks (src/attention/staged_keys.hpp). The results must be those of contiguous
// inputs bit for bit, in the forward and in both backward loop orders, on one thread and two,
// and a NaN anywhere in those rows must still be found.
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "attn/threads.hpp"
#include "gradient_checks.hpp"
#include "test_util.hpp"

namespace attn {
namespace {

using testing::BitwiseEqual;

// The values of a contiguous (B, H, T, w) tensor in (B, T, H, w) storage, viewed (B, H, T, w):
// rows H·w floats apart.
Tensor rows_apart(const Tensor& t) {
  return t.permute({0, 2, 1, 3}).contiguous().permute({0, 2, 1, 3});
}

struct StagedCase {
  const char* name;
  int64_t tq, tk;
  bool causal;
};

TEST(StagedKeys, RowsApartGiveTheBitsOfContiguousRows) {
  // 100 keys: fewer than a key block, read in place; 128 and more: staged. Tq ≠ Tk (both
  // causal alignments' worth of unseen keys), GQA (2 query heads per K/V head), 2 batch entries.
  const StagedCase cases[] = {{"100 keys", 100, 100, true},
                              {"128 keys", 128, 128, true},
                              {"300 keys, not causal", 300, 300, false},
                              {"Tq 70 < Tk 260, causal", 70, 260, true},
                              {"Tq 260 > Tk 140, not causal", 260, 140, false}};
  for (const StagedCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Tensor q = rand_normal({2, 4, c.tq, 32}, 1), k = rand_normal({2, 2, c.tk, 32}, 2),
                 v = rand_normal({2, 2, c.tk, 32}, 3), d_out = rand_normal({2, 4, c.tq, 32}, 4);
    SdpaOptions options;
    options.causal = c.causal;
    const SdpaResult want = sdpa(q, k, v, options);
    for (const auto order : {testing::LoopOrder::kOneTaskPerHead, testing::LoopOrder::kTwoPasses}) {
      const testing::LoopOrder loop_order(order);
      const SdpaGradients want_grads =
          sdpa_backward(q, k, v, want.output, want.logsumexp, d_out, options);
      for (const int threads : {1, 2}) {
        SCOPED_TRACE(std::to_string(threads) + " thread(s), loop order " +
                     std::to_string(static_cast<int>(order)));
        set_num_threads(threads);
        const Tensor q_apart = rows_apart(q), k_apart = rows_apart(k), v_apart = rows_apart(v);
        const SdpaResult got = sdpa(q_apart, k_apart, v_apart, options);
        EXPECT_TRUE(BitwiseEqual(got.output, want.output));
        EXPECT_TRUE(BitwiseEqual(got.logsumexp, want.logsumexp));
        const SdpaGradients grads = sdpa_backward(q_apart, k_apart, v_apart, want.output,
                                                  want.logsumexp, rows_apart(d_out), options);
        EXPECT_TRUE(BitwiseEqual(grads.dq, want_grads.dq));
        EXPECT_TRUE(BitwiseEqual(grads.dk, want_grads.dk));
        EXPECT_TRUE(BitwiseEqual(grads.dv, want_grads.dv));
      }
    }
  }
  set_num_threads(0);
}

// Each task scans a share of its K/V head's rows for NaN and ±inf from the staged copy: every
// row of every head must be some task's, also the keys no query sees (Tq < Tk, causal).
TEST(StagedKeys, ANaNInRowsApartIsRefusedNamingTheInput) {
  const Tensor q = rand_normal({2, 4, 70, 8}, 5), k = rand_normal({2, 2, 200, 8}, 6),
               v = rand_normal({2, 2, 200, 8}, 7), d_out = rand_normal({2, 4, 70, 8}, 8);
  const SdpaOptions causal = testing::causal();
  const SdpaResult f = sdpa(q, k, v, causal);
  for (const char* name : {"k", "v"}) {
    const Tensor& clean = name[0] == 'k' ? k : v;
    for (int64_t at = 0; at < clean.numel(); at += testing::sweep_step(11)) {
      Tensor bad = clean.clone();
      bad.data()[at] = std::numeric_limits<float>::quiet_NaN();
      const Tensor apart = rows_apart(bad), k_in = name[0] == 'k' ? apart : rows_apart(k),
                   v_in = name[0] == 'v' ? apart : rows_apart(v);
      try {
        sdpa(q, k_in, v_in, causal);
        ADD_FAILURE() << name << ": NaN at flat " << at << " accepted by the forward";
      } catch (const Error& e) {
        EXPECT_EQ(e.argument(), name);
      }
      try {
        sdpa_backward(q, k_in, v_in, f.output, f.logsumexp, d_out, causal);
        ADD_FAILURE() << name << ": NaN at flat " << at << " accepted by the backward";
      } catch (const Error& e) {
        EXPECT_EQ(e.argument(), name);
      }
    }
  }
}

}  // namespace
}  // namespace attn
