// Whole-file reads and crash-safe writes: what the .npy, safetensors, tokenizer and checkpoint
// readers use, public so that the CLI and other front ends read and write files the same way.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace attn {

// A file open for reading, closed with the object; attn::Error naming the file when it is
// missing, a directory, a device (/dev/zero would never end) or a socket, or unreadable. A FIFO
// is opened without blocking (one with no writer reads as empty instead of hanging in open()).
// Plain stdio and fstat: the readers run in every command, and libstdc++'s streams and filesystem
// code would be pages more to load for each.
class InputFile {
 public:
  explicit InputFile(const std::string& path);
  std::FILE* get() const { return file_.get(); }
  // Its size when it is a regular file (a pipe or a device has none).
  std::optional<uint64_t> size() const { return size_; }

 private:
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  std::optional<uint64_t> size_;
};

// The most bytes each reader takes. A regular file longer than its limit is refused before
// anything is read; a pipe or standard input is read up to the limit and refused past it.
// docs/cli.md lists them beside the commands that read each kind of file.
inline constexpr uint64_t kMaxNpyBytes = uint64_t{16} << 30;          // .npy arrays: 16 GiB
inline constexpr uint64_t kMaxSafetensorsBytes = uint64_t{64} << 30;  // checkpoints: 64 GiB
inline constexpr uint64_t kMaxTokenizerBytes = uint64_t{1} << 30;     // tokenizer JSON: 1 GiB
inline constexpr uint64_t kMaxCorpusBytes = uint64_t{1} << 30;        // a corpus read whole: 1 GiB
inline constexpr uint64_t kMaxPromptBytes = uint64_t{64} << 20;       // a prompt file: 64 MiB
inline constexpr uint64_t kMaxConfigBytes = uint64_t{1} << 20;        // an option file: 1 MiB

// A byte count for a message, in whole GiB or MiB when it is a multiple of one:
// byte_count_text(kMaxNpyBytes) == "17179869184 bytes (16 GiB)", byte_count_text(100) ==
// "100 bytes". The limits above are said this way, so a message never restates one.
std::string byte_count_text(uint64_t bytes);

// Up to n more bytes of file (fewer only at its end); attn::Error naming `name` when a read
// fails. The readers take a header this way and check it before reading the rest.
std::string read_bytes(std::FILE* file, uint64_t n, const std::string& name);

// Hands what is left of file to consume, 16 KiB at a time, in order; attn::Error naming `name`
// when a read fails.
void read_chunks(std::FILE* file, const std::string& name,
                 const std::function<void(std::string_view)>& consume);

// The bytes of a file, read into one allocation when its size is known; attn::Error naming
// the file when it is missing, a directory, unreadable or longer than max_bytes.
std::string read_whole_file(const std::string& path, uint64_t max_bytes);

// Writes to "<path>.tmp-<pid>" and renames it over `path`, so a crash or a full disk never
// leaves a half-written file under the real name. Throws attn::Error naming the file.
void write_file_atomically(const std::string& path, const std::string& bytes);

// Removes the "NAME.tmp-PID" files in dir that a process which no longer runs left behind (a
// write cut short by SIGKILL or a power loss); returns how many. A running process's are kept.
int remove_stale_temporaries(const std::string& dir);

// Several files, all or none: every file is written to its temporary first, and only when all
// were written are they renamed into place; when one cannot be written, none is changed and no
// temporary is left. A directory in a file's place is refused before anything is written (it
// is what would fail the rename after the writes succeeded).
void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace attn
