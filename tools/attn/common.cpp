#include "common.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "attn/error.hpp"
#include "attn/files.hpp"
#include "attn/io.hpp"
#include "attn/threads.hpp"
#include "src/core/memory_limit.hpp"

namespace attn::cli {

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

namespace {

// One line on stderr when float64 input is computed in float32 (each file is read once).
void note_narrowing(const std::string& path, NpyDtype dtype) {
  if (dtype == NpyDtype::kFloat64) {
    std::fprintf(stderr, "attn: note: %s: float64 values narrowed to float32\n", path.c_str());
  }
}

}  // namespace

Tensor load_finite(const std::string& path) {
  NpyArray array = read_npy(path);
  ATTN_CHECK(array.dtype != NpyDtype::kBool, path, ": expected float data, got booleans");
  ATTN_CHECK(!is_integer(array.dtype), path, ": expected float data, got integers");
  note_narrowing(path, array.dtype);
  const float* values = array.values.data();
  for (int64_t i = 0; i < array.values.numel(); ++i) {
    ATTN_CHECK(std::isfinite(values[i]), path, ": holds a non-finite value (", values[i],
               ") at flat index ", i);
  }
  return array.values;
}

Mask load_mask(const std::string& path) {
  NpyArray array = read_npy(path);
  if (array.dtype == NpyDtype::kBool || is_integer(array.dtype)) {
    return Mask::allow(array.values);  // non-zero = allowed
  }
  note_narrowing(path, array.dtype);
  // Added to the scores: finite values or -inf (a hidden key); NaN or +inf would poison them.
  const float* values = array.values.data();
  for (int64_t i = 0; i < array.values.numel(); ++i) {
    ATTN_CHECK(std::isfinite(values[i]) || values[i] == -INFINITY, path,
               ": an additive mask holds ", values[i], " at flat index ", i,
               "; only finite values and -inf may be added to the scores");
  }
  return Mask::additive(array.values);
}

void write_output(const std::string& path, const std::string& bytes) {
  if (path != "-") {
    write_file_atomically(path, bytes);
    return;
  }
  ATTN_CHECK(std::fwrite(bytes.data(), 1, bytes.size(), stdout) == bytes.size() &&
                 std::fflush(stdout) == 0,
             "cannot write to standard output");
}

void check_one_stdout(const std::string& a, const std::string& b) {
  ATTN_CHECK(a != "-" || b != "-", "only one output can be '-' (standard output)");
}

void check_memory(const std::string& what, double bytes) {
  const std::optional<uint64_t> available = detail::available_memory_bytes();
  ATTN_CHECK(!available || bytes <= static_cast<double>(*available), what, " would need ",
             detail::gibibytes_text(bytes), " of memory; ",
             detail::gibibytes_text(static_cast<double>(available.value_or(0))), " are available");
}

void check_output_size(const std::string& what, double numel) {
  const double bytes = numel * sizeof(float);
  ATTN_CHECK(bytes <= static_cast<double>(kMaxNpyBytes), what, " would be ",
             detail::gibibytes_text(bytes), ", more than the ",
             detail::gibibytes_text(static_cast<double>(kMaxNpyBytes)),
             " a .npy file may hold here");
  check_memory(what + " (the array and its .npy image)", 2 * bytes);
}

void write_results(const std::string& out_path, const Tensor& output,
                   const std::string& weights_path, const Tensor& weights) {
  check_one_stdout(out_path, weights_path);
  // With an array on standard output, the lines that name what was written go to stderr.
  std::FILE* log = out_path == "-" || weights_path == "-" ? stderr : stdout;
  // The files all or none: a weights path that cannot be written leaves the output unwritten.
  std::vector<std::pair<std::string, std::string>> files;
  if (out_path != "-") files.emplace_back(out_path, npy_bytes(output));
  if (!weights_path.empty() && weights_path != "-")
    files.emplace_back(weights_path, npy_bytes(weights));
  write_files_atomically(files);
  if (out_path == "-") write_output(out_path, npy_bytes(output));
  if (weights_path == "-") write_output(weights_path, npy_bytes(weights));
  std::fprintf(log, "output %s -> %s\n", output.shape_string().c_str(),
               out_path == "-" ? "standard output" : out_path.c_str());
  if (weights_path.empty()) return;
  std::fprintf(log, "weights %s -> %s\n", weights.shape_string().c_str(),
               weights_path == "-" ? "standard output" : weights_path.c_str());
}

void read_chunks(const std::string& path, const std::function<void(std::string_view)>& consume) {
  std::optional<InputFile> input;  // closed however reading ends (consume may throw)
  if (path != "-") input.emplace(path);
  attn::read_chunks(input ? input->get() : stdin, path == "-" ? "standard input" : path, consume);
}

std::string read_input(const std::string& path, uint64_t max_bytes) {
  if (path != "-") return read_whole_file(path, max_bytes);
  std::string text;
  read_chunks(path, [&](std::string_view chunk) {
    text.append(chunk);
    ATTN_CHECK(text.size() <= max_bytes, "standard input: longer than the ",
               byte_count_text(max_bytes), " it may have here");
  });
  return text;
}

namespace {

// A number must be finite and below 2^63 in magnitude (beyond it, CLI11's integer conversion
// saturates silently), and satisfy `holds`.
CLI::Validator rule_check(const std::string& rule, const std::function<bool(double)>& holds,
                          std::string name) {
  return CLI::Validator(
      [rule, holds](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end != '\0') return "";  // the conversion reports it
        if (!std::isfinite(value)) return "must be a finite number, got " + text;
        if (std::fabs(value) >= 0x1p63) return "must be below 2^63, got " + text;
        return holds(value) ? "" : "must be " + rule + ", got " + text;
      },
      std::move(name));
}

}  // namespace

