// attn: the command-line tool. Errors print one line to stderr and exit with status 1
// (bad input or a failed computation) or 2 (bad command line).
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "attn/error.hpp"
#include "attn/simd.hpp"
#include "attn/threads.hpp"
#include "attn/version.hpp"
#include "commands.hpp"
#include "config_file.hpp"
#include "mpi_run.hpp"

namespace {

// One readable line, whatever bytes the message quotes: a newline becomes a space, other
// control bytes (a NUL would cut the line short) are written as \xNN.
void print_error(const std::string& message) {
  // In an MPI job the line names the rank (once: a library error may have named it already).
  const std::string rank = attn::cli::error_prefix();
  std::string line = "attn: error: " + (message.starts_with(rank) ? "" : rank);
  for (const char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      line += ' ';
    } else if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      line += escaped;
    } else {
      line += c;
    }
  }
  line += '\n';
  std::fwrite(line.data(), 1, line.size(), stderr);
}

// The commands, in the order `attn --help` lists them.
struct Command {
  const char* name;
  void (*add)(CLI::App& app);
};
constexpr Command kCommands[] = {
    {"demo", attn::cli::add_demo_command},     {"sdpa", attn::cli::add_sdpa_command},
    {"mha", attn::cli::add_mha_command},       {"heatmap", attn::cli::add_heatmap_command},
    {"bench", attn::cli::add_bench_command},   {"bpe", attn::cli::add_bpe_command},
    {"train", attn::cli::add_train_command},   {"generate", attn::cli::add_generate_command},
    {"export", attn::cli::add_export_command}, {"explore", attn::cli::add_explore_command},
};

std::string command_names() {
  std::string names;
  for (const Command& c : kCommands) names += std::string(names.empty() ? "" : ", ") + c.name;
  return names;
}

// Registers the command argv[1] names, and only it: building every command's options costs
// each run ~0.2 MiB of code and heap it does not use (bpe encode is a 5 MiB process). All of
// them for `attn`, `attn --help` and options. Returns false if argv[1] names no command.
bool add_commands(CLI::App& app, int argc, char** argv) {
  const bool named = argc > 1 && argv[1][0] != '-';
  for (const Command& c : kCommands) {
    if (named && argv[1] == std::string(c.name)) {
      c.add(app);
      return true;
    }
  }
  if (named) return false;
  for (const Command& c : kCommands) c.add(app);
  return true;
}

// "attn bench forward": the command the arguments reached, for the hint after a parse error.
std::string reached_command(CLI::App& app) {
  std::string path = "attn";
  for (CLI::App* at = &app; !at->get_subcommands().empty();) {
    at = at->get_subcommands().front();
    path += " " + at->get_name();
  }
  return path;
}

// CLI11's "Could not convert: --n-layer = two" in the tool's words: "--n-layer: 'two' is not a
// whole number". Other messages are returned as they are.
std::string conversion_message(CLI::App& app, const std::string& what) {
  static const std::string kPrefix = "Could not convert: ";
  const size_t equals = what.find(" = ");
  if (!what.starts_with(kPrefix) || equals == std::string::npos) return what;
  const std::string name = what.substr(kPrefix.size(), equals - kPrefix.size());
  CLI::App* command = &app;
  while (!command->get_subcommands().empty()) command = command->get_subcommands().front();
  const CLI::Option* option = command->get_option_no_throw(name);
  if (option == nullptr) return what;
  const std::string type = option->get_type_name().substr(0, option->get_type_name().find(':'));
  const bool list = option->get_items_expected_max() > 1;
  std::string kind = type == "INT" || type == "UINT" ? "whole number"
                     : type == "FLOAT"               ? "number"
                                                     : "";
  if (kind.empty()) return what;
  kind = list ? "a comma-separated list of " + kind + "s" : "a " + kind;
  return name + ": '" + what.substr(equals + 3) + "' is not " + kind;
}

// The first argument that looks like an option and that no command took: CLI11 reports a
// missing required option before an unknown one ("--q is required" for a mistyped --qq), so the
// unknown one is named first.
std::string unknown_option(CLI::App& app) {
  for (CLI::App* at = &app;; at = at->get_subcommands().front()) {
    for (const std::string& extra : at->remaining()) {
      if (extra.size() > 1 && extra[0] == '-') return extra;
    }
    if (at->get_subcommands().empty()) return "";
  }
}

bool asks_for_help(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-h" || arg == "--help" || arg == "--version") return true;
  }
  return false;
}

