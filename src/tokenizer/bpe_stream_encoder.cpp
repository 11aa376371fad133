// BpeStreamEncoder: text in, ids out, a block at a time (attn/tokenizer.hpp). The cuts come
// from detail::find_cut, which only cuts where encoding both sides alone gives the ids of
// the whole; so blocks, and the parts of a block given to the threads, never change the ids.
#include <algorithm>

#include "attn/error.hpp"
#include "attn/threads.hpp"
#include "attn/tokenizer.hpp"
#include "src/tokenizer/text.hpp"
#include "src/tokenizer/word_split_cache.hpp"

namespace attn {
namespace {

// A part smaller than this is not worth a thread.
constexpr size_t kMinPartBytes = size_t{1} << 13;

}  // namespace

BpeStreamEncoder::BpeStreamEncoder(const BpeTokenizer& tokenizer, Emit emit, size_t block_bytes,
                                   size_t cache_words)
    : tokenizer_(tokenizer),
      emit_(std::move(emit)),
      block_bytes_(block_bytes),
      cache_words_(cache_words) {
  ATTN_CHECK(emit_ != nullptr, "BpeStreamEncoder: no function to receive the ids");
  ATTN_CHECK(block_bytes_ >= 1, "BpeStreamEncoder: block_bytes must be >= 1");
}

BpeStreamEncoder::~BpeStreamEncoder() = default;

void BpeStreamEncoder::write(std::string_view bytes) {
  if (pending_.empty()) {  // encode straight from the caller's bytes; keep only the tail
    const size_t used = consume(bytes, false);
    pending_.assign(bytes.substr(used));
    return;
  }
  pending_.append(bytes);
  pending_.erase(0, consume(pending_, false));
}

void BpeStreamEncoder::finish() {
  consume(pending_, true);
  pending_.clear();
  uncut_ = 0;
}

size_t BpeStreamEncoder::consume(std::string_view text, bool at_end) {
  size_t done = 0;
  for (;;) {
    const std::string_view rest = text.substr(done);
    const size_t block = block_bytes_ * static_cast<size_t>(std::max(1, num_threads()));
    if (rest.empty()) return done;
    if (!at_end && (rest.size() < block || rest.size() < 2 * uncut_)) return done;
    const size_t cut = (at_end && rest.size() <= block)
                           ? rest.size()
                           : detail::find_cut(rest, block, tokenizer_.options_.special_tokens);
    if (cut == 0) {
      if (!at_end) {
        uncut_ = rest.size();  // searching again at every write would be quadratic
        return done;
      }
      encode_block(rest);
      return text.size();
    }
    encode_block(rest.substr(0, cut));
    done += cut;
    uncut_ = 0;
  }
}

// The block cut into up to one part per thread, encoded in parallel, emitted in order.
void BpeStreamEncoder::encode_block(std::string_view block) {
  const auto& specials = tokenizer_.options_.special_tokens;
  const size_t most = std::min<size_t>(static_cast<size_t>(std::max(1, num_threads())),
                                       block.size() / kMinPartBytes + 1);
  const std::vector<std::string_view> parts = detail::cut_into_parts(block, most, specials);
  while (parts_.size() < parts.size()) {
    parts_.push_back(
        {std::make_unique<detail::WordSplitCache>(cache_words_, tokenizer_.vocab_size()), {}});
  }
  parallel_for(static_cast<int64_t>(parts.size()), [&](int64_t p) {
    Part& part = parts_[static_cast<size_t>(p)];
    part.ids.clear();
    tokenizer_.encode_with(parts[static_cast<size_t>(p)], *part.cache, part.ids);
  });
  for (size_t p = 0; p < parts.size(); ++p) {
    if (!parts_[p].ids.empty()) emit_(parts_[p].ids);
  }
}

}  // namespace attn
