// Runs a check once per SIMD target that both this CPU supports and the build compiled
// (Highway dispatches to the best one, so without this the others' code would run on no test
// machine with a better CPU): AVX-512, AVX2 and the portable EMU128 on an AVX-512 machine.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>

#include "hwy/targets.h"

namespace attn::testing {

// check(target name) under each target in turn; the default dispatch is restored after.
// Under ThreadSanitizer only the first (the one the library dispatches to): the other
// targets' code runs the same tasks on the same threads with other instructions, and the
// Release and ASan runs check it target by target; TSan's tenfold slowdown over every target
// (the portable one slowest) made these checks a fifth of its suite's time.
inline void for_each_simd_target(const std::function<void(const char*)>& check) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    check(hwy::TargetName(target));
#if defined(__SANITIZE_THREAD__)
    break;
#endif
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace attn::testing
