// attn train: a GPT on a text file, with a progress bar or log lines, metrics.csv, loss.svg and
// a checkpoint at every evaluation; Ctrl-C saves and stops.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/threads.hpp"
#include "attn/train.hpp"
#include "attn/training_run.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "loss_plot.hpp"
#include "mpi_run.hpp"
#include "progress_bar.hpp"
#include "train_profile.hpp"
#include "train_report.hpp"

namespace attn::cli {
namespace {

// The signal that asked the run to stop (SIGINT from Ctrl-C, SIGTERM from kill, a service
// manager or a batch system), or 0. The run saves and exits 128 + that signal, as a shell
// reports a process the signal ended.
std::atomic<int> g_stop_signal{0};
extern "C" void on_stop_signal(int signal) { g_stop_signal = signal; }

struct TrainArgs {
  std::string corpus, out, tokenizer = "char", positions = "learned", precision = "f32";
  int64_t vocab_size = 512;  // for --tokenizer bpe
  GptConfig model;
  TrainOptions train;
  int64_t log_interval = 100;
  int64_t report_sample_tokens = 200;
  bool no_bias = false, resume = false, force = false, profile = false;
  std::vector<std::string> given;  // the flags the command line (or --config) set
  std::string config;              // expanded into the arguments before parsing (config_file.hpp)
  int threads = 0;
  DataParallelOptions parallel;  // under mpirun
  double bucket_mb = 1.0;
};

// --profile leaves out the first steps, as bench/compare_gpt.sh's medians do.
constexpr int64_t kProfileWarmUp = 10;

std::string checkpoint_path(const std::string& dir) { return dir + "/checkpoint.safetensors"; }

// A library message about GptConfig's settings, in the flags' names: "n_embd (15) must divide
// by n_head (4)" -> "--n-embd (15) must divide by --n-head (4)". Whole words only, so n_head
// inside n_kv_head stays n_kv_head's.
std::string in_flag_names(std::string message) {
  if (message.rfind("GptConfig: ", 0) == 0) message.erase(0, 11);
  const auto is_word_char = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  std::string out;
  for (size_t i = 0; i < message.size();) {
    size_t end = i;
    while (end < message.size() && is_word_char(message[end])) ++end;
    if (end == i) {
      out += message[i++];
      continue;
    }
    std::string word = message.substr(i, end - i);
    static const char* const kSettings[] = {"n_layer",    "n_head",  "n_kv_head", "n_embd",
                                            "block_size", "dropout", "positions"};
    for (const char* setting : kSettings) {
      if (word == setting) {
        std::replace(word.begin(), word.end(), '_', '-');
        word = "--" + word;
      }
    }
    out += word;
    i = end;
  }
  return out;
}

// The model's rules are the library's (validate(GptConfig)), run before the corpus is read; an
// error about one of its settings is said in the flags' names, which the user typed.
void check_model_flags(const TrainArgs& a) {
  GptConfig config = a.model;
  config.positions = position_kind_from_string(a.positions);
  try {
    validate(config);
  } catch (const Error& e) {
    if (e.argument().empty()) throw;
    throw Error::about_argument(e.argument(), in_flag_names(e.what()));
  }
  ATTN_CHECK(a.train.min_lr <= a.train.lr, "--min-lr (", a.train.min_lr, ") must be <= --lr (",
             a.train.lr, ")");
  // Parameters, gradients and AdamW's two moments, before the corpus is read.
  check_memory("the model (" + std::to_string(parameter_count(config)) +
                   " parameters, with gradients and AdamW's moments)",
               16.0 * static_cast<double>(parameter_count(config)));
}

bool flag_given(const TrainArgs& a, const std::string& flag) {
  return std::find(a.given.begin(), a.given.end(), flag) != a.given.end();
}

// A resumed run keeps its checkpoint's model, tokenizer and training options. The first run's
// command line with --resume added is fine; a flag that would change one of them is refused
// rather than silently dropped.
void check_resume_flags(const TrainArgs& a, const Trainer& trainer, const Tokenizer& tokenizer) {
  ATTN_CHECK(!flag_given(a, "--force"), "--force and --resume contradict each other: --force ",
             "starts over, --resume continues");
  const GptConfig& ckpt = trainer.model().config();
  const TrainOptions& o = trainer.options();
  const auto same = [&](const char* flag, const auto& given, const auto& kept) {
    ATTN_CHECK(!flag_given(a, flag) || given == kept, flag, " ", given,
               " differs from the resumed run's ", kept, ": a resumed run keeps its ",
               "checkpoint's model and training options (only --max-iters, --eval-iters and ",
               "--eval-interval may change)");
  };
  const auto kv_heads = [](const GptConfig& c) { return c.n_kv_head > 0 ? c.n_kv_head : c.n_head; };
  same("--n-layer", a.model.n_layer, ckpt.n_layer);
  same("--n-head", a.model.n_head, ckpt.n_head);
  same("--n-kv-head", kv_heads(a.model), kv_heads(ckpt));
  same("--n-embd", a.model.n_embd, ckpt.n_embd);
  same("--block-size", a.model.block_size, ckpt.block_size);
  same("--dropout", a.model.dropout, ckpt.dropout);
  same("--positions", a.positions, to_string(ckpt.positions));
  same("--no-bias", a.no_bias, !ckpt.bias);
  same("--precision", a.precision, to_string(o.precision));
  same("--batch-size", a.train.batch_size, o.batch_size);
  same("--grad-accum", a.train.grad_accum, o.grad_accum);
  same("--lr", a.train.lr, o.lr);
  same("--min-lr", a.train.min_lr, o.min_lr);
  same("--warmup-iters", a.train.warmup_iters, o.warmup_iters);
  same("--lr-decay-iters", a.train.lr_decay_iters, o.lr_decay_iters);
  same("--weight-decay", a.train.adamw.weight_decay, o.adamw.weight_decay);
  same("--decay-embeddings", a.train.adamw.decay_embeddings, o.adamw.decay_embeddings);
  same("--beta2", a.train.adamw.beta2, o.adamw.beta2);
  same("--grad-clip", a.train.grad_clip, o.grad_clip);
  same("--val-fraction", a.train.val_fraction, o.val_fraction);
  same("--seed", a.train.seed, o.seed);
  if (a.tokenizer == "char" || a.tokenizer == "bpe")
    same("--tokenizer", a.tokenizer, tokenizer.kind());
}

// Where the run goes. A directory that already holds a run is not overwritten unless --force
// (or continued with --resume); --resume needs a checkpoint there.
void check_out_dir(const TrainArgs& a) {
  namespace fs = std::filesystem;
  const std::string ckpt = checkpoint_path(a.out);
  if (a.resume) {
    ATTN_CHECK(fs::exists(ckpt), a.out, " has no checkpoint.safetensors to resume; drop --resume ",
               "to start a new run there");
    return;
  }
  ATTN_CHECK(!fs::exists(a.out) || fs::is_directory(a.out), "--out ", a.out,
             " exists and is not a directory");
  // Only a checkpoint makes a run worth keeping: a run killed before its first one left a
  // config.ini and metrics rows that nothing can resume, and a new run replaces them.
  ATTN_CHECK(!fs::exists(ckpt) || a.force, a.out,
             " already holds a run; pass --resume to continue it or ",
             "--force to start over (its checkpoint and metrics are replaced)");
}

Tokenizer make_tokenizer(const TrainArgs& args, const std::string& corpus) {
  if (args.tokenizer == "char") return CharTokenizer::train(corpus);
  if (args.tokenizer == "bpe") {
    BpeOptions o;
    o.vocab_size = args.vocab_size;
    o.byte_level = true;
    return BpeTokenizer::train(corpus, o);
  }
  try {
    return Tokenizer::from_json(read_input(args.tokenizer, kMaxTokenizerBytes));
  } catch (const Error& e) {  // the parser's messages do not know the file
    throw e.in_file(args.tokenizer);
  }
}

std::string eta(double seconds) {
  char buffer[32];
  const long s = static_cast<long>(seconds);
  std::snprintf(buffer, sizeof buffer, "%ld:%02ld", s / 60, s % 60);
  return buffer;
}

void run_train(TrainArgs& args, const std::string& config_text) {
  // Under mpirun: one data-parallel group of every process. Rank 0 alone checks the output
  // directory, writes and prints (an error there ends the whole job); every rank reads the
  // corpus (and, resuming, the checkpoint) itself.
  args.parallel.bucket_bytes = static_cast<int64_t>(args.bucket_mb * 1048576.0);
  const std::shared_ptr<TrainingGroup> group = training_group(args.parallel);
  const bool lead = !group || group->rank() == 0;
  ATTN_CHECK(!group || !args.profile, "--profile times one process's step: run it without mpirun");
  // From the start, so that a Ctrl-C while the corpus is read still ends with a checkpoint.
  // Not under mpirun, which ends the whole job on Ctrl-C itself (resume from the last
  // evaluation's checkpoint).
  g_stop_signal = 0;
  if (!group) {
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
  }
  if (args.threads > 0) {
    set_num_threads(args.threads);
  } else if (group) {
    set_num_threads(threads_per_process());
  }
  if (!args.resume) check_model_flags(args);
  if (lead) check_out_dir(args);
  const std::string corpus = read_input(args.corpus, kMaxCorpusBytes);
  ATTN_CHECK(!corpus.empty(), "--corpus ", args.corpus, ": the corpus is empty");
  const std::string ckpt = checkpoint_path(args.out);

  std::optional<Tokenizer> tokenizer;
  std::optional<Trainer> trainer;
  if (args.resume) {
    Trainer::Resumed resumed = Trainer::resume_on_text(ckpt, corpus);
    tokenizer.emplace(std::move(resumed.tokenizer));
    trainer.emplace(std::move(resumed.trainer));
    if (args.train.max_iters != TrainOptions{}.max_iters)
      trainer->set_max_iters(args.train.max_iters);
    if (args.train.eval_iters != TrainOptions{}.eval_iters)
      trainer->set_eval_iters(args.train.eval_iters);
    if (flag_given(args, "--eval-interval")) trainer->set_eval_interval(args.train.eval_interval);
    check_resume_flags(args, *trainer, *tokenizer);
  } else {
    tokenizer = make_tokenizer(args, corpus);
    args.model.vocab_size = tokenizer->vocab_size();
    args.model.bias = !args.no_bias;
    args.model.positions = position_kind_from_string(args.positions);
    args.train.precision = matmul_precision_from_string(args.precision);
    std::vector<int64_t> tokens = tokenizer->encode(corpus);
    trainer.emplace(args.model, args.train, std::move(tokens), args.train.seed);
  }
  trainer->set_group(group);
  ProgressBar bar;
  RunReport report("attn train: " + args.out, args.report_sample_tokens);
  StepProfile profile(args.profile, kProfileWarmUp);
  const GptConfig& c = trainer->model().config();
  const TrainOptions& o = trainer->options();
  const int64_t tokens_per_step = o.batch_size * o.grad_accum * c.block_size;
  // The run: the library's loop, which also keeps the steps' time; this command adds the
  // directory's other files, the progress bar and the log lines.
  std::optional<TrainingRun> run;
  TrainingCallbacks on;
  on.notice = [](const std::string& text) { std::printf("%s\n", text.c_str()); };
  on.should_stop = [] { return g_stop_signal.load() != 0; };
  on.before_step = [&] { profile.start_step(); };
  on.evaluation = [&](int64_t iter, const EvalResult& e) {
    report.evaluation(iter, e);
    bar.clear();
    std::printf("iter %6lld  train loss %.4f  val loss %.4f\n", static_cast<long long>(iter),
                e.train_loss, e.val_loss);
    std::fflush(stdout);
  };
  on.checkpoint_written = [&] {
    write_files_atomically(
        {{args.out + "/loss.svg", loss_svg(report.loss_history())},
         {args.out + "/report.html", report.html(*trainer, *tokenizer, num_threads())}});
  };
  on.after_step = [&](const StepResult& r, double seconds) {
    profile.end_step(seconds);
    report.step(r, static_cast<double>(tokens_per_step) / seconds);
    const double mean = run->step_seconds() / static_cast<double>(run->steps_run());
    if (bar.shown()) {
      char detail[96];
      std::snprintf(detail, sizeof detail, "loss %.4f  %.1f ms/iter  %.0f tokens/s  ETA %s", r.loss,
                    mean * 1e3, static_cast<double>(tokens_per_step) / mean,
                    eta(mean * static_cast<double>(o.max_iters - r.iter - 1)).c_str());
      bar.update(r.iter + 1, o.max_iters, detail);
    } else if ((r.iter + 1) % args.log_interval == 0) {
      std::printf("iter %6lld  loss %.4f  lr %.2e  %.1f ms/iter  %.0f tokens/s\n",
                  static_cast<long long>(r.iter + 1), r.loss, r.lr, mean * 1e3,
                  static_cast<double>(tokens_per_step) / mean);
      std::fflush(stdout);
    }
  };
  TrainingRunOptions run_options;
  run_options.dir = args.out;
  run_options.resumed = args.resume;
  if (!lead) {  // the same steps and evaluations, nothing written or printed
    TrainingRun(*trainer, *tokenizer, run_options).run();
    return;
  }
  // Only now, with everything checked, does the run get a directory: a refused run leaves none.
  std::filesystem::create_directories(args.out);
  // Temporaries of a run killed mid-write (a checkpoint is 8 MB) go before this one writes.
  if (const int stale = remove_stale_temporaries(args.out); stale > 0) {
    std::printf("removed %s left by a run that was killed while writing\n",
                count_text(stale, "temporary file").c_str());
  }
  if (!args.resume) write_file_atomically(args.out + "/config.ini", config_text);
  run.emplace(*trainer, *tokenizer, run_options, on);
  std::printf(
      "attn train: %lld parameters (%s, %s, n_embd %lld, block %lld), "
      "vocabulary %lld (%s), %zu tokens, %s%s%s%s\n",
      static_cast<long long>(trainer->model().num_parameters()),
      count_text(c.n_layer, "layer").c_str(), count_text(c.n_head, "head").c_str(),
      static_cast<long long>(c.n_embd), static_cast<long long>(c.block_size),
      static_cast<long long>(c.vocab_size), tokenizer->kind().c_str(), trainer->token_count(),
      group ? (std::to_string(group->size()) + " processes x ").c_str() : "",
      count_text(num_threads(), "thread").c_str(),
      trainer->model().training_precision() == Dtype::kBFloat16 ? ", bf16 products" : "",
      args.resume ? (", resumed at iteration " + std::to_string(trainer->iteration())).c_str()
                  : "");
  std::fflush(stdout);
  if (args.resume) report.read_metrics(args.out + "/metrics.csv");
  // The handlers stay to the end: a signal once the run has finished (its files all written)
  // leaves the summary to be printed and exit status 0, rather than ending the process between
  // two lines of it.
  const RunEnd end = run->run();
  bar.clear();
  if (end == RunEnd::kStopped) {
    const int signal = g_stop_signal.load();
    std::printf(
        "interrupted (%s) at iteration %lld; checkpoint saved to %s (continue with "
        "--resume)\n",
        signal == SIGTERM ? "SIGTERM" : "SIGINT", static_cast<long long>(trainer->iteration()),
        ckpt.c_str());
    std::exit(128 + signal);
  }
  // A resumed run that was already done only evaluates: no step to time.
  const double train_seconds = run->step_seconds();
  const int64_t timed_steps = run->steps_run();
  char pace[40] = "no step run";
  if (timed_steps > 0) {
    std::snprintf(pace, sizeof pace, "%.1f ms/iter",
                  1e3 * train_seconds / static_cast<double>(timed_steps));
  }
  std::printf("done: %s, %s; wrote %s, %s/metrics.csv, %s/loss.svg, %s/report.html\n",
              count_text(trainer->iteration(), "iteration").c_str(), pace, ckpt.c_str(),
              args.out.c_str(), args.out.c_str(), args.out.c_str());
  profile.print(c, o, num_threads());
  if (group && timed_steps > 0) {
    std::printf("gradient sums: %lld buckets; the steps waited %.1f ms/iter for them (%.1f %%)\n",
                static_cast<long long>(gradient_buckets()),
                1e3 * gradient_wait_seconds() / static_cast<double>(timed_steps),
                100.0 * gradient_wait_seconds() / train_seconds);
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a GPT on a text file. Defaults: the well-known small character-level model\n"
      "(4 layers, 4 heads, n_embd 128, block 64, batch 12, 2000 iterations, lr 1e-3 with 100\n"
      "warm-up steps and cosine decay to 1e-4, AdamW betas (0.9, 0.99), weight decay 0.1,\n"
      "clipping at 1.0). Writes DIR/checkpoint.safetensors at every evaluation, DIR/metrics.csv\n"
      "(iter,train_loss,val_loss,lr,ms_per_iter,tokens_per_s: one row per step, and one per\n"
      "evaluation with the val columns filled), DIR/loss.svg and DIR/report.html (the curves, the\n"
      "schedule, tokens/s, the configuration and a sample). A progress bar on a terminal,\n"
      "log lines otherwise. Ctrl-C (SIGINT) or SIGTERM saves a checkpoint and exits with status\n"
      "130 or 143; --resume continues.\n"
      "Under mpirun -np N: data-parallel training over N processes, the same loss curve as one\n"
      "process (--batch-size stays the whole batch; docs/distributed.md).");
  TrainArgs& a = *args;
  cmd->add_option("--corpus", a.corpus, "the text file to learn (UTF-8 for --tokenizer char)")
      ->required();
  cmd->add_option("--out", a.out,
                  "directory for the checkpoint, metrics.csv, loss.svg and report.html")
      ->required();
  cmd->add_option("--tokenizer", a.tokenizer,
                  "char (one token per character), bpe (byte-level BPE trained on the corpus), "
                  "or a tokenizer JSON file from 'attn bpe train'")
      ->capture_default_str();
  cmd->add_option("--vocab-size", a.vocab_size, "vocabulary of --tokenizer bpe")
      ->check(in_range(257, 1 << 20))
      ->capture_default_str();
  cmd->add_flag("--resume", a.resume,
                "continue DIR/checkpoint.safetensors (model and training options come from it; "
                "--max-iters may extend the run, --eval-iters changes the loss estimates)");
  cmd->add_flag("--force", a.force,
                "start a new run in a directory that already holds one, replacing it");
  cmd->add_option("--config", a.config,
                  "read options from FILE: one 'name = value' per line, the long option names "
                  "without dashes (n-layer = 6); flags on the command line override it. Every "
                  "new run writes DIR/config.ini, so '--config DIR/config.ini --out NEW' repeats "
                  "it");
  cmd->add_option("--n-layer", a.model.n_layer, "transformer blocks")
      ->check(in_range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--n-head", a.model.n_head, "attention heads")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--n-kv-head", a.model.n_kv_head, "K/V heads (0 = n-head; fewer: grouped-query)")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--n-embd", a.model.n_embd, "model width")
      ->check(in_range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--block-size", a.model.block_size, "context length")
      ->check(in_range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--dropout", a.model.dropout, "dropout on embeddings and residual branches")
      ->check(in_range(0, 1, false, true))
      ->capture_default_str();
  cmd->add_option("--positions", a.positions, "learned, sinusoidal or rotary")
      ->check(CLI::IsMember({"learned", "sinusoidal", "rotary"}))
      ->capture_default_str();
  cmd->add_flag("--no-bias", a.no_bias, "no biases in linear layers and LayerNorms");
  cmd->add_option("--precision", a.precision,
                  "matrix products of training: f32, or bf16 (mixed precision: bf16 operands, "
                  "float sums, parameters and evaluation; twice the multiply rate on AVX-512 BF16)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--batch-size", a.train.batch_size, "windows per micro-batch")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--grad-accum", a.train.grad_accum, "micro-batches per step")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--max-iters", a.train.max_iters, "optimizer steps")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--lr", a.train.lr, "peak learning rate")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--min-lr", a.train.min_lr, "learning rate at the end of the cosine")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--warmup-iters", a.train.warmup_iters, "linear warm-up steps")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--lr-decay-iters", a.train.lr_decay_iters, "end of the cosine (0 = max-iters)")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--weight-decay", a.train.adamw.weight_decay, "AdamW decoupled weight decay")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_flag("--decay-embeddings", a.train.adamw.decay_embeddings,
                "weight decay on the token and position embeddings too (nanoGPT's grouping)");
  cmd->add_option("--beta2", a.train.adamw.beta2, "AdamW beta2")
      ->check(in_range(0, 1, false, true))
      ->capture_default_str();
  cmd->add_option("--grad-clip", a.train.grad_clip, "clip the global gradient norm (0 = off)")
      ->check(finite())
      ->capture_default_str();
  cmd->add_flag("--profile", a.profile,
                "after training, print the step's time per phase (matrix products, attention, "
                "LayerNorm, GELU, …) with GFLOP/s and the share of the FMA peak");
  cmd->add_option("--eval-interval", a.train.eval_interval,
                  "steps between evaluations and checkpoints (a resumed run keeps its own)")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--report-sample-tokens", a.report_sample_tokens,
                  "tokens the model writes for report.html at each evaluation (0: none)")
      ->check(non_negative())
      ->capture_default_str();
  cmd->add_option("--eval-iters", a.train.eval_iters, "batches per loss estimate")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--val-fraction", a.train.val_fraction,
                  "the last part of the corpus held out for the val loss")
      ->check(in_range(0, 0.5, true, false))
      ->capture_default_str();
  cmd->add_option("--log-interval", a.log_interval,
                  "steps between log lines when not on a terminal")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--seed", a.train.seed, "initialisation, data order and dropout")
      ->check(unsigned_integer())
      ->capture_default_str();
  add_threads_option(*cmd, a.threads);
  cmd->add_option("--mpi-timeout", a.parallel.timeout_seconds,
                  "under mpirun: seconds a rank waits for the others before it ends the job (a "
                  "rank died or hangs)")
      ->check(positive())
      ->capture_default_str();
  cmd->add_option("--bucket-mb", a.bucket_mb,
                  "under mpirun: MiB of gradients summed per bucket while the backward pass runs")
      ->check(in_range(0.001, 1024))
      ->capture_default_str();
  cmd->callback([args, cmd] {
    args->given.clear();
    for (const CLI::Option* option : cmd->get_options()) {
      if (option->count() > 0) args->given.push_back(option->get_name());
    }
    run_train(*args, cmd->config_to_str(true, false));
  });
}

}  // namespace attn::cli
