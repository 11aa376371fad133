// attn mha: multi-head attention on .npy files.
#include <cstdio>
#include <string>

#include "attn/mha.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace attn::cli {
namespace {

struct MhaArgs {
  std::string x, wq, wk, wv, wo, bq, bk, bv, bo, mask, out, weights, impl = "fused";
  int64_t heads = 0, kv_heads = 0;
  bool rope = false;
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
  if (!args.mask.empty()) options.mask = load_mask(args.mask);
  auto optional = [](const std::string& path) {
    return path.empty() ? Tensor{} : load_finite(path);
  };
  MhaExtras extras;
  extras.n_kv_heads = args.kv_heads;
  extras.bq = optional(args.bq);
  extras.bk = optional(args.bk);
  extras.bv = optional(args.bv);
  extras.bo = optional(args.bo);
  extras.rope = args.rope;
  const Tensor x = load_finite(args.x);
  // The weights are (B, heads, T, T), sized before any work.
  if (options.return_weights && x.rank() >= 2) {
    const int64_t t = x.shape()[x.rank() - 2], rows = x.numel() / x.shape().back();
    check_output_size(
        "--weights (" + std::to_string(args.heads) + " heads × " + std::to_string(rows) +
            " rows × " + std::to_string(t) + " keys)",
        static_cast<double>(args.heads) * static_cast<double>(rows) * static_cast<double>(t));
  }
  const MhaResult result =
      mha_with(args.impl, x, load_finite(args.wq), load_finite(args.wk), load_finite(args.wv),
               optional(args.wo), args.heads, options, extras);
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
  cmd->add_option("--wk", args->wk,
                  "key projection WK.npy (d_model, kv_heads·d_head): (d_model, d_model) unless "
                  "--kv-heads")
      ->required();
  cmd->add_option("--wv", args->wv, "value projection WV.npy, the shape of WK")->required();
  cmd->add_option("--wo", args->wo, "output projection WO.npy (d_model, d_out); omit for none");
  cmd->add_option("--heads", args->heads, "number of heads; must divide d_model")
      ->required()
      ->check(positive());
  cmd->add_option("--kv-heads", args->kv_heads,
                  "key/value heads for grouped-query attention (must divide --heads; default "
                  "--heads); WK and WV then have kv_heads·d_head columns")
      ->check(positive());
  cmd->add_option("--bq", args->bq, "bias BQ.npy (d_model) added to X·WQ");
  cmd->add_option("--bk", args->bk, "bias BK.npy (kv_heads·d_head) added to X·WK");
  cmd->add_option("--bv", args->bv, "bias BV.npy (kv_heads·d_head) added to X·WV");
  cmd->add_option("--bo", args->bo, "bias BO.npy (d_out) added after WO");
  cmd->add_flag("--rope", args->rope, "rotary position embeddings on Q and K (even d_head)");
  cmd->add_option("--mask", args->mask,
                  "mask M.npy broadcast to (…, T, T): bool or integer = non-zero where allowed; "
                  "float = added to the scores");
  cmd->add_flag("--causal", args->causal, "causal mask: position t sees positions <= t");
  cmd->add_option("--window", args->window, "sliding-window causal: the last W positions only")
      ->check(positive());
  cmd->add_option("--out", args->out, "where to write Y.npy ('-': standard output)")->required();
  cmd->add_option("--weights", args->weights,
                  "also write the weights W.npy (B, H, T, T) ('-': standard output)");
  add_causal_align_option(*cmd, args->causal_align);
  add_impl_option(*cmd, args->impl);
  add_threads_option(*cmd, args->threads);
  cmd->footer(
      "Example: attn mha --x x.npy --wq wq.npy --wk wk.npy --wv wv.npy --wo wo.npy --heads 4 "
      "--causal --out y.npy");
  cmd->callback([args] { run_mha(*args); });
}

}  // namespace attn::cli
