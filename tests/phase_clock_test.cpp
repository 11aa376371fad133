// The phase clock (attn/phase_clock.hpp): on, a product adds one call to its phase; a phase
// inside another counts once, for the outer; work inside a parallel loop's body is not
// counted again; off, nothing is added.
#include "attn/phase_clock.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "attn/gemm.hpp"
#include "attn/random.hpp"
#include "attn/threads.hpp"
#include "src/core/phase_scope.hpp"

namespace attn {
namespace {

int64_t calls(Phase phase) { return phase_totals().calls[static_cast<size_t>(phase)]; }
double seconds(Phase phase) { return phase_totals().seconds[static_cast<size_t>(phase)]; }

class PhaseClock : public ::testing::Test {
 protected:
  void SetUp() override { reset_phase_totals(); }
  void TearDown() override {
    set_phase_clock(false);
    reset_phase_totals();
  }
  const Tensor a_ = rand_normal({64, 64}, 1);
};

TEST_F(PhaseClock, CountsEachProductOnceWhileOn) {
  matmul(a_, a_);
  EXPECT_EQ(calls(Phase::kMatmul), 0);  // off by default
  set_phase_clock(true);
  matmul(a_, a_);
  matmul(a_, a_);
  set_phase_clock(false);
  matmul(a_, a_);
  EXPECT_EQ(calls(Phase::kMatmul), 2);
  EXPECT_GT(seconds(Phase::kMatmul), 0.0);
  EXPECT_EQ(calls(Phase::kAttention), 0);
  EXPECT_STREQ(phase_name(Phase::kLayerNorm), "layer_norm");
}

TEST_F(PhaseClock, AnInnerPhaseCountsForTheOuterOne) {
  set_phase_clock(true);
  {
    const detail::PhaseScope optimizer(Phase::kOptimizer);
    matmul(a_, a_);
  }
  EXPECT_EQ(calls(Phase::kOptimizer), 1);
  EXPECT_EQ(calls(Phase::kMatmul), 0);
}

TEST_F(PhaseClock, WorkInsideAParallelBodyIsNotCountedAgain) {
  set_num_threads(2);
  set_phase_clock(true);
  parallel_for(4, [&](int64_t) { matmul(a_, a_); });
  set_num_threads(0);
  EXPECT_EQ(calls(Phase::kMatmul), 0);
}

}  // namespace
}  // namespace attn
