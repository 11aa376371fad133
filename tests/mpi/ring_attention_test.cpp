// Ring attention (attn::distributed::ring_sdpa and its backward) against attn::sdpa and
// attn::sdpa_backward on the whole sequence in one process. Run under mpirun with N = 1 … 4
// ranks (tests/CMakeLists.txt): every rank draws the same whole inputs from their seeds, runs
// the single-process oracle itself, and compares its own rows of the results.
//
// Tolerance: the ring merges partial softmaxes through their logsumexps where the fused kernel
// rescales one running sum; both are float with float sums over at most T keys, so the outputs
// agree to a few units of float's rounding times the number of merges (≤ 2N per row), far
// inside 1e-5 of the largest value — the bound the issue asks for, reported as the worst
// element on failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "attn/distributed.hpp"
#include "attn/random.hpp"
#include "tests/test_util.hpp"

namespace attn {
namespace {

using distributed::Communicator;
using distributed::RingOptions;
using distributed::SequenceLayout;
using distributed::shard_sequence;

constexpr double kTolerance = 1e-5;

Communicator world() { return Communicator(MPI_COMM_WORLD, 60.0); }

struct Case {
  int64_t t, heads, kv_heads, d;
  bool causal;
  int64_t window;
  SequenceLayout layout;
  bool rank3 = false;  // (H, T, d) instead of (B, H, T, d)
};

std::string describe(const Case& c) {
  return "T=" + std::to_string(c.t) + " H=" + std::to_string(c.heads) + "/" +
         std::to_string(c.kv_heads) + " d=" + std::to_string(c.d) + (c.causal ? " causal" : "") +
         (c.window ? " window=" + std::to_string(c.window) : "") + " " +
         distributed::to_string(c.layout) + (c.rank3 ? " rank3" : "");
}

Shape shape_of(const Case& c, int64_t heads) {
  return c.rank3 ? Shape{heads, c.t, c.d} : Shape{2, heads, c.t, c.d};
}

// max |a − b| / max |b|: the worst element relative to the largest expected value.
double worst_relative(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_vector(), y = b.to_vector();
  double worst = 0.0, largest = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    worst = std::max(worst, std::fabs(double{x[i]} - y[i]));
    largest = std::max(largest, std::fabs(double{y[i]}));
  }
  return worst / std::max(largest, 1e-30);
}

// The ring's results on this rank against the oracle's rows for it; rank 0 prints the worst
// element of each result over every rank.
void check_case(const Case& c) {
  const Communicator comm = world();
  const int n = comm.size(), me = comm.rank();
  const Tensor q = rand_normal(shape_of(c, c.heads), 1);
  const Tensor k = rand_normal(shape_of(c, c.kv_heads), 2);
  const Tensor v = rand_normal(shape_of(c, c.kv_heads), 3);
  const Tensor d_out = rand_normal(shape_of(c, c.heads), 4);
  RingOptions options;
  options.attention.causal = c.causal;
  options.attention.window = c.window;
  options.layout = c.layout;

  const SdpaResult whole = sdpa(q, k, v, options.attention);
  const SdpaGradients whole_grads =
      sdpa_backward(q, k, v, whole.output, whole.logsumexp, d_out, options.attention);
  auto mine = [&](const Tensor& t) { return shard_sequence(t, n, me, c.layout); };
  // logsumexp (…, T): its rows are the last dim; seen as (…, T, 1) to shard them.
  auto mine_lse = [&](const Tensor& lse) {
    Shape s = lse.shape();
    s.push_back(1);
    Tensor column = mine(lse.reshape(s));
    Shape back = column.shape();
    back.pop_back();
    return column.reshape(back);
  };

  const SdpaResult ring = distributed::ring_sdpa(comm, mine(q), mine(k), mine(v), options);
  const SdpaGradients grads = distributed::ring_sdpa_backward(
      comm, mine(q), mine(k), mine(v), ring.output, ring.logsumexp, mine(d_out), options);
  const std::string what =
      describe(c) + ", rank " + std::to_string(me) + " of " + std::to_string(n);
  EXPECT_TRUE(
      testing::RelativelyClose(ring.output, mine(whole.output), kTolerance, "output, " + what));
  EXPECT_TRUE(testing::RelativelyClose(ring.logsumexp, mine_lse(whole.logsumexp), kTolerance,
                                       "logsumexp, " + what));
  EXPECT_TRUE(testing::RelativelyClose(grads.dq, mine(whole_grads.dq), kTolerance, "dq, " + what));
  EXPECT_TRUE(testing::RelativelyClose(grads.dk, mine(whole_grads.dk), kTolerance, "dk, " + what));
  EXPECT_TRUE(testing::RelativelyClose(grads.dv, mine(whole_grads.dv), kTolerance, "dv, " + what));
  std::vector<double> worst = {worst_relative(ring.output, mine(whole.output)),
                               worst_relative(grads.dq, mine(whole_grads.dq)),
                               worst_relative(grads.dk, mine(whole_grads.dk)),
                               worst_relative(grads.dv, mine(whole_grads.dv))};
  // The largest over the ranks: each rank fills its own slots, the sum gathers them.
  std::vector<double> all(worst.size() * static_cast<size_t>(n), 0.0);
  std::copy(worst.begin(), worst.end(), all.begin() + static_cast<int64_t>(worst.size()) * me);
  comm.sum(all);
  for (size_t at = 0; at < all.size(); ++at) {
    worst[at % worst.size()] = std::max(worst[at % worst.size()], all[at]);
  }
  if (me == 0) {
    std::printf("%-40s N=%d worst |ring - one|/max: out %.1e dq %.1e dk %.1e dv %.1e\n",
                describe(c).c_str(), n, worst[0], worst[1], worst[2], worst[3]);
  }
}

// Lengths that do not divide by the ranks (nor by 2N, nor by the kernel's blocks), and one
// long enough for several kernel blocks per run.
TEST(RingAttention, MatchesOneProcessCausal) {
  for (const SequenceLayout layout : {SequenceLayout::kZigzag, SequenceLayout::kContiguous}) {
    for (const int64_t t : {8, 37, 130}) check_case({t, 4, 4, 16, true, 0, layout});
  }
}

TEST(RingAttention, MatchesOneProcessNotCausal) {
  for (const SequenceLayout layout : {SequenceLayout::kZigzag, SequenceLayout::kContiguous}) {
    check_case({45, 2, 2, 8, false, 0, layout});
  }
}

TEST(RingAttention, MatchesOneProcessWithWindow) {
  for (const int64_t window : {1, 5, 33}) {
    check_case({71, 2, 2, 16, true, window, SequenceLayout::kZigzag});
    check_case({71, 2, 2, 16, true, window, SequenceLayout::kContiguous});
  }
}

TEST(RingAttention, MatchesOneProcessWithGroupedQueryHeads) {
  check_case({50, 4, 2, 16, true, 0, SequenceLayout::kZigzag});
  check_case({50, 4, 1, 16, true, 0, SequenceLayout::kContiguous});
}

TEST(RingAttention, MatchesOneProcessRank3AndLongRuns) {
  check_case({19, 3, 3, 8, true, 0, SequenceLayout::kZigzag, true});
  check_case({600, 2, 2, 64, true, 0, SequenceLayout::kZigzag});
}

TEST(RingAttention, SequenceRunsCoverTheSequenceOnce) {
  for (const SequenceLayout layout : {SequenceLayout::kZigzag, SequenceLayout::kContiguous}) {
    for (const int ranks : {1, 2, 3, 4, 7}) {
      for (const int64_t t : {int64_t{2} * ranks, int64_t{2} * ranks + 5, int64_t{100}}) {
        std::vector<int> owner(static_cast<size_t>(t), -1);
        for (int r = 0; r < ranks; ++r) {
          for (const auto& run : distributed::sequence_runs(t, ranks, r, layout)) {
            EXPECT_GE(run.length(), 1);
            for (int64_t p = run.begin; p < run.end; ++p) {
              EXPECT_EQ(owner[static_cast<size_t>(p)], -1) << "position " << p << " twice";
              owner[static_cast<size_t>(p)] = r;
            }
          }
        }
        for (int64_t p = 0; p < t; ++p) EXPECT_NE(owner[static_cast<size_t>(p)], -1);
      }
    }
  }
  // Zigzag: rank r holds runs r and 2N−1−r of 2N.
  const auto runs = distributed::sequence_runs(16, 4, 1, SequenceLayout::kZigzag);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].begin, 2);
  EXPECT_EQ(runs[1].begin, 12);
  EXPECT_THROW(distributed::sequence_runs(7, 4, 0, SequenceLayout::kZigzag), Error);
}

