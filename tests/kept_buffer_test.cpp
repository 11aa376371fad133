// Scratch kept by a thread between calls (src/core/kept_buffer.hpp): reused, aligned, bounded;
// and the fused kernels' bf16 operands, packed into it, fault no fresh pages call after call.
#include "src/core/kept_buffer.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "attn/random.hpp"
#include "attn/sdpa.hpp"
#include "bf16_engines.hpp"
#include "src/attention/fused.hpp"
#include "src/core/release_pages.hpp"
#include "src/reference/checks.hpp"

namespace attn {
namespace {

using detail::kept_buffer_bytes_of_this_thread;
using detail::KeptBuffer;
using detail::release_free_heap;

TEST(KeptBuffer, TheNextLeaseReusesTheBlock) {
  const void* first = nullptr;
  {
    const KeptBuffer lease(300 << 10);
    first = lease.as<uint8_t>();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
    EXPECT_GE(lease.capacity(), size_t{300} << 10);
  }
  const KeptBuffer smaller(200 << 10);  // fits in the kept block: no allocation
  EXPECT_EQ(smaller.as<uint8_t>(), first);
  const KeptBuffer second(200 << 10);  // the first is leased: a block of its own
  EXPECT_NE(second.as<uint8_t>(), first);
}

TEST(KeptBuffer, LargeBlocksAreGivenBack) {
  const size_t before = kept_buffer_bytes_of_this_thread();
  { const KeptBuffer lease(detail::kKeptBufferMax + 1); }
  EXPECT_EQ(kept_buffer_bytes_of_this_thread(), before);
}

TEST(KeptBuffer, AThreadKeepsAFewMiBAtMost) {
  {
    std::vector<KeptBuffer> leases;
    for (int i = 0; i < 12; ++i) leases.emplace_back(size_t{5} << 20);
  }
  EXPECT_LE(kept_buffer_bytes_of_this_thread(), 2 * detail::kKeptBufferMax);
  EXPECT_GE(kept_buffer_bytes_of_this_thread(), size_t{5} << 20);
}

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Why huge pages cannot be had or counted here, or "" when they can: the system's transparent
// huge pages off, AddressSanitizer's build (its blocks all come from malloc: storage.cpp), or
// ThreadSanitizer's (its shadow memory faults pages of its own as the test's are touched:
// 24 597 faults for the 48 MiB).
std::string huge_pages_missing() {
#if defined(__SANITIZE_ADDRESS__)
  return "AddressSanitizer: every block comes from malloc";
#elif defined(__SANITIZE_THREAD__)
  return "ThreadSanitizer: its shadow memory's page faults are counted too";
#else
  std::ifstream setting("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  if (!std::getline(setting, modes)) return "no /sys/kernel/mm/transparent_hugepage/enabled";
  if (modes.find("[never]") != std::string::npos) return "transparent huge pages are off";
  return "";
#endif
}

TEST(KeptBuffer, ALargeBlockIsFaultedInHugePages) {
  const std::string missing = huge_pages_missing();
  if (!missing.empty()) GTEST_SKIP() << missing;
  constexpr size_t kBytes = size_t{48} << 20;  // a bf16 backward's K and V at T = 8192
  const KeptBuffer lease(kBytes);
  uint8_t* block = lease.as<uint8_t>();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(block) % 64, 0u);
  const long before = minor_faults();
  for (size_t at = 0; at < kBytes; at += 4096) block[at] = 1;  // every small page touched
  const long faults = minor_faults() - before;
  // 12 288 in small pages; 24 and a few in huge ones.
  EXPECT_LT(faults, 1000) << "a 48 MiB lease faulted " << faults << " pages";
}

// The small GPT's attention (B 12, H 4, T 64, d 32, causal) with bf16 products, into outputs
// made once (as a layer's): on a CPU with AVX-512 BF16 or AMX the operands are packed for the
// tiles (0.8 MB a backward), elsewhere rounded copies are made. Fresh blocks for them were
// faulted in every call: about 50 faults a call, against none for float products.
long faults_per_call(Dtype precision) {
  const Tensor q = rand_normal({12, 4, 64, 32}, 1), k = rand_normal({12, 4, 64, 32}, 2),
               v = rand_normal({12, 4, 64, 32}, 3), d_out = rand_normal({12, 4, 64, 32}, 4);
  SdpaOptions options;
  options.causal = true;
  options.precision = precision;
  const detail::AttentionDims dims = detail::check_attention(q, k, v, options);
  const Tensor out = Tensor::zeros(q.shape());
  Tensor logsumexp = Tensor::zeros({12, 4, 64});
  const Tensor dq = Tensor::zeros(q.shape()), dk = Tensor::zeros(k.shape()),
               dv = Tensor::zeros(v.shape());
  auto call = [&] {
    detail::sdpa_into(dims, q, k, v, options, out, logsumexp.data(), nullptr,
                      detail::OperandValues::kFloat32);
    detail::sdpa_backward_into(dims, q, k, v, out, logsumexp.data(), d_out, options, dq, dk, dv,
                               nullptr, Tensor(), detail::OperandValues::kFloat32, false);
  };
  for (int warm = 0; warm < 3; ++warm) call();
  long faults = 0;
  for (int i = 0; i < 20; ++i) {
    // The heap's free memory handed back first, as glibc does by itself when the block freed at
    // its top is large (whether it does depends on what ran before in the process).
    release_free_heap();
    const long before = minor_faults();
    call();
    faults += minor_faults() - before;
  }
  return faults / 20;
}

TEST(KeptBuffer, RepeatedBf16AttentionFaultsNoMorePagesThanFloat) {
  const long float32 = faults_per_call(Dtype::kFloat32);
  for (const testing::Bf16Engine engine :
       {testing::Bf16Engine::kAmx, testing::Bf16Engine::kDpbf16, testing::Bf16Engine::kVector}) {
    if (!testing::bf16_engine_missing(engine).empty()) continue;  // each one this CPU runs
    const long bf16 =
        testing::with_bf16_engine(engine, [] { return faults_per_call(Dtype::kBFloat16); });
    EXPECT_LE(bf16, float32 + 5) << testing::param_name(engine) << ": " << bf16
                                 << " minor faults a call, float " << float32;
  }
}

}  // namespace
}  // namespace attn
