// attn sdpa: scaled dot-product attention on .npy files.
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "attn/sdpa.hpp"
#include "commands.hpp"
#include "common.hpp"

namespace attn::cli {
namespace {

struct SdpaArgs {
  std::string q, k, v, mask, out, weights, impl = "fused";
  bool causal = false;
  std::string causal_align = "bottom-right";
  int64_t window = 0;
  std::optional<float> scale;
  float softcap = 0.0f;
  std::vector<float> alibi_slopes, sinks;
  std::string precision = "f32";
  int threads = 0;
};

void run_sdpa(const SdpaArgs& args) {
  apply_threads(args.threads);
  SdpaOptions options;
  options.causal = args.causal;
  options.window = args.window;
  options.causal_align = causal_align_from_string(args.causal_align);
  options.scale = args.scale;
  options.return_weights = !args.weights.empty();
  options.softcap = args.softcap;
  options.alibi_slopes = args.alibi_slopes;
  options.sinks = args.sinks;
  options.precision = float_dtype_from_string(args.precision, "--precision");
  if (!args.mask.empty()) options.mask = load_mask(args.mask);
  const Tensor q = load_finite(args.q), k = load_finite(args.k), v = load_finite(args.v);
  // The weights are (…, Tq, Tk): one float per query row and key, sized before any work.
  if (options.return_weights && q.rank() >= 2 && k.rank() >= 2) {
    const int64_t rows = q.numel() / q.shape().back();
    check_output_size("--weights (" + std::to_string(rows) + " rows × " +
                          std::to_string(k.shape()[k.rank() - 2]) + " keys)",
                      static_cast<double>(rows) * static_cast<double>(k.shape()[k.rank() - 2]));
  }
  const SdpaResult result = sdpa_with(args.impl, q, k, v, options);
  write_results(args.out, result.output, args.weights, result.weights);
}

}  // namespace

void add_sdpa_command(CLI::App& app) {
  auto args = std::make_shared<SdpaArgs>();
  CLI::App* cmd = app.add_subcommand(
      "sdpa",
      "softmax(Q·Kᵀ·scale + mask)·V on .npy files.\n"
      "Q (…, Tq, d), K (…, Tk, d), V (…, Tk, dv); K/V heads may divide Q heads (GQA).");
  cmd->add_option("--q", args->q, "queries Q.npy (…, Tq, d)")->required();
  cmd->add_option("--k", args->k, "keys K.npy (…, Tk, d)")->required();
  cmd->add_option("--v", args->v, "values V.npy (…, Tk, dv)")->required();
  cmd->add_flag("--causal", args->causal,
                "causal mask: query i sees keys up to its position (see --causal-align)");
  cmd->add_option("--window", args->window, "sliding-window causal: the last W keys only")
      ->check(positive());
  cmd->add_option("--mask", args->mask,
                  "mask M.npy broadcast to (…, Tq, Tk): bool = true where allowed; float = added");
  cmd->add_option("--scale", args->scale, "score scale (default 1/sqrt(d))")->check(finite());
  cmd->add_option("--softcap", args->softcap,
                  "soft-capping (Gemma 2): scores become C·tanh(score / C); 0 = off")
      ->check(finite());
  cmd->add_option("--alibi-slopes", args->alibi_slopes,
                  "ALiBi (BLOOM): one slope per query head, comma-separated; the score of query i "
                  "and key j gains -slope·|pos_i - j|")
      ->delimiter(',')
      ->check(finite());
  cmd->add_option("--sinks", args->sinks,
                  "attention sinks (gpt-oss): one logit per query head, comma-separated, added to "
                  "every softmax denominator")
      ->delimiter(',')
      ->check(finite());
  cmd->add_option("--precision", args->precision,
                  "the products' operands: f32, or bf16 (Q, K, V and the weights rounded to "
                  "bfloat16 for them; sums and softmax in float)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--out", args->out,
                  "where to write the output O.npy (…, Tq, dv) ('-': standard output)")
      ->required();
  cmd->add_option("--weights", args->weights,
                  "also write the weights W.npy (…, Tq, Tk) ('-': standard output)");
  add_causal_align_option(*cmd, args->causal_align);
  add_impl_option(*cmd, args->impl);
  add_threads_option(*cmd, args->threads);
  cmd->footer(
      "Example: attn sdpa --q q.npy --k k.npy --v v.npy --causal --out o.npy --weights w.npy");
  cmd->callback([args] { run_sdpa(*args); });
}

}  // namespace attn::cli