// Options that take a path say so in --help (FILE, DIR) instead of CLI11's TEXT.
void name_path_options(CLI::App& app) {
  static const std::pair<const char*, const char*> kPaths[] = {
      {"--q", "FILE"},          {"--k", "FILE"},         {"--v", "FILE"},
      {"--mask", "FILE"},       {"--out", "FILE"},       {"--weights", "FILE"},
      {"--x", "FILE"},          {"--wq", "FILE"},        {"--wk", "FILE"},
      {"--wv", "FILE"},         {"--wo", "FILE"},        {"--bq", "FILE"},
      {"--bk", "FILE"},         {"--bv", "FILE"},        {"--bo", "FILE"},
      {"--corpus", "FILE"},     {"--checkpoint", "DIR"}, {"--config", "FILE"},
      {"--prompt-file", "FILE"}};
  // generate's and bench generate's --weights is a dtype (f32, bf16), not a file.
  const bool weights_is_dtype = app.get_name() == "generate";
  // attn train's --out is a directory; attn bpe train's is a file.
  const bool out_is_dir = app.get_name() == "train" && app.get_parent() != nullptr &&
                          app.get_parent()->get_parent() == nullptr;
  for (CLI::Option* option : app.get_options()) {
    for (const auto& [name, type] : kPaths) {
      if (weights_is_dtype && std::string(name) == "--weights") continue;
      if (option->check_lname(std::string(name).substr(2))) option->type_name(type);
    }
    if (out_is_dir && option->check_lname("out")) option->type_name("DIR");
  }
  for (CLI::App* sub : app.get_subcommands({})) name_path_options(*sub);
}

}  // namespace

// Keep freed memory for reuse instead of returning it to the kernel: each call allocates its
// outputs (tens of MiB at long sequences), and re-faulting those pages on every call cost
// more than half of a multi-head block at T = 1024 on this VM (103 ms instead of ~40).
// glibc's defaults adapt only partly (sizes up to 32 MiB, trimmed again at 2x that).
void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // blocks up to 32 MiB come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // and the heap is not trimmed below 1 GiB of free space
}

// A command's failure: one line, and in an MPI job of several processes the job ends (the
// others may be waiting for this one).
int failed(const std::string& message) {
  print_error(message);
  attn::cli::end_job_after_error(1);
  return 1;
}

int main(int argc, char** argv) {
  keep_freed_memory();
  const attn::cli::MpiScope mpi(&argc, &argv);  // MPI, when mpirun started this process
  CLI::App app{
      "attn: causal multi-head attention, from the textbook formulas to the tools.\n"
      "Run 'attn demo' for the walk-through, 'attn COMMAND --help' for each command.",
      "attn"};
  app.set_version_flag("--version", std::string("attn ") + attn::version());
  // An option given twice takes the last value, as most tools do (CLI11's default is an error
  // that reads "At Most 1 required but received 2").
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.require_subcommand(1);
  if (!add_commands(app, argc, argv)) {
    print_error(std::string("unknown command '") + argv[1] + "'; the commands are " +
                command_names() + " (run 'attn --help')");
    return 2;
  }
  name_path_options(app);
  // --config FILE: the file's options become arguments (the command line's win).
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    CLI::App* command = argc > 1 && argv[1][0] != '-' ? app.get_subcommand(argv[1]) : nullptr;
    if (command != nullptr && command->get_option_no_throw("--config") != nullptr) {
      args.erase(args.begin());  // the command's name: the file's names are its options
      args = attn::cli::expand_config(*command, std::move(args));
      args.insert(args.begin(), argv[1]);
    }
  } catch (const std::exception& e) {
    print_error(e.what());
    return 2;
  }
  if (argc == 1) {  // bare `attn`: the help, as `attn --help` prints it
    std::fputs(app.help().c_str(), stdout);
    return 0;
  }
  try {
    // A bad ATTN_NUM_THREADS is an error before any work (the library would report it only at
    // its first parallel loop, possibly after reading the inputs).
    if (!asks_for_help(argc, argv)) attn::num_threads();
    attn::limit_simd_from_environment();     // ATTN_SIMD=avx2: the AVX2 code on any CPU
    std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last-first
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    const std::string unknown = unknown_option(app);
    const std::string what =
        unknown.empty() ? conversion_message(app, e.what()) : "unknown option " + unknown;
    print_error(what + " (run '" + reached_command(app) + " --help')");
    return 2;
  } catch (const std::exception& e) {
    return failed(e.what());
  }
  return 0;
}
