// attn heatmap: print one head of a weights .npy as an ASCII heat map.
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/viz.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace attn::cli {
namespace {

struct HeatmapArgs {
  std::string weights, tokens;
  int64_t head = 0, batch = 0;
  bool absolute = false;
};

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// The (Tq, Tk) matrix of one head out of (Tq, Tk), (H, Tq, Tk) or (B, H, Tq, Tk) weights.
Tensor pick_matrix(const Tensor& w, int64_t batch, int64_t head) {
  ATTN_CHECK(w.rank() >= 2,
             "heatmap: weights must be (Tq, Tk), (H, Tq, Tk) or (B, H, Tq, Tk), got ",
             w.shape_string());
  Tensor m = w;
  if (m.rank() == 4) {
    ATTN_CHECK(batch >= 0 && batch < m.dim(0), "--batch ", batch, " out of range for weights ",
               w.shape_string());
    m = m.select(batch);
  }
  if (m.rank() == 3) {
    ATTN_CHECK(head >= 0 && head < m.dim(0), "--head ", head, " out of range for weights ",
               w.shape_string());
    m = m.select(head);
  }
  return m;
}

void run_heatmap(const HeatmapArgs& args) {
  const Tensor matrix = pick_matrix(load_finite(args.weights), args.batch, args.head);
  HeatmapOptions options;
  if (args.absolute) options.vmax = 1.0f;
  if (!args.tokens.empty()) {
    const std::vector<std::string> words = split_words(args.tokens);
    const int64_t tq = matrix.dim(0), tk = matrix.dim(1);
    ATTN_CHECK(static_cast<int64_t>(words.size()) == tk, "--tokens has ", words.size(),
               " words but the weights have ", tk, " keys");
    ATTN_CHECK(tq <= tk, "--tokens labels need Tq <= Tk, got ", matrix.shape_string());
    // Bottom-right alignment: the Tq queries are the last Tq of the Tk positions.
    options.column_labels = words;
    options.row_labels.assign(words.end() - tq, words.end());
  }
  std::fputs(heatmap_ascii(matrix, options).c_str(), stdout);
}

}  // namespace

void add_heatmap_command(CLI::App& app) {
  auto args = std::make_shared<HeatmapArgs>();
  CLI::App* cmd = app.add_subcommand(
      "heatmap", "Print attention weights as an ASCII heat map (rows = queries, columns = keys).");
  cmd->add_option("--weights", args->weights,
                  "weights W.npy: (Tq, Tk), (H, Tq, Tk) or (B, H, Tq, Tk)")
      ->required();
  cmd->add_option("--head", args->head, "which head to show")->capture_default_str();
  cmd->add_option("--batch", args->batch, "which batch entry to show")->capture_default_str();
  cmd->add_option("--tokens", args->tokens, "labels: one word per key, e.g. \"the cat sat\"");
  cmd->add_flag("--absolute", args->absolute,
                "map [0, 1] onto the ramp (default: [0, largest weight])");
  cmd->footer("Example: attn heatmap --weights w.npy --head 0 --tokens \"the cat sat on the mat\"");
  cmd->callback([args] { run_heatmap(*args); });
}

}  // namespace attn::cli
