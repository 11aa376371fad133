#include "src/core/memory_limit.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <limits>
#include <string>

#include "attn/error.hpp"

namespace attn::detail {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

std::string gibibytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / kGiB);
  return text;
}

double physical_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::numeric_limits<double>::infinity();  // unknown
  return static_cast<double>(pages) * static_cast<double>(page);
}

// MemAvailable: what the kernel estimates can be allocated without swapping; the physical
// size where /proc/meminfo says nothing (not Linux, or an old kernel).
double available_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  double kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024.0;
  }
  return physical_bytes();
}

}  // namespace

void check_fits_in_memory(double floats, const std::string& what) {
  const double bytes = floats * sizeof(float);
  if (bytes <= kGiB) return;
  const double available = available_bytes();
  ATTN_CHECK(bytes <= available, what, " needs ", gibibytes(bytes),
             ", more than this machine has available (", gibibytes(available), " of ",
             gibibytes(physical_bytes()), ")");
}

void check_fits_in_memory(const Shape& shape, const char* what) {
  double floats = 1;  // a double: a product of int64 dims cannot wrap here
  for (const int64_t d : shape) floats *= static_cast<double>(d);
  check_fits_in_memory(floats, std::string(what) + " " + to_string(shape));
}

}  // namespace attn::detail
