// What attn train records for DIR/report.html and DIR/loss.svg: every step and evaluation of
// the run (a resumed run first reads back the rows metrics.csv kept), and the page itself with
// a sample the model writes at each evaluation.
#pragma once

#include <cstdint>
#include <string>

#include "attn/train.hpp"
#include "attn/viz.hpp"
#include "loss_plot.hpp"

namespace attn::cli {

class RunReport {
 public:
  // sample_tokens: how long the sample at each evaluation is (0: none).
  RunReport(std::string title, int64_t sample_tokens);
  // A resumed run: the steps and evaluations metrics.csv holds (after its truncation).
  void read_metrics(const std::string& csv_path);
  void step(const StepResult& r, double tokens_per_s);
  void evaluation(int64_t iter, const EvalResult& e);

  LossHistory loss_history() const;
  // The page for the run as it stands: the model writes its sample now (greedy-free: seeded
  // sampling at temperature 0.8 from a newline, so a page shows what `attn generate` would).
  std::string html(const Trainer& trainer, const Tokenizer& tokenizer, int threads);

 private:
  TrainingReport report_;
  int64_t sample_tokens_;
};

}  // namespace attn::cli
