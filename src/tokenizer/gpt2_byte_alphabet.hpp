// GPT-2's byte alphabet: how its vocabulary files spell each byte as one printable character.
// The printable Latin-1 bytes stand for themselves; the other 68 (controls, space, 0x7F-0xA0,
// 0xAD) are U+0100 onwards, in byte order. Internal to the library (and its fuzz seeds).
#pragma once

#include <string>

namespace attn::detail {

// The UTF-8 spelling of byte b in GPT-2's vocabulary files ("Ġ" for a space).
std::string gpt2_byte_spelling(unsigned char b);

}  // namespace attn::detail
