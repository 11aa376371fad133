// The engines of the bf16 products in attention, for the tests that run each in turn
// (sdpa_amx_test.cpp, sdpa_bfloat16_test.cpp): AMX's tiles, AVX-512 BF16's vdpbf16ps on the
// same packed operands, or the vector kernels.
#pragma once

#include <string>

#include "src/core/simd_cap.hpp"

namespace attn::testing {

enum class Bf16Engine { kAmx, kDpbf16, kVector };

// The test parameter's name: Amx, Dpbf16 or Vector.
inline std::string param_name(Bf16Engine engine) {
  return engine == Bf16Engine::kAmx ? "Amx" : engine == Bf16Engine::kDpbf16 ? "Dpbf16" : "Vector";
}

// Allows only `engine` for its lifetime (vdpbf16ps even where it is not the faster); the
// defaults come back when it ends, also when a check throws.
class OnlyBf16Engine {
 public:
  explicit OnlyBf16Engine(Bf16Engine engine) {
    detail::set_amx_allowed(engine == Bf16Engine::kAmx);
    detail::set_dpbf16_use(engine == Bf16Engine::kDpbf16 ? detail::Dpbf16Use::kAlways
                                                         : detail::Dpbf16Use::kNever);
  }
  ~OnlyBf16Engine() {
    detail::set_amx_allowed(true);
    detail::set_dpbf16_use(detail::Dpbf16Use::kWhereFaster);
  }
  OnlyBf16Engine(const OnlyBf16Engine&) = delete;
  OnlyBf16Engine& operator=(const OnlyBf16Engine&) = delete;
};

// fn() with only `engine` allowed.
template <class Fn>
decltype(auto) with_bf16_engine(Bf16Engine engine, const Fn& fn) {
  const OnlyBf16Engine only(engine);
  return fn();
}

// Why `engine` cannot run in this process, or "" when it can (the vector kernels always can).
inline std::string bf16_engine_missing(Bf16Engine engine) {
  const OnlyBf16Engine only(engine);
  if (engine == Bf16Engine::kAmx && !detail::amx_bf16_usable())
    return "this CPU has no AMX-BF16 (or Linux did not lend this process AMX's tiles)";
  if (engine == Bf16Engine::kDpbf16 && !detail::dpbf16_usable())
    return "this CPU has no AVX-512 BF16";
  return "";
}

// fn(engine) with only that engine allowed, for each of the fast ones (AMX, vdpbf16ps) that
// this process can run; how many ran (0: the caller skips, saying why).
template <class Fn>
int for_each_fast_bf16_engine(const Fn& fn) {
  int ran = 0;
  for (const Bf16Engine engine : {Bf16Engine::kAmx, Bf16Engine::kDpbf16}) {
    if (!bf16_engine_missing(engine).empty()) continue;
    const OnlyBf16Engine only(engine);
    fn(engine);
    ++ran;
  }
  return ran;
}

}  // namespace attn::testing
