// The training report page: the template of src/viz/report/ with the run's history as JSON
// (text that is not UTF-8, a sample cut inside a character among it, shown as U+FFFD).
#include <cmath>
#include <nlohmann/json.hpp>

#include "attn/viz.hpp"
#include "src/viz/canvas.hpp"
#include "src/viz/page_assets.hpp"
#include "src/viz/page_template.hpp"

namespace attn {
namespace {

bool finite(double v) { return std::isfinite(v); }

nlohmann::json report_data(const TrainingReport& r) {
  nlohmann::json steps = nlohmann::json::array(), evaluations = nlohmann::json::array();
  nlohmann::json schedule = nlohmann::json::array(), configuration = nlohmann::json::array();
  for (const auto& s : r.steps) {
    if (finite(s.loss) && finite(s.lr) && finite(s.tokens_per_s)) {
      steps.push_back(
          {{"iter", s.iter}, {"loss", s.loss}, {"lr", s.lr}, {"tokens_per_s", s.tokens_per_s}});
    }
  }
  for (const auto& e : r.evaluations) {
    if (finite(e.train_loss) && finite(e.val_loss)) {
      evaluations.push_back({{"iter", e.iter}, {"train", e.train_loss}, {"val", e.val_loss}});
    }
  }
  for (const auto& [iter, lr] : r.schedule) {
    if (finite(lr)) schedule.push_back({iter, lr});
  }
  for (const auto& [name, value] : r.configuration) {
    configuration.push_back({name, value});
  }
  return {{"steps", steps},       {"evaluations", evaluations},
          {"schedule", schedule}, {"configuration", configuration},
          {"sample", r.sample},   {"sample_note", r.sample_note},
          {"written", r.written}};
}

}  // namespace

std::string training_report_html(const TrainingReport& report) {
  return viz::fill_template(
      viz::kReportHtml, {{"TITLE", viz::escape_markup(report.title)},
                         {"JS", viz::kReportJs},
                         {"DATA", viz::script_safe(report_data(report).dump(
                                      -1, ' ', false, nlohmann::json::error_handler_t::replace))}});
}

}  // namespace attn
