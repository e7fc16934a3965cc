#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/benchmarks.h"
#include "cli/commands.h"
#include "cli/job_options.h"
#include "job/job.h"
#include "reshard/layout/error.h"

namespace reshard::cli {

using job::job_world;

namespace {

using bench::BenchFigure;
using bench::BenchReport;

nlohmann::json figure_json(const BenchFigure& f) {
  nlohmann::json j = {{"name", f.name},         {"unit", f.unit},         {"value", f.value},
                      {"baseline_name", f.baseline_name}, {"baseline", f.baseline}, {"ratio", f.ratio},
                      {"met", f.met()}};
  j["target_ratio"] = f.target_ratio ? nlohmann::json(*f.target_ratio) : nlohmann::json(nullptr);
  j["target_value"] = f.target_value ? nlohmann::json(*f.target_value) : nlohmann::json(nullptr);
  return j;
}

void print_report(const BenchReport& report) {
  std::cout << fmt::format("== bench {} ==\n", report.benchmark);
  for (const BenchFigure& f : report.figures) {
    std::string target;
    if (f.target_ratio) target = fmt::format("  target ratio >= {:.2f}", *f.target_ratio);
    if (f.target_value) {
      target += fmt::format("  target {} {:.3g} {}", f.higher_is_better ? ">=" : "<=", *f.target_value, f.unit);
    }
    std::cout << fmt::format("  {:<44} {:>10.3f} {:<6} | {:<34} {:>10.3f} | ratio {:6.3f}{}{}\n", f.name,
                             f.value, f.unit, f.baseline_name, f.baseline, f.ratio, target,
                             f.met() ? "" : "  (NOT MET)");
  }
  std::cout.flush();
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "bench",
      "Run the built-in benchmarks, each beside a baseline measured in the same run.\n"
      "Examples:\n  reshard bench reshard\n  reshard bench all --json");
  auto which = std::make_shared<std::string>("all");
  auto json = std::make_shared<bool>(false);
  cmd->add_option("benchmark", *which, "reshard, plan, io, checkpoint, export, storage or all")->capture_default_str();
  cmd->add_flag("--json", *json, "Print one JSON document on stdout");
  add_timeout_option(*cmd);
  cmd->callback([which, json] {
    // Under mpirun every rank runs the benchmarks together; rank 0 reports.
    const bool reports = job_world().rank == 0;
    nlohmann::json out = nlohmann::json::array();
    bool found = false;
    for (const bench::BenchmarkEntry& entry : bench::all_benchmarks()) {
      if (*which != "all" && *which != entry.name) continue;
      found = true;
      if (reports) std::cerr << fmt::format("bench {}: {}\n", entry.name, entry.description);
      const BenchReport report = entry.run();
      if (!reports) continue;
      if (*json) {
        nlohmann::json figures = nlohmann::json::array();
        for (const BenchFigure& f : report.figures) figures.push_back(figure_json(f));
        out.push_back({{"benchmark", report.benchmark}, {"figures", figures}});
      } else {
        print_report(report);
      }
    }
    if (!found) throw Error(ErrorCode::kParse, fmt::format("unknown benchmark '{}'", *which));
    if (*json && reports) std::cout << out.dump(2) << "\n";
  });
}

}  // namespace reshard::cli