// Bad arguments are the same attn::Error on every rank (no rank left waiting).
TEST(RingAttention, BadArgumentsFailOnEveryRank) {
  const Communicator comm = world();
  const int n = comm.size(), me = comm.rank();
  const Tensor x = rand_normal({1, 2, 4 * n, 8}, 1);
  const Tensor mine = shard_sequence(x, n, me, SequenceLayout::kZigzag);
  RingOptions masked;
  masked.attention.mask = Mask::allow(causal_mask(4 * n));
  EXPECT_TRUE(testing::ThrowsWith([&] { distributed::ring_sdpa(comm, mine, mine, mine, masked); },
                                  "explicit mask"));
  if (n == 1) return;
  // Rank 0 alone has a wider head: the others learn of it too.
  const Tensor odd = me == 0 ? rand_normal({1, 2, mine.dim(2), 16}, 2) : mine;
  EXPECT_TRUE(testing::ThrowsWith([&] { distributed::ring_sdpa(comm, odd, odd, odd); },
                                  "differ in the leading dims, widths or options"));
  // Rows that are not the layout's share: the last rank holds 3 rows more than its own.
  const Tensor more = me == n - 1 ? rand_normal({1, 2, mine.dim(2) + 3, 8}, 3) : mine;
  EXPECT_TRUE(
      testing::ThrowsWith([&] { distributed::ring_sdpa(comm, more, more, more); }, "share of"));
}

}  // namespace
}  // namespace attn

int main(int argc, char** argv) {
  const attn::distributed::MpiSession mpi(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
