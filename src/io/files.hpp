// Whole-file reads and crash-safe writes, shared by the .npy, safetensors and checkpoint code.
#pragma once

#include <string>

namespace attn::detail {

// The bytes of a file; attn::Error naming the file when it is missing, a directory or
// unreadable.
std::string read_whole_file(const std::string& path);

// Writes to "<path>.tmp-<pid>" and renames it over `path`, so a crash or a full disk never
// leaves a half-written file under the real name. Throws attn::Error naming the file.
void write_file_atomically(const std::string& path, const std::string& bytes);

}  // namespace attn::detail