CLI::Validator positive() {
  return rule_check(
      "> 0", [](double v) { return v > 0; }, "POSITIVE");
}

CLI::Validator non_negative() {
  return rule_check(
      ">= 0", [](double v) { return v >= 0; }, "NONNEGATIVE");
}

CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool digits =
            !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
        errno = 0;
        if (digits) (void)std::strtoull(text.c_str(), nullptr, 10);
        if (digits && errno == 0) return "";
        return "must be a whole number from 0 to 2^64 - 1, got " + text;
      },
      "UINT");
}

CLI::Validator finite() {
  return rule_check(
      "finite", [](double) { return true; }, "FINITE");
}

std::string number_text(double v) {
  char text[32];
  // Whole numbers in full (1048576, not %g's 1.04858e+06), the rest in %g's short form.
  const bool whole = v == std::trunc(v) && std::fabs(v) < 0x1p53;
  std::snprintf(text, sizeof text, whole ? "%.0f" : "%g", v);
  return text;
}

std::string count_text(int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

CLI::Validator in_range(double lo, double hi, bool lo_open, bool hi_open) {
  const std::string range =
      (lo_open ? "(" : "[") + number_text(lo) + ", " + number_text(hi) + (hi_open ? ")" : "]");
  return rule_check(
      "in " + range,
      [=](double v) { return (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi); },
      range);
}

void add_causal_align_option(CLI::App& command, std::string& align) {
  command
      .add_option("--causal-align", align,
                  "where queries sit for --causal/--window when Tq != Tk: bottom-right (query i "
                  "at Tk-Tq+i, so the last query sees every key; what a KV cache needs) or "
                  "top-left (query i at i: PyTorch's is_causal, torch.tril)")
      ->check(CLI::IsMember({"bottom-right", "top-left"}))
      ->capture_default_str();
}

void add_threads_option(CLI::App& command, int& threads) {
  command.add_option("--threads", threads, "threads to use (default: all cores)")
      ->check(in_range(1, kMaxThreads));
}

void apply_threads(int threads) { set_num_threads(threads); }

void add_impl_option(CLI::App& command, std::string& impl) {
  command
      .add_option("--impl", impl,
                  "attention path: fused (the fast kernel) or reference (the readable loops)")
      ->check(CLI::IsMember({"fused", "reference"}))
      ->capture_default_str();
}

SdpaResult sdpa_with(const std::string& impl, const Tensor& q, const Tensor& k, const Tensor& v,
                     const SdpaOptions& options) {
  return impl == "reference" ? reference::sdpa(q, k, v, options) : sdpa(q, k, v, options);
}

MhaResult mha_with(const std::string& impl, const Tensor& x, const Tensor& wq, const Tensor& wk,
                   const Tensor& wv, const Tensor& wo, int64_t heads, const SdpaOptions& options,
                   const MhaExtras& extras) {
  if (impl == "reference")
    return reference::multi_head_attention(x, wq, wk, wv, wo, heads, options, extras);
  return multi_head_attention(x, wq, wk, wv, wo, heads, options, extras);
}

}  // namespace attn::cli
