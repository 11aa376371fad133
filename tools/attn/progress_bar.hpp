// A progress bar on a terminal's stderr, redrawn at most ten times a second (and once more at
// the end): "[##########----------]  50%  1000/2000  …". Nothing when stderr is not a terminal.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace attn::cli {

class ProgressBar {
 public:
  ProgressBar();
  bool shown() const { return shown_; }
  // done of total, then `detail` (e.g. "loss 1.23  4.5 ms/iter  ETA 0:12"). Redrawn only when
  // 100 ms have passed since the last drawing or when done reaches total.
  void update(int64_t done, int64_t total, const std::string& detail);
  // Clears the bar's line, so the next line printed starts clean.
  void clear();
  // Leaves the last drawing on screen and moves to the next line.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  bool shown_;
  bool drawn_ = false;
  Clock::time_point last_;
};

}  // namespace attn::cli
