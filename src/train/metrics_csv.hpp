// A run's DIR/metrics.csv: one row per step and one per evaluation (its timing columns empty),
// appended and flushed as they come, so a killed run leaves every row it finished.
// Internal to the library (attn/training_run.hpp writes it).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

#include "attn/train.hpp"

namespace attn::detail {

class MetricsCsv {
 public:
  // append: continue the file (a resumed run), else start it anew with its header.
  MetricsCsv(const std::string& path, bool append);
  void step(const StepResult& r, double ms, double tokens_per_s);
  void evaluation(int64_t iter, const EvalResult& e, float lr);

 private:
  std::ofstream out_;
};

// A resumed run redoes the steps after its checkpoint: the rows a crashed or interrupted run
// wrote past it are dropped first, so the file reads as one run. Kept: the header, every row
// of an earlier iteration, and the evaluation at the checkpoint's iteration when the resumed
// run will not evaluate there again. Nothing to do when the file does not exist.
void truncate_metrics(const std::string& path, int64_t iteration, bool evaluates_again);

}  // namespace attn::detail
