#include "src/core/memory_limit.hpp"

#include <unistd.h>

#include <cstdio>
#include <limits>
#include <string>

#include "attn/error.hpp"

namespace attn::detail {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double physical_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<double>::infinity();  // unknown
  return static_cast<double>(pages) * static_cast<double>(page);
}

}  // namespace

std::optional<uint64_t> available_memory_bytes() {
  std::FILE* meminfo = std::fopen("/proc/meminfo", "r");
  if (meminfo == nullptr) return std::nullopt;
  char line[256];
  std::optional<uint64_t> bytes;
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, meminfo) != nullptr) {
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) bytes = uint64_t{kib} << 10;
  }
  std::fclose(meminfo);
  return bytes;
}

std::string gibibytes_text(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / kGiB);
  return text;
}

void check_fits_in_memory(double floats, const std::string& what) {
  const double bytes = floats * sizeof(float);
  if (bytes <= kGiB) return;
  // Where MemAvailable cannot be read, the machine's physical memory is the bound.
  const std::optional<uint64_t> read = available_memory_bytes();
  const double available = read ? static_cast<double>(*read) : physical_bytes();
  ATTN_CHECK(bytes <= available, what, " needs ", gibibytes_text(bytes),
             ", more than this machine has available (", gibibytes_text(available), " of ",
             gibibytes_text(physical_bytes()), ")");
}

void check_fits_in_memory(const Shape& shape, const char* what) {
  double floats = 1;  // a double: a product of int64 dims cannot wrap here
  for (const int64_t d : shape) floats *= static_cast<double>(d);
  // The message is only built for a size worth checking: every small call passes here.
  if (floats * sizeof(float) <= kGiB) return;
  check_fits_in_memory(floats, std::string(what) + " " + to_string(shape));
}

}  // namespace attn::detail
