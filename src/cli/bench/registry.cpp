#include "reshard/cli/benchmarks.h"

namespace reshard::cli {

std::vector<BenchmarkEntry> all_benchmarks() {
  std::vector<BenchmarkEntry> entries;
  return entries;
}

}  // namespace reshard::cli
