// metrics.csv (metrics_csv.hpp).
#include "src/train/metrics_csv.hpp"

#include <cstdlib>
#include <filesystem>

#include "attn/error.hpp"
#include "attn/files.hpp"

namespace attn::detail {

MetricsCsv::MetricsCsv(const std::string& path, bool append)
    : out_(path, append ? std::ios::app : std::ios::trunc) {
  ATTN_CHECK(out_.good(), "cannot write ", path);
  if (!append) out_ << "iter,train_loss,val_loss,lr,ms_per_iter,tokens_per_s\n";
}

void MetricsCsv::step(const StepResult& r, double ms, double tokens_per_s) {
  out_ << r.iter << ',' << r.loss << ",," << r.lr << ',' << ms << ',' << tokens_per_s << '\n';
  out_.flush();
}

void MetricsCsv::evaluation(int64_t iter, const EvalResult& e, float lr) {
  out_ << iter << ',' << e.train_loss << ',' << e.val_loss << ',' << lr << ",,\n";
  out_.flush();
}

void truncate_metrics(const std::string& path, int64_t iteration, bool evaluates_again) {
  if (!std::filesystem::exists(path)) return;
  std::ifstream in(path);
  std::string kept, line;
  for (bool header = true; std::getline(in, line); header = false) {
    const long long iter = header ? -1 : std::strtoll(line.c_str(), nullptr, 10);
    const bool evaluation = line.ends_with(",,");  // its timing columns are empty
    if (header || iter < iteration || (iter == iteration && evaluation && !evaluates_again)) {
      kept += line + '\n';
    }
  }
  write_file_atomically(path, kept);
}

}  // namespace attn::detail
