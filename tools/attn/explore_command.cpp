// attn explore: the attention explorer page (attn::explorer_html) for a model reading a text,
// or for any weights .npy with its tokens.
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/hf.hpp"
#include "attn/io.hpp"
#include "attn/train.hpp"
#include "attn/viz.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace attn::cli {
namespace {

struct ExploreArgs {
  std::string checkpoint, model, text, text_file, weights, tokens, title, save_weights, png, svg;
  std::string out = "attention.html";
};

struct Explored {
  Tensor weights;
  std::vector<std::string> tokens;
  std::string subtitle;
};

// Every layer's weights for the text, its tokens as the tokenizer displays them.
Explored read_with(const Gpt& model, const Tokenizer& tokenizer, const std::string& text,
                   const std::string& source) {
  ATTN_CHECK(!text.empty(), "--text is empty: give the text the model should read");
  const std::vector<int64_t> ids = tokenizer.encode(text);
  const int64_t block = model.config().block_size;
  ATTN_CHECK(static_cast<int64_t>(ids.size()) <= block, "the text is ", ids.size(),
             " tokens; this model reads at most ", block, " (block_size): shorten it");
  Explored e{model.attention_weights(ids), {}, {}};
  for (const int64_t id : ids) e.tokens.push_back(tokenizer.display(id));
  e.subtitle = source + " reading " + std::to_string(ids.size()) + " tokens: " + text;
  return e;
}

Explored explore_model(const ExploreArgs& args) {
  const std::string text =
      args.text_file.empty() ? args.text : read_input(args.text_file, kMaxPromptBytes);
  ATTN_CHECK(args.text_file.empty() || !text.empty(), args.text_file, ": the text is empty");
  if (!args.model.empty()) {
    HfGpt2 gpt2 = load_hf_gpt2(args.model);
    return read_with(gpt2.model, Tokenizer(std::move(gpt2.tokenizer)), text, args.model);
  }
  const Checkpoint ckpt = load_checkpoint(args.checkpoint);
  return read_with(ckpt.model, ckpt.tokenizer, text, args.checkpoint);
}

Explored explore_weights(const ExploreArgs& args) {
  Explored e{load_finite(args.weights), split_words(args.tokens), args.weights};
  ATTN_CHECK(e.weights.rank() >= 2 && e.weights.rank() <= 4,
             "--weights must be (Tq, Tk), (H, Tq, Tk) or (L, H, Tq, Tk), got ",
             e.weights.shape_string());
  const int64_t tk = e.weights.dim(-1);
  if (args.tokens.empty()) {
    for (int64_t j = 0; j < tk; ++j) e.tokens.push_back(std::to_string(j));
  }
  ATTN_CHECK(static_cast<int64_t>(e.tokens.size()) == tk, "--tokens gives ", e.tokens.size(),
             e.tokens.size() == 1 ? " label" : " labels", " for the ", tk, " keys of the weights ",
             e.weights.shape_string());
  return e;
}

void run_explore(const ExploreArgs& args) {
  const int sources = !args.checkpoint.empty() + !args.model.empty() + !args.weights.empty();
  ATTN_CHECK(sources == 1,
             "give one of --checkpoint (a model of attn train), --model (GPT-2's files) or "
             "--weights (a .npy of attention weights)");
  ATTN_CHECK(args.weights.empty() || (args.text.empty() && args.text_file.empty()),
             "--text goes with a model; label --weights with --tokens");
  ATTN_CHECK(!args.weights.empty() || args.tokens.empty(),
             "--tokens labels --weights; a model's tokens come from its tokenizer");
  ATTN_CHECK(args.weights.empty() || args.save_weights.empty(),
             "--save-weights writes a model's weights; --weights are already a file");
  const Explored e = args.weights.empty() ? explore_model(args) : explore_weights(args);
  ExplorerOptions options;
  options.title = args.title.empty() ? "Attention" : args.title;
  options.subtitle = e.subtitle;
  std::vector<std::pair<std::string, std::string>> files = {
      {args.out, explorer_html(e.weights, e.tokens, options)}};
  if (!args.save_weights.empty()) files.emplace_back(args.save_weights, npy_bytes(e.weights));
  if (!args.png.empty() || !args.svg.empty()) {
    // The grid of every head, labelled with the tokens, each row to its own largest weight.
    HeatmapPictureOptions picture;
    picture.column_labels = e.tokens;
    picture.row_labels.assign(e.tokens.end() - e.weights.dim(-2), e.tokens.end());
    picture.scale = HeatmapScale::kRow;
    picture.title = args.title;
    if (!args.png.empty()) files.emplace_back(args.png, heatmap_png(e.weights, picture));
    if (!args.svg.empty()) files.emplace_back(args.svg, heatmap_svg(e.weights, picture));
  }
  write_files_atomically(files);
  std::error_code ec;
  const std::filesystem::path page = std::filesystem::absolute(args.out, ec);
  std::string others;  // the files beside the page
  for (size_t i = 1; i < files.size(); ++i)
    others += (i + 1 == files.size() && i > 1 ? " and " : ", ") + files[i].first;
  std::fprintf(stderr, "attn: wrote %s (%s weights, %zu tokens)%s; open file://%s in a browser\n",
               args.out.c_str(), e.weights.shape_string().c_str(), e.tokens.size(), others.c_str(),
               page.c_str());
}

}  // namespace

