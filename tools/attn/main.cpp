// attn: the command-line tool. Errors print one line to stderr and exit with status 1
// (bad input or a failed computation) or 2 (bad command line).
#include <malloc.h>

#include <cstdio>
#include <exception>
#include <string>

#include "attn/error.hpp"
#include "commands.hpp"

namespace {

// One line, even if a message ever carried a newline.
void print_error(const std::string& message) {
  std::string line = message;
  for (char& c : line) {
    if (c == '\n') c = ' ';
  }
  std::fprintf(stderr, "attn: error: %s\n", line.c_str());
}

// The commands, in the order `attn --help` lists them.
struct Command {
  const char* name;
  void (*add)(CLI::App& app);
};
constexpr Command kCommands[] = {
    {"demo", attn::cli::add_demo_command},   {"sdpa", attn::cli::add_sdpa_command},
    {"mha", attn::cli::add_mha_command},     {"heatmap", attn::cli::add_heatmap_command},
    {"bench", attn::cli::add_bench_command}, {"bpe", attn::cli::add_bpe_command},
    {"train", attn::cli::add_train_command}, {"generate", attn::cli::add_generate_command},
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

}  // namespace

// Keep freed memory for reuse instead of returning it to the kernel: each call allocates its
// outputs (tens of MiB at long sequences), and re-faulting those pages on every call cost
// more than half of a multi-head block at T = 1024 on this VM (103 ms instead of ~40).
// glibc's defaults adapt only partly (sizes up to 32 MiB, trimmed again at 2x that).
void keep_freed_memory() {
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // blocks up to 32 MiB come from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);   // and the heap is not trimmed below 1 GiB of free space
}

int main(int argc, char** argv) {
  keep_freed_memory();
  CLI::App app{
      "attn: causal multi-head attention, from the textbook formulas to the tools.\n"
      "Run 'attn demo' for the walk-through, 'attn COMMAND --help' for each command."};
  app.require_subcommand(1);
  if (!add_commands(app, argc, argv)) {
    print_error(std::string("unknown command '") + argv[1] + "'; the commands are " +
                command_names() + " (run 'attn --help')");
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(std::string(e.what()) + " (run '" + reached_command(app) + " --help')");
    return 2;
  } catch (const attn::Error& e) {
    print_error(e.what());
    return 1;
  } catch (const std::exception& e) {
    print_error(e.what());
    return 1;
  }
  return 0;
}
