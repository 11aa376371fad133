// attn heatmap: one head of a weights .npy as an ASCII heat map, or as a PNG / SVG picture of
// one head or of every head (--grid).
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/viz.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace attn::cli {
namespace {

struct HeatmapArgs {
  std::string weights, tokens, scale = "global";
  int64_t head = 0, batch = 0, width = -1;  // width -1: the terminal's
  bool absolute = false;
  std::string png, svg, title;  // pictures instead of the terminal
  bool grid = false;
  int64_t max_cells = 128;
};

// The (Tq, Tk) matrix of one head out of (Tq, Tk), (H, Tq, Tk) or (B, H, Tq, Tk) weights. A
// selector past the dims the weights have is an error, as one past their size is (the absent
// dim counts as size 1).
Tensor pick_matrix(const Tensor& w, int64_t batch, int64_t head) {
  ATTN_CHECK(w.rank() >= 2,
             "heatmap: weights must be (Tq, Tk), (H, Tq, Tk) or (B, H, Tq, Tk), got ",
             w.shape_string());
  const int64_t batches = w.rank() == 4 ? w.dim(0) : 1, heads = w.rank() >= 3 ? w.dim(-3) : 1;
  ATTN_CHECK(batch >= 0 && batch < batches, "--batch ", batch, " out of range: the weights ",
             w.shape_string(),
             w.rank() == 4 ? " have " + std::to_string(batches) + " batch entries"
                           : std::string(" have no batch dim"));
  ATTN_CHECK(head >= 0 && head < heads, "--head ", head, " out of range: the weights ",
             w.shape_string(),
             w.rank() >= 3 ? " have " + std::to_string(heads) + " heads"
                           : std::string(" have no head dim"));
  Tensor m = w;
  if (m.rank() == 4) m = m.select(batch);
  if (m.rank() == 3) m = m.select(head);
  return m;
}

// The columns the terminal has (stdout's, else $COLUMNS, else 80).
int64_t terminal_width() {
  winsize size{};
  if (::isatty(STDOUT_FILENO) == 1 && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 &&
      size.ws_col > 0) {
    return size.ws_col;
  }
  if (const char* columns = std::getenv("COLUMNS")) {
    const long n = std::strtol(columns, nullptr, 10);
    if (n > 0) return n;
  }
  return 80;
}

// One warning line when the matrix does not look like attention weights: a row that is not
// all zeros (a row that sees no key) and does not sum to 1.
void warn_unless_rows_sum_to_one(const Tensor& m, const std::string& path) {
  const std::vector<float> v = m.to_vector();
  const int64_t cols = m.dim(1);
  for (int64_t r = 0; r < m.dim(0); ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += v[static_cast<size_t>(r * cols + c)];
    if (sum != 0.0 && std::fabs(sum - 1.0) > 1e-3) {
      std::fprintf(stderr,
                   "attn: warning: %s: row %lld sums to %g, not 1: these may not be attention "
                   "weights\n",
                   path.c_str(), static_cast<long long>(r), sum);
      return;
    }
  }
}

// What the terminal map and the pictures take alike (HeatmapOptions, HeatmapPictureOptions):
// the scale, and --tokens as labels of a (…, Tq, Tk) matrix: one word per key; the Tq queries
// are the last Tq of the Tk positions (bottom-right alignment, as a KV cache has it).
template <typename Options>
void apply_scale_and_tokens(const HeatmapArgs& args, const Tensor& weights, Options& options) {
  options.scale = heatmap_scale_from_string(args.absolute ? "absolute" : args.scale);
  if (args.tokens.empty()) return;
  const std::vector<std::string> words = split_words(args.tokens);
  const int64_t tq = weights.dim(-2), tk = weights.dim(-1);
  ATTN_CHECK(static_cast<int64_t>(words.size()) == tk, "--tokens has ", words.size(),
             " words but the weights have ", tk, " keys");
  ATTN_CHECK(tq <= tk, "--tokens labels need Tq <= Tk, got ", weights.shape_string());
  options.column_labels = words;
  options.row_labels.assign(words.end() - tq, words.end());
}

void write_pictures(const HeatmapArgs& args, const Tensor& weights) {
  HeatmapPictureOptions options;
  apply_scale_and_tokens(args, weights, options);
  options.max_cells = args.max_cells;
  options.title = args.title;
  // Everything is drawn before anything is written: a refused picture leaves no file behind.
  std::vector<std::pair<std::string, std::string>> files;
  if (!args.png.empty()) files.emplace_back(args.png, heatmap_png(weights, options));
  if (!args.svg.empty()) files.emplace_back(args.svg, heatmap_svg(weights, options));
  write_files_atomically(files);
  for (const auto& [path, bytes] : files) {
    std::fprintf(stderr, "attn: wrote %s (%s)\n", path.c_str(), weights.shape_string().c_str());
  }
}

void run_heatmap(const HeatmapArgs& args) {
  const Tensor all = load_finite(args.weights);
  const bool picture = !args.png.empty() || !args.svg.empty();
  ATTN_CHECK(!args.grid || picture, "--grid draws a picture: add --png FILE or --svg FILE");
  ATTN_CHECK(!args.grid || all.rank() >= 3,
             "--grid needs (H, Tq, Tk) or (L, H, Tq, Tk) weights, got ", all.shape_string());
  const Tensor matrix = args.grid ? all : pick_matrix(all, args.batch, args.head);
  warn_unless_rows_sum_to_one(matrix.reshape({-1, matrix.dim(-1)}), args.weights);
  if (picture) {
    write_pictures(args, matrix);
    return;
  }
  HeatmapOptions options;
  apply_scale_and_tokens(args, matrix, options);
  options.max_width = args.width < 0 ? terminal_width() : args.width;
  std::fputs(heatmap_ascii(matrix, options).c_str(), stdout);
}

}  // namespace

void add_heatmap_command(CLI::App& app) {
  auto args = std::make_shared<HeatmapArgs>();
  CLI::App* cmd = app.add_subcommand(
      "heatmap",
      "Show attention weights as a heat map (rows = queries, columns = keys): in the terminal,\n"
      "or as a PNG/SVG picture of one head or of every head (--grid).");
  // Also the first positional argument: `attn heatmap w.npy` is what people type first.
  cmd->add_option("--weights,weights", args->weights,
                  "weights W.npy: (Tq, Tk), (H, Tq, Tk), or (B, H, Tq, Tk) / (L, H, Tq, Tk), "
                  "as the first argument or after --weights")
      ->required();
  cmd->add_option("--head", args->head, "which head to show")->capture_default_str();
  cmd->add_option("--batch,--layer", args->batch,
                  "which entry of dim 0 of 4-D weights to show: the batch entry of `attn mha "
                  "--weights`, the layer of a model's (L, H, T, T) weights")
      ->capture_default_str();
  cmd->add_option("--tokens", args->tokens,
                  "labels: one word per key, e.g. \"the cat sat\", or the output of 'attn bpe "
                  "encode --tokens'");
  cmd->add_option("--scale", args->scale,
                  "global: [0, the largest weight]; row: each row to its own largest (a causal "
                  "map's first row is always 1); absolute: [0, 1]")
      ->check(CLI::IsMember({"global", "row", "absolute"}))
      ->capture_default_str();
  cmd->add_flag("--absolute", args->absolute, "the same as --scale absolute");
  cmd->add_option("--width", args->width,
                  "columns to fit: a wider map is down-sampled (each cell the largest of its "
                  "block), with a note; default: the terminal's width (80 when not a terminal); "
                  "0: never down-sample")
      ->check(non_negative());
  cmd->add_option("--png", args->png, "write a PNG picture to this file instead of printing")
      ->type_name("FILE");
  cmd->add_option("--svg", args->svg,
                  "write an SVG picture (labels as text) to this file instead of printing")
      ->type_name("FILE");
  cmd->add_flag("--grid", args->grid,
                "picture every head: (H, Tq, Tk) as a row of panels, (L, H, Tq, Tk) as a grid with "
                "a row per layer");
  cmd->add_option("--max-cells", args->max_cells,
                  "pictures: a longer axis is down-sampled to at most this many cells (each the "
                  "largest of its block), with a note")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--title", args->title, "pictures: a title above the panels");
  cmd->footer(
      "Examples:\n"
      "  attn heatmap --weights w.npy --head 0 --tokens \"the cat sat on the mat\"\n"
      "  attn heatmap --weights model_weights.npy --grid --png heads.png --scale row");
  cmd->callback([args] { run_heatmap(*args); });
}

}  // namespace attn::cli
