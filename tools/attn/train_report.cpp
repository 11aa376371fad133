#include "train_report.hpp"

#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "attn/gpt.hpp"
#include "common.hpp"

namespace attn::cli {
namespace {

// Each row of metrics.csv: iter,train_loss,val_loss,lr,ms_per_iter,tokens_per_s (a step leaves
// val_loss empty, an evaluation the timings).
std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream in(line);
  for (std::string f; std::getline(in, f, ',');) out.push_back(f);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M UTC", &tm);
  return buffer;
}

std::vector<std::pair<std::string, std::string>> configuration(const Trainer& trainer,
                                                               const Tokenizer& tokenizer,
                                                               int threads) {
  std::vector<std::pair<std::string, std::string>> rows;
  const Gpt& model = trainer.model();
  rows.emplace_back("parameters", std::to_string(model.num_parameters()));
  const nlohmann::json config = nlohmann::json::parse(to_json(model.config()));
  for (const auto& [key, value] : config.items()) {
    rows.emplace_back(key, value.is_string() ? value.get<std::string>() : value.dump());
  }
  const TrainOptions& o = trainer.options();
  rows.emplace_back("tokenizer",
                    tokenizer.kind() + ", " + std::to_string(tokenizer.vocab_size()) + " tokens");
  rows.emplace_back("corpus tokens", std::to_string(trainer.token_count()));
  rows.emplace_back("batch_size × grad_accum",
                    std::to_string(o.batch_size) + " × " + std::to_string(o.grad_accum));
  rows.emplace_back("max_iters", std::to_string(o.max_iters));
  rows.emplace_back("lr, min_lr", number_text(o.lr) + ", " + number_text(o.min_lr));
  rows.emplace_back("warmup_iters, lr_decay_iters",
                    std::to_string(o.warmup_iters) + ", " +
                        std::to_string(o.lr_decay_iters > 0 ? o.lr_decay_iters : o.max_iters));
  rows.emplace_back("weight_decay", number_text(o.adamw.weight_decay));
  rows.emplace_back("grad_clip", number_text(o.grad_clip));
  rows.emplace_back("precision", to_string(o.precision));
  rows.emplace_back("seed", std::to_string(o.seed));
  rows.emplace_back("threads", std::to_string(threads));
  return rows;
}

// The planned learning rate at up to 200 points of the run.
std::vector<std::pair<int64_t, float>> schedule(const Trainer& trainer) {
  std::vector<std::pair<int64_t, float>> points;
  const int64_t n = trainer.options().max_iters, stride = std::max<int64_t>(1, n / 200);
  for (int64_t i = 0; i < n; i += stride) points.emplace_back(i, trainer.learning_rate_at(i));
  if (n > 0) points.emplace_back(n - 1, trainer.learning_rate_at(n - 1));
  return points;
}

}  // namespace

RunReport::RunReport(std::string title, int64_t sample_tokens) : sample_tokens_(sample_tokens) {
  report_.title = std::move(title);
}

void RunReport::read_metrics(const std::string& csv_path) {
  std::ifstream in(csv_path);
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    const std::vector<std::string> f = fields(line);
    if (f.size() != 6) continue;
    try {
      const int64_t iter = std::stoll(f[0]);
      if (f[2].empty()) {
        report_.steps.push_back({iter, std::stof(f[1]), std::stof(f[3]), std::stod(f[5])});
      } else {
        report_.evaluations.push_back({iter, std::stof(f[1]), std::stof(f[2])});
      }
    } catch (const std::exception&) {
      // A row this run cannot read stays out of the charts; metrics.csv itself is kept.
    }
  }
}

void RunReport::step(const StepResult& r, double tokens_per_s) {
  report_.steps.push_back({r.iter, r.loss, r.lr, tokens_per_s});
}

void RunReport::evaluation(int64_t iter, const EvalResult& e) {
  report_.evaluations.push_back({iter, e.train_loss, e.val_loss});
}

LossHistory RunReport::loss_history() const {
  LossHistory h;
  for (const auto& s : report_.steps) h.steps.emplace_back(s.iter, s.loss);
  for (const auto& e : report_.evaluations)
    h.evaluations.emplace_back(e.iter, e.train_loss, e.val_loss);
  return h;
}

std::string RunReport::html(const Trainer& trainer, const Tokenizer& tokenizer, int threads) {
  report_.configuration = configuration(trainer, tokenizer, threads);
  report_.schedule = schedule(trainer);
  report_.written = "at iteration " + std::to_string(trainer.iteration()) + ", " + now_utc();
  report_.sample.clear();
  report_.sample_note = "(none: --report-sample-tokens 0)";
  if (sample_tokens_ > 0) {
    GenerateOptions g;
    g.max_new_tokens = sample_tokens_;
    g.sampling.temperature = 0.8f;
    g.sampling.top_k = 200;
    g.seed = 1;
    report_.sample = tokenizer.decode(generate(trainer.model(), tokenizer.default_prompt(), g));
    report_.sample_note = "(" + std::to_string(sample_tokens_) + " tokens at iteration " +
                          std::to_string(trainer.iteration()) +
                          ", from a newline, temperature 0.8, top-k 200, seed 1)";
  }
  return training_report_html(report_);
}

}  // namespace attn::cli
