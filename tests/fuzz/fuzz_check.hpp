// What the fuzz harnesses share: a property check that stops the run loudly, so that libFuzzer
// (or the replay driver) records the input that broke it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace attn::fuzz {

// attn::Error is the right answer to bad bytes; a broken property is a bug.
inline void require(bool holds, const char* property) {
  if (holds) return;
  std::fprintf(stderr, "fuzz property broken: %s\n", property);
  std::abort();
}

inline std::string_view bytes_of(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace attn::fuzz
