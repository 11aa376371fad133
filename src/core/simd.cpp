// limit_simd: Highway's DisableTargets for the kernels, a cap oneDNN reads as it opens.
#include "attn/simd.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>

#include "attn/error.hpp"
#include "hwy/targets.h"
#include "src/core/simd_cap.hpp"

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace attn {
namespace {

struct CapState {
  std::mutex mutex;
  // Written under the mutex; read without it (simd_cap, on every bf16 product's path).
  std::atomic<detail::SimdCap> cap{detail::SimdCap::kBest};
  bool frozen = false;  // oneDNN has opened with `cap`
  // The targets the kernels may run, within the cap; 0 until first asked. Kept here because
  // asking Highway runs CPUID (a trap to the hypervisor in a VM) and, for a moment, widens
  // the dispatch past the cap (generated_and_supported): not for every bf16 rounding call.
  std::atomic<int64_t> targets{0};
};

CapState& state() {
  static CapState s;
  return s;
}

detail::SimdCap cap_from_name(std::string_view name) {
  if (name == "best") return detail::SimdCap::kBest;
  if (name == "avx512") return detail::SimdCap::kAvx512;
  if (name == "avx2") return detail::SimdCap::kAvx2;
  if (name == "portable") return detail::SimdCap::kPortable;
  throw Error("unknown SIMD cap '" + std::string(name) + "': use avx512, avx2, portable or best");
}

// Highway numbers its targets so that a lower bit is a better one: capping at a target
// disables every bit below it. The target itself must be one this CPU runs.
int64_t target_of(detail::SimdCap cap) {
  switch (cap) {
    case detail::SimdCap::kAvx512:
      return HWY_AVX3;
    case detail::SimdCap::kAvx2:
      return HWY_AVX2;
    case detail::SimdCap::kPortable:
      return HWY_STATIC_TARGET;  // the build's baseline: plain C++ on x86-64
    case detail::SimdCap::kBest:
      break;
  }
  return 0;
}

// The targets this CPU runs, within DisableTargets, that the build compiled (HWY_TARGETS: the
// same list in every file, as they share HWY_DISABLED_TARGETS). Highway's SupportedTargets
// sets the dispatch to every target the CPU has, leaving its caller to narrow it to the
// result (as its own dispatch does on first use): without that Update, the kernels kept
// running AVX-512 code under a cap.
int64_t generated_and_supported() {
  const int64_t supported = hwy::SupportedTargets();
  hwy::GetChosenTarget().Update(supported);
  return supported & HWY_TARGETS;
}

int64_t disabled_by(detail::SimdCap cap) {
  const int64_t target = target_of(cap);
  return target == 0 ? 0 : target - 1;
}

}  // namespace

void limit_simd(std::string_view name) {
  const detail::SimdCap cap = cap_from_name(name);
  CapState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ATTN_CHECK(!s.frozen || cap == s.cap, "limit_simd(\"", name,
             "\") comes after the first matrix product, which fixed oneDNN's instruction set: "
             "call it first (or set ATTN_SIMD)");
  hwy::DisableTargets(0);
  const int64_t runnable = generated_and_supported();
  hwy::DisableTargets(disabled_by(s.cap));  // the old cap stands until the new one is checked
  generated_and_supported();
  const int64_t target = target_of(cap);
  ATTN_CHECK(target == 0 || (runnable & target) != 0, "SIMD cap '", name,
             "': this CPU (or this build) cannot run ", hwy::TargetName(target),
             "; the best it runs is ", hwy::TargetName(runnable & -runnable));
  hwy::DisableTargets(disabled_by(cap));
  s.targets.store(generated_and_supported());  // the dispatch follows now
  s.cap = cap;
}

namespace {

// The targets the kernels may run now (see CapState::targets).
int64_t current_targets() {
  CapState& s = state();
  int64_t targets = s.targets.load();
  if (targets == 0) {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.targets.load() == 0) s.targets.store(generated_and_supported());
    targets = s.targets.load();
  }
  return targets;
}

}  // namespace

void limit_simd_from_environment() {
  const char* name = std::getenv("ATTN_SIMD");
  if (name == nullptr || *name == '\0') return;
  try {
    limit_simd(name);
  } catch (const Error& e) {
    throw Error(std::string("ATTN_SIMD: ") + e.what());
  }
}

std::string simd_target() {
  const int64_t targets = current_targets();
  return hwy::TargetName(targets & -targets);  // the lowest bit: the best target
}

bool simd_has_bf16_products() {
#if defined(__x86_64__)
  static const bool cpu_has = __builtin_cpu_supports("avx512bf16");
  return cpu_has && (current_targets() & (HWY_AVX3 | (HWY_AVX3 - 1))) != 0;
#else
  return false;
#endif
}

namespace detail {

namespace {

// AMX-TILE and AMX-BF16 in CPUID, and Linux's leave to use them: the tile data (8 KiB per
// thread) is not saved on a context switch unless the process asked for it (arch_prctl
// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA, Linux 5.16 and later); without it the first
// tile instruction kills the process.
bool cpu_lends_amx_bf16() {
#if defined(__x86_64__) && defined(__linux__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  constexpr unsigned kAmxBf16 = 1u << 22, kAmxTile = 1u << 24;
  if ((edx & kAmxBf16) == 0 || (edx & kAmxTile) == 0) return false;
  // The AMX forward also rounds with AVX-512 BF16's vcvtne2ps2bf16, which every CPU with
  // AMX-BF16 so far has; one without it keeps the vector kernels.
  if (!__builtin_cpu_supports("avx512bf16")) return false;
  constexpr long kRequestPermission = 0x1023, kTileData = 18;
  return syscall(SYS_arch_prctl, kRequestPermission, kTileData) == 0;
#else
  return false;
#endif
}

std::atomic<bool> amx_allowed{true};
std::atomic<Dpbf16Use> dpbf16_use{Dpbf16Use::kWhereFaster};

// AMD's cores with AVX-512 BF16 (Zen 4, Zen 5) run vdpbf16ps at twice the rate of their FMA in
// products; Intel's at half of it (an Emerald Rapids Xeon: 85 against 171 GFLOP/s a core, and
// the causal forward at T = 1024 in 20.3 ms on it against the vector kernels' 14.4), where AMX
// is the engine to use.
bool vdpbf16ps_is_fast() {
#if defined(__x86_64__)
  static const bool amd = __builtin_cpu_is("amd");
  return amd;
#else
  return false;
#endif
}

}  // namespace

bool amx_bf16_usable() {
  static const bool lent = cpu_lends_amx_bf16();
  return lent && amx_allowed.load(std::memory_order_relaxed) && simd_cap() == SimdCap::kBest &&
         (current_targets() & (HWY_AVX3 | (HWY_AVX3 - 1))) != 0;
}

void set_amx_allowed(bool allowed) { amx_allowed.store(allowed); }

bool dpbf16_usable() {
  const Dpbf16Use use = dpbf16_use.load(std::memory_order_relaxed);
  return (use == Dpbf16Use::kAlways || (use == Dpbf16Use::kWhereFaster && vdpbf16ps_is_fast())) &&
         simd_cap() == SimdCap::kBest && simd_has_bf16_products();
}

void set_dpbf16_use(Dpbf16Use use) { dpbf16_use.store(use); }

SimdCap simd_cap() { return state().cap.load(); }

void matrix_library_opened() {
  CapState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.frozen = true;
}

}  // namespace detail

std::string bf16_attention_engine() {
  if (detail::amx_bf16_usable()) return "amx";
  return detail::dpbf16_usable() ? "vdpbf16ps" : "vector";
}

}  // namespace attn
