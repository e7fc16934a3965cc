// The built-in benchmarks of `reshard bench`, one function per benchmark.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "bench/bench_report.h"

namespace reshard::bench {

struct BenchmarkEntry {
  std::string name;                       // "reshard", "plan", "io", "export"
  std::string description;
  std::function<BenchReport()> run;
};

// Every benchmark, in the order `reshard bench all` runs them. Each lives in
// src/bench/<name>.cpp and is listed in src/bench/registry.cpp.
std::vector<BenchmarkEntry> all_benchmarks();

}  // namespace reshard::bench
