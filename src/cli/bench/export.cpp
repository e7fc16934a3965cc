// `reshard bench export`: the export figures of the issue. merge-lora's come
// from src/cli/bench/merge_lora.cpp; the sharded export's join them here.
#include "cli/bench_report.h"

namespace reshard::cli {

std::vector<BenchFigure> merge_lora_figures();  // src/cli/bench/merge_lora.cpp

BenchReport run_export_benchmark() {
  BenchReport report;
  report.benchmark = "export";
  for (BenchFigure& figure : merge_lora_figures()) report.figures.push_back(std::move(figure));
  return report;
}

}  // namespace reshard::cli
