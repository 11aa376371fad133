// Each subcommand registers itself on the top-level app; its callback does the work.
#pragma once

#include <CLI/CLI.hpp>

namespace attn::cli {

void add_demo_command(CLI::App& app);
void add_sdpa_command(CLI::App& app);
void add_mha_command(CLI::App& app);
void add_heatmap_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_bpe_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_export_command(CLI::App& app);
void add_explore_command(CLI::App& app);
void add_bench_backward_command(CLI::App& bench);   // under `attn bench`
void add_bench_generate_command(CLI::App& bench);   // under `attn bench`
void add_bench_tokenizer_command(CLI::App& bench);  // under `attn bench`

}  // namespace attn::cli
