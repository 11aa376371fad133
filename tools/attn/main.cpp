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

bool is_command(const CLI::App& app, const std::string& name) {
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == name) return true;
  }
  return false;
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
  attn::cli::add_demo_command(app);
  attn::cli::add_sdpa_command(app);
  attn::cli::add_mha_command(app);
  attn::cli::add_heatmap_command(app);
  attn::cli::add_bench_command(app);
  attn::cli::add_bpe_command(app);
  attn::cli::add_train_command(app);
  attn::cli::add_generate_command(app);
  if (argc > 1 && argv[1][0] != '-' && !is_command(app, argv[1])) {
    print_error(std::string("unknown command '") + argv[1] +
                "'; the commands are demo, sdpa, mha, heatmap, bench, bpe, train, generate (run 'attn --help')");
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    print_error(std::string(e.what()) + " (run 'attn --help')");
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