void add_explore_command(CLI::App& app) {
  auto args = std::make_shared<ExploreArgs>();
  CLI::App* cmd = app.add_subcommand(
      "explore",
      "Write the attention explorer: one self-contained HTML page (works offline) with every\n"
      "head of a model reading a text as a small heat map, and the head you open as a head view\n"
      "(lines from each token to the tokens it attends to) and a large heat map.");
  CLI::Option* checkpoint = cmd->add_option("--checkpoint", args->checkpoint,
                                            "a training directory of 'attn train' or its "
                                            "checkpoint.safetensors");
  cmd->add_option("--model", args->model,
                  "instead: a GPT-2 model in Hugging Face's layout (config.json, "
                  "model.safetensors, tokenizer files)")
      ->type_name("DIR")
      ->excludes(checkpoint);
  CLI::Option* text = cmd->add_option("--text", args->text, "the text the model reads");
  cmd->add_option("--text-file", args->text_file, "read the text from FILE ('-': stdin)")
      ->excludes(text);
  cmd->add_option("--weights", args->weights,
                  "instead of a model: weights W.npy, (Tq, Tk), (H, Tq, Tk) or (L, H, Tq, Tk)")
      ->type_name("FILE");
  cmd->add_option("--tokens", args->tokens,
                  "with --weights: one word per key, e.g. the output of 'attn bpe encode "
                  "--tokens' (default: the positions 0, 1, …)");
  cmd->add_option("--out", args->out, "the page to write")
      ->type_name("FILE")
      ->capture_default_str();
  cmd->add_option("--save-weights", args->save_weights,
                  "also write the model's weights, (n_layer, n_head, T, T), as a .npy (for attn "
                  "heatmap --grid)")
      ->type_name("FILE");
  cmd->add_option("--png", args->png,
                  "also draw every head as a PNG grid (rows = layers), token labels, each row "
                  "scaled to its largest weight")
      ->type_name("FILE");
  cmd->add_option("--svg", args->svg, "the same grid as an SVG")->type_name("FILE");
  cmd->add_option("--title", args->title, "the page's title (default: Attention)");
  cmd->footer(
      "Examples:\n"
      "  attn explore --checkpoint run --text \"ROMEO:\" --out attention.html\n"
      "  attn explore --weights w.npy --tokens \"the cat sat\" --out w.html");
  cmd->callback([args] { run_explore(*args); });
}

}  // namespace attn::cli
