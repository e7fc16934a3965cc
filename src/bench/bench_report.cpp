#include "bench/bench_report.h"

namespace reshard::bench {

bool BenchFigure::met() const {
  if (target_ratio && ratio < *target_ratio) return false;
  if (target_value) return higher_is_better ? value >= *target_value : value <= *target_value;
  return true;
}

BenchFigure throughput_figure(std::string name, double value, std::string baseline_name,
                              double baseline, std::optional<double> target_ratio) {
  BenchFigure f;
  f.name = std::move(name);
  f.unit = "GiB/s";
  f.value = value;
  f.baseline_name = std::move(baseline_name);
  f.baseline = baseline;
  f.ratio = baseline > 0 ? value / baseline : 0;
  f.target_ratio = target_ratio;
  return f;
}

BenchFigure time_figure(std::string name, double value_ms, std::string baseline_name,
                        double baseline_ms, std::optional<double> target_ms) {
  BenchFigure f;
  f.name = std::move(name);
  f.unit = "ms";
  f.value = value_ms;
  f.baseline_name = std::move(baseline_name);
  f.baseline = baseline_ms;
  f.ratio = value_ms > 0 ? baseline_ms / value_ms : 0;
  f.target_value = target_ms;
  f.higher_is_better = false;
  return f;
}

BenchFigure bytes_figure(std::string name, uint64_t value_bytes, std::string baseline_name, uint64_t baseline_bytes) {
  constexpr double kMiB = 1 << 20;
  BenchFigure f;
  f.name = std::move(name);
  f.unit = "MiB";
  f.value = static_cast<double>(value_bytes) / kMiB;
  f.baseline_name = std::move(baseline_name);
  f.baseline = static_cast<double>(baseline_bytes) / kMiB;
  f.ratio = f.value > 0 ? f.baseline / f.value : 0;
  f.higher_is_better = false;
  return f;
}

}  // namespace reshard::bench
