#include "reshard/cli/benchmarks.h"

namespace reshard::cli {

BenchReport run_reshard_benchmark();  // src/cli/bench/reshard.cpp
BenchReport run_io_benchmark();       // src/cli/bench/io.cpp
BenchReport run_plan_benchmark();     // src/cli/bench/plan.cpp

std::vector<BenchmarkEntry> all_benchmarks() {
  std::vector<BenchmarkEntry> entries;
  entries.push_back({"reshard", "a 1 GiB reshard between two layouts beside memcpy, 2 threads", run_reshard_benchmark});
  entries.push_back({"io", "safetensors: write 2 GiB, open 10,000 tensors, read every tensor, beside plain system calls",
                     run_io_benchmark});
  entries.push_back({"plan", "plan time: 1 tensor over 4096 devices, a 1000-tensor model over 256, beside all-pairs",
                     run_plan_benchmark});
  return entries;
}

}  // namespace reshard::cli
