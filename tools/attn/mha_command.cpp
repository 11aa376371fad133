// attn mha: multi-head attention on .npy files.
#include <cstdio>
#include <string>

#include "attn/mha.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace attn::cli {
namespace {

struct MhaArgs {
  std::string x, wq, wk, wv, wo, out, weights, impl = "fused";
  int64_t heads = 0;
  bool causal = false;
  std::string causal_align = "bottom-right";
  int64_t window = 0;
  int threads = 0;
};

void run_mha(const MhaArgs& args) {
  apply_threads(args.threads);
  SdpaOptions options;
  options.causal = args.causal;
  options.window = args.window;
  options.causal_align = causal_align_from_string(args.causal_align);
  options.return_weights = !args.weights.empty();
  const Tensor wo = args.wo.empty() ? Tensor{} : load_finite(args.wo);
  const MhaResult result =
      mha_with(args.impl, load_finite(args.x), load_finite(args.wq), load_finite(args.wk),
               load_finite(args.wv), wo, args.heads, options);
  write_results(args.out, result.output, args.weights, result.weights);
}

}  // namespace

void add_mha_command(CLI::App& app) {
  auto args = std::make_shared<MhaArgs>();
  CLI::App* cmd = app.add_subcommand(
      "mha",
      "Multi-head attention Y = merge(sdpa(split(X·Wq), split(X·Wk), split(X·Wv)))·Wo\n"
      "on .npy files; X (B, T, d_model) or (T, d_model), W* (d_model, d_model).");
  cmd->add_option("--x", args->x, "input X.npy (B, T, d_model) or (T, d_model)")->required();
  cmd->add_option("--wq", args->wq, "query projection WQ.npy (d_model, d_model)")->required();
  cmd->add_option("--wk", args->wk, "key projection WK.npy (d_model, d_model)")->required();
  cmd->add_option("--wv", args->wv, "value projection WV.npy (d_model, d_model)")->required();
  cmd->add_option("--wo", args->wo, "output projection WO.npy (d_model, d_out); omit for none");
  cmd->add_option("--heads", args->heads, "number of heads; must divide d_model")
      ->required()
      ->check(positive());
  cmd->add_flag("--causal", args->causal, "causal mask: position t sees positions <= t");
  cmd->add_option("--window", args->window, "sliding-window causal: the last W positions only")
      ->check(positive());
  cmd->add_option("--out", args->out, "where to write Y.npy")->required();
  cmd->add_option("--weights", args->weights, "also write the weights W.npy (B, H, T, T)");
  add_causal_align_option(*cmd, args->causal_align);
  add_impl_option(*cmd, args->impl);
  add_threads_option(*cmd, args->threads);
  cmd->footer(
      "Example: attn mha --x x.npy --wq wq.npy --wk wk.npy --wv wv.npy --wo wo.npy --heads 4 "
      "--causal --out y.npy");
  cmd->callback([args] { run_mha(*args); });
}

}  // namespace attn::cli
