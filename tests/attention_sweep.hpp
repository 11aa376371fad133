// The seeded sweep of attention problems that the fused forward and backward are checked on
// against the reference path: lengths around the block size, head dims 1 to 256, Tq ≠ Tk,
// every mask kind, GQA ratios 1/2/8, both memory layouts, 1 or 2 threads.
#pragma once

#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/random.hpp"
#include "attn/sdpa.hpp"

namespace attn::testing {

// kCausalTopLeft and kWindowTopLeft: the same specs with CausalAlign::kTopLeft.
enum class MaskCase {
  kNone,
  kCausal,
  kWindow,
  kBoolean,
  kAdditive,
  kKeyLengths,
  kCausalTopLeft,
  kWindowTopLeft,
  kKeyStarts  // left padding, causal or not
};
inline constexpr MaskCase kMaskCases[] = {
    MaskCase::kNone,          MaskCase::kCausal,        MaskCase::kWindow,
    MaskCase::kBoolean,       MaskCase::kAdditive,      MaskCase::kKeyLengths,
    MaskCase::kCausalTopLeft, MaskCase::kWindowTopLeft, MaskCase::kKeyStarts};
inline constexpr int kMaskCaseCount = sizeof(kMaskCases) / sizeof(kMaskCases[0]);

struct SweepCase {
  int64_t batch, heads, group, tq, tk, d, dv;
  MaskCase mask;
  bool bthd_layout;  // Q/K/V stored (B, T, H, d) and viewed as (B, H, T, d)
  int threads;
  uint64_t seed;
};

inline std::string describe(const SweepCase& c) {
  return detail::concat("B=", c.batch, " H=", c.heads, " Hkv=", c.heads / c.group, " Tq=", c.tq,
                        " Tk=", c.tk, " d=", c.d, " dv=", c.dv, " mask=", static_cast<int>(c.mask),
                        c.bthd_layout ? " (B,T,H,d)" : " (B,H,T,d)", " threads=", c.threads);
}

inline void PrintTo(const SweepCase& c, std::ostream* os) { *os << describe(c); }

// (B, heads, T, width) values, stored in either layout.
inline Tensor make_input(int64_t b, int64_t heads, int64_t t, int64_t width, bool bthd,
                         uint64_t seed) {
  if (!bthd) return rand_normal({b, heads, t, width}, seed);
  return rand_normal({b, t, heads, width}, seed).permute({0, 2, 1, 3});
}

inline SdpaOptions make_options(const SweepCase& c, std::mt19937_64& gen) {
  SdpaOptions o;
  switch (c.mask) {
    case MaskCase::kNone:
      break;
    case MaskCase::kCausal:
      o.causal = true;
      break;
    case MaskCase::kWindow:
      o.window = 1 + static_cast<int64_t>(gen() % 70);
      break;
    case MaskCase::kCausalTopLeft:
      o.causal = true;
      o.causal_align = CausalAlign::kTopLeft;
      break;
    case MaskCase::kWindowTopLeft:
      o.window = 1 + static_cast<int64_t>(gen() % 70);
      o.causal_align = CausalAlign::kTopLeft;
      break;
    case MaskCase::kBoolean: {
      Tensor allow = rand_uniform({c.tq, c.tk}, c.seed + 11);
      for (int64_t i = 0; i < c.tq; ++i)
        for (int64_t j = 0; j < c.tk; ++j) allow.at({i, j}) = allow.at({i, j}) > 0.3f ? 1.f : 0.f;
      if (c.tq > 1) {
        for (int64_t j = 0; j < c.tk; ++j) allow.at({1, j}) = 0.0f;  // a fully masked row
      }
      o.mask = Mask::allow(allow);
      break;
    }
    case MaskCase::kAdditive:
      o.mask = Mask::additive(rand_normal({c.heads, 1, c.tk}, c.seed + 12));  // per head and key
      break;
    case MaskCase::kKeyLengths:
      for (int64_t b = 0; b < c.batch; ++b)
        o.key_lengths.push_back(static_cast<int64_t>(gen() % (c.tk + 1)));
      break;
    case MaskCase::kKeyStarts:
      o.causal = gen() % 2 == 0;
      for (int64_t b = 0; b < c.batch; ++b)
        o.key_starts.push_back(static_cast<int64_t>(gen() % (c.tk + 1)));
      break;
  }
  return o;
}

inline std::vector<SweepCase> attention_sweep() {
  std::vector<SweepCase> cases;
  // Under the sanitizers (ATTN_TESTS_INSTRUMENTED) the T = 1000 cases are left to the Release
  // suite: their reference runs took a third of the sanitizer runs' time (15-55 s each), and
  // T = 65 and 127 already cross the kernels' 64-row blocks.
#ifdef ATTN_TESTS_INSTRUMENTED
  const int64_t lengths[] = {1, 2, 7, 63, 64, 65, 127};
#else
  const int64_t lengths[] = {1, 2, 7, 63, 64, 65, 127, 1000};
#endif
  const int64_t dims[] = {1, 8, 63, 64, 80, 128, 256};
  const int64_t groups[] = {1, 2, 8};
  uint64_t seed = 0;
  for (int64_t t : lengths) {
    for (int64_t d : dims) {
      ++seed;
      SweepCase c{};
      c.group = groups[seed % 3];
      c.heads = c.group * (t >= 1000 ? 1 : 2);
      c.batch = t >= 1000 ? 1 : 2;
      c.tq = t;
      // Tq ≠ Tk in most cases: more keys than queries (decode-like) or fewer.
      const int64_t tk_choices[] = {t, t + 37, std::max<int64_t>(1, t / 2)};
      c.tk = tk_choices[seed % 3];
      c.d = d;
      c.dv = seed % 4 == 0 ? std::max<int64_t>(1, d / 2) + 3 : d;  // dv ≠ d sometimes
      c.mask = kMaskCases[seed % kMaskCaseCount];
      c.bthd_layout = seed % 2 == 0;
      c.threads = 1 + static_cast<int>(seed / 2 % 2);
      c.seed = seed * 1000;
      cases.push_back(c);
    }
  }
  return cases;
}

}  // namespace attn::testing
