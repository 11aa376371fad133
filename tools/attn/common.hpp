// What the subcommands share: loading inputs with clear errors, the --threads and --impl options.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "attn/mask.hpp"
#include "attn/mha.hpp"
#include "attn/sdpa.hpp"
#include "attn/tensor.hpp"
#include "attn/tokenizer.hpp"

namespace attn::cli {

// The whole of a file, or of standard input for "-"; attn::Error when it cannot be read or
// is longer than max_bytes (one of the limits of attn/files.hpp).
std::string read_input(const std::string& path, uint64_t max_bytes);
// The same bytes, handed to consume 16 KiB at a time, in order (memory stays bounded).
void read_chunks(const std::string& path, const std::function<void(std::string_view)>& consume);

// Reads a float .npy (f2, bfloat16, f4, f8) whose values must all be finite (Q, K, V, X,
// weights matrices); float64 is narrowed to float32 with a note on stderr.
Tensor load_finite(const std::string& path);
// Reads a mask: booleans and integers -> boolean (non-zero = allowed), floats -> additive.
Mask load_mask(const std::string& path);

// The whitespace-separated words of text: token labels given on the command line (--tokens).
std::vector<std::string> split_words(const std::string& text);

// Writes bytes to the file at path (atomically), or to standard output for "-".
void write_output(const std::string& path, const std::string& bytes);
// attn::Error when both are "-": one stream cannot carry two files.
void check_one_stdout(const std::string& a, const std::string& b);

// attn::Error before any work when `bytes` is more than the memory available now (MemAvailable
// of /proc/meminfo): "WHAT would need 48.0 GiB of memory; 21.9 GiB are available".
void check_memory(const std::string& what, double bytes);

// attn::Error before any work when an array a command would write, of `numel` floats (a double: the
// product of the dims cannot overflow), cannot
// be: more than a .npy file may hold (kMaxNpyBytes), or more than the memory available for it
// and its .npy image. `what` names it in the message, e.g. "--weights (1, 16, 65536, 65536)".
void check_output_size(const std::string& what, double numel);

// Writes the output (and, when weights_path is not empty, the weights) as .npy files, "-"
// meaning standard output, and prints one line per file written (to stderr when an array
// goes to standard output).
void write_results(const std::string& out_path, const Tensor& output,
                   const std::string& weights_path, const Tensor& weights);

// Checks for numeric options that name the rule: "--heads: must be > 0, got 0" (CLI11's own
// PositiveNumber printed its range as "0.000000 to 1797693…" with 300 digits). --help shows
// them as POSITIVE and NONNEGATIVE. Text that is not a number passes them, for the option's
// conversion to report.
// Every one of them also refuses inf, nan and magnitudes of 2^63 or more.
CLI::Validator positive();
CLI::Validator non_negative();
CLI::Validator finite();
// Seeds: digits only (strtoull would take "-1" as 2^64 - 1), at most 2^64 - 1.
CLI::Validator unsigned_integer();
// A number for a message: whole numbers in full, the rest as %g writes them: ranges, report
// settings.
std::string number_text(double v);
// "1 layer", "4 layers": a count and its noun, plural but for one.
std::string count_text(int64_t n, const std::string& noun);
// "--dropout: must be in [0, 1), got 1"; --help shows the range.
CLI::Validator in_range(double lo, double hi, bool lo_open = false, bool hi_open = false);

// --causal-align bottom-right|top-left into options.causal_align.
void add_causal_align_option(CLI::App& command, std::string& align);

// --threads N (default: all cores); applied by apply_threads().
void add_threads_option(CLI::App& command, int& threads);
void apply_threads(int threads);

// --impl fused|reference (default fused), and the two paths behind it.
void add_impl_option(CLI::App& command, std::string& impl);
SdpaResult sdpa_with(const std::string& impl, const Tensor& q, const Tensor& k, const Tensor& v,
                     const SdpaOptions& options);
MhaResult mha_with(const std::string& impl, const Tensor& x, const Tensor& wq, const Tensor& wk,
                   const Tensor& wv, const Tensor& wo, int64_t heads, const SdpaOptions& options,
                   const MhaExtras& extras = {});

}  // namespace attn::cli
