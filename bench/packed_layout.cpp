// A packed batch's layout, timed: eight causal sequences of mixed lengths (113 … 914, 4096
// rows in all; H 16, d 64, every thread) as attn::sdpa_varlen and sdpa_varlen_backward on the
// packed (T, H, d) tensors, as attn::sdpa and sdpa_backward on each sequence's own contiguous
// (1, H, L, d) copy one after another, and as one 4096 sequence; the three take turns, run
// after run, least and median ms, and each one's useful rate (the causal triangle's FLOPs per
// second) against the 4096 sequence's. Issue 45 asks the packed batch for 90 % of it. A
// benchmark, not a test; docs/performance.md has its figures.
//
//   build/release/packed_layout [RUNS=9]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "attn/sdpa_backward.hpp"
#include "attn/sdpa_varlen.hpp"

namespace {

using Clock = std::chrono::steady_clock;

template <class Call>
double ms_of(Call&& call) {
  const Clock::time_point start = Clock::now();
  call();
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double least(const std::vector<double>& ms) { return *std::min_element(ms.begin(), ms.end()); }

double median(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// Rows [first, first + n) of a packed (T, H, d) tensor as a contiguous (1, H, n, d) one.
attn::Tensor sequence_alone(const attn::Tensor& packed, int64_t first, int64_t n) {
  return packed.slice(first, n).permute({1, 0, 2}).contiguous().reshape(
      {1, packed.dim(1), n, packed.dim(2)});
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 9;
  constexpr int64_t kHeads = 16, kWidth = 64;
  const std::vector<int64_t> lengths{113, 227, 341, 455, 568, 682, 796, 914};
  std::vector<int64_t> cu{0};
  for (const int64_t n : lengths) cu.push_back(cu.back() + n);
  const int64_t total = cu.back();
  const attn::Tensor q = attn::rand_normal({total, kHeads, kWidth}, 1),
                     k = attn::rand_normal({total, kHeads, kWidth}, 2),
                     v = attn::rand_normal({total, kHeads, kWidth}, 3),
                     d_out = attn::rand_normal({total, kHeads, kWidth}, 4);
  attn::SdpaOptions causal;
  causal.causal = true;

  struct Alone {
    attn::Tensor q, k, v, d_out;
  };
  std::vector<Alone> alone;
  for (size_t s = 0; s < lengths.size(); ++s) {
    alone.push_back({sequence_alone(q, cu[s], lengths[s]), sequence_alone(k, cu[s], lengths[s]),
                     sequence_alone(v, cu[s], lengths[s]),
                     sequence_alone(d_out, cu[s], lengths[s])});
  }
  const auto one_of = [&](const attn::Tensor& t) { return sequence_alone(t, 0, total); };
  const attn::Tensor q1 = one_of(q), k1 = one_of(k), v1 = one_of(v), d1 = one_of(d_out);

  std::vector<double> packed_fwd, packed_bwd, alone_fwd, alone_bwd, one_fwd, one_bwd;
  for (int r = 0; r < runs; ++r) {
    attn::SdpaResult packed;
    packed_fwd.push_back(ms_of([&] { packed = attn::sdpa_varlen(q, k, v, cu, cu, causal); }));
    packed_bwd.push_back(ms_of([&] {
      attn::sdpa_varlen_backward(q, k, v, packed.output, packed.logsumexp, d_out, cu, cu, causal);
    }));
    std::vector<attn::SdpaResult> each(alone.size());
    alone_fwd.push_back(ms_of([&] {
      for (size_t s = 0; s < alone.size(); ++s)
        each[s] = attn::sdpa(alone[s].q, alone[s].k, alone[s].v, causal);
    }));
    alone_bwd.push_back(ms_of([&] {
      for (size_t s = 0; s < alone.size(); ++s)
        attn::sdpa_backward(alone[s].q, alone[s].k, alone[s].v, each[s].output, each[s].logsumexp,
                            alone[s].d_out, causal);
    }));
    attn::SdpaResult one;
    one_fwd.push_back(ms_of([&] { one = attn::sdpa(q1, k1, v1, causal); }));
    one_bwd.push_back(
        ms_of([&] { attn::sdpa_backward(q1, k1, v1, one.output, one.logsumexp, d1, causal); }));
  }

  // Useful work: each query's keys up to itself, L·(L+1)/2 pairs a sequence.
  double pairs_packed = 0.0;
  for (const int64_t n : lengths) pairs_packed += static_cast<double>(n) * (n + 1) / 2;
  const double pairs_one = static_cast<double>(total) * (total + 1) / 2;
  std::printf("causal, H %lld, d %lld, sequences 113 ... 914 (%lld rows), %d runs in turn\n",
              static_cast<long long>(kHeads), static_cast<long long>(kWidth),
              static_cast<long long>(total), runs);
  std::printf("%-34s %9s %9s %18s\n", "", "least ms", "median", "rate / one (least)");
  const auto row = [&](const char* name, const std::vector<double>& ms, double pairs,
                       const std::vector<double>& one) {
    const double rate = (pairs / least(ms)) / (pairs_one / least(one));
    std::printf("%-34s %9.2f %9.2f %17.0f%%\n", name, least(ms), median(ms), 100.0 * rate);
  };
  row("forward, packed (sdpa_varlen)", packed_fwd, pairs_packed, one_fwd);
  row("forward, each alone, contiguous", alone_fwd, pairs_packed, one_fwd);
  row("forward, one 4096 sequence", one_fwd, pairs_one, one_fwd);
  row("backward, packed", packed_bwd, pairs_packed, one_bwd);
  row("backward, each alone, contiguous", alone_bwd, pairs_packed, one_bwd);
  row("backward, one 4096 sequence", one_bwd, pairs_one, one_bwd);
  return 0;
}
