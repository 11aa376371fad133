// Checkpoints, loaded for generation and resumed for training: any bytes give a model or
// attn::Error, never a crash or an allocation the file does not justify. A model that loads
// has only finite parameters (a NaN in a file is refused at load, naming the tensor).
//
// The bytes go through a memory file (memfd) so that the real readers, which take a path, run
// on them without touching the disk. The corpus is fixed: the seed checkpoints were trained on
// it, so their token fingerprint matches and resume gets past that check.
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "attn/error.hpp"
#include "attn/train.hpp"
#include "fuzz_check.hpp"
#include "fuzz_corpus_text.hpp"

namespace {

// A path that reads as the bytes last given to set().
class MemoryFile {
 public:
  MemoryFile() : fd_(memfd_create("attn-fuzz-checkpoint", 0)) {
    attn::fuzz::require(fd_ >= 0, "memfd_create works");
  }
  std::string set(std::string_view bytes) {
    attn::fuzz::require(ftruncate(fd_, 0) == 0 && pwrite(fd_, bytes.data(), bytes.size(), 0) ==
                                                      static_cast<ssize_t>(bytes.size()),
                        "the memory file takes the bytes");
    return "/proc/self/fd/" + std::to_string(fd_);
  }

 private:
  int fd_;
};

bool all_finite(const attn::Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (!std::isfinite(t.data()[i])) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemoryFile file;
  const std::string path = file.set(attn::fuzz::bytes_of(data, size));
  try {
    const attn::Checkpoint loaded = attn::load_checkpoint(path);
    attn::fuzz::require(all_finite(loaded.model.parameters()), "loaded parameters are finite");
    (void)loaded.tokenizer.decode(loaded.tokenizer.encode("the"));
  } catch (const attn::Error&) {
  }
  try {
    const attn::Trainer::Resumed resumed =
        attn::Trainer::resume_on_text(path, attn::fuzz::kCorpusText);
    attn::fuzz::require(all_finite(resumed.trainer.model().parameters()),
                        "resumed parameters are finite");
  } catch (const attn::Error&) {
  }
  return 0;
}
