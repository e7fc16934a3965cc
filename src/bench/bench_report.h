// A benchmark's result: each figure beside its baseline from the same run.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace reshard::bench {

// One measured figure and the baseline it is judged against.
struct BenchFigure {
  std::string name;            // "reshard 1 GiB, 2 threads"
  std::string unit;            // "GiB/s", "ms", "bytes"
  double value = 0;            // what reshard achieved
  std::string baseline_name;   // "memcpy, 2 threads"
  double baseline = 0;         // the baseline, same unit, same run
  // value / baseline for throughputs, baseline / value for times: >1 is better.
  double ratio = 0;
  std::optional<double> target_ratio;  // the target, if any (ratio >= target)
  std::optional<double> target_value;  // an absolute target (e.g. at most 2 ms)
  bool higher_is_better = true;        // for target_value
  bool met() const;
};

struct BenchReport {
  std::string benchmark;  // "reshard", "plan", "io", "export"
  std::vector<BenchFigure> figures;
};

// Figures for throughput (value / baseline), for time (baseline / value) and
// for bytes moved, in MiB (baseline / value: fewer bytes is better).
BenchFigure throughput_figure(std::string name, double value, std::string baseline_name,
                              double baseline, std::optional<double> target_ratio);
BenchFigure time_figure(std::string name, double value_ms, std::string baseline_name,
                        double baseline_ms, std::optional<double> target_ms);
BenchFigure bytes_figure(std::string name, uint64_t value_bytes, std::string baseline_name, uint64_t baseline_bytes);

}  // namespace reshard::bench
