#include "progress_bar.hpp"

#include <unistd.h>

#include <cstdio>

namespace attn::cli {

ProgressBar::ProgressBar() : shown_(::isatty(STDERR_FILENO) == 1) {}

void ProgressBar::update(int64_t done, int64_t total, const std::string& detail) {
  if (!shown_ || total <= 0) return;
  const Clock::time_point now = Clock::now();
  // Ten frames a second are enough to read; redrawing every step of a fast loop costs time.
  if (drawn_ && done < total && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  constexpr int64_t kWidth = 30;
  const int64_t filled = kWidth * done / total;
  std::fprintf(stderr, "\r\033[K[%s%s] %3lld%%  %lld/%lld  %s",
               std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(kWidth - filled), '-').c_str(),
               static_cast<long long>(100 * done / total), static_cast<long long>(done),
               static_cast<long long>(total), detail.c_str());
  std::fflush(stderr);
}

void ProgressBar::clear() {
  if (shown_ && drawn_) std::fputs("\r\033[K", stderr);
}

void ProgressBar::finish() {
  if (shown_ && drawn_) std::fputs("\n", stderr);
  drawn_ = false;
}

}  // namespace attn::cli
