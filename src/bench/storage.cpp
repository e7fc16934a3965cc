// `reshard bench storage`: a checkpoint exported to a local S3 server by 4
// processes beside boto3's multipart upload of the same files, the Levanter
// way (whole model on every process, process 0 writes and uploads) and a
// local export. The orchestration is python/bench/bench_storage.py (it
// starts the server, launches the mpirun jobs and the boto3 processes, and
// measures every process's peak memory); this runs it with the project's
// Python environment and this binary, and reads back its figures.
//
// RESHARD_BENCH_STORAGE_ARGS passes arguments to the script (e.g. "--mib 32
// --tensors 30 --repeat 1"); RESHARD_PYTHON names the interpreter (default:
// the repository's .venv/bin/python); RESHARD_BENCH_STORAGE_SCRIPT the script.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_report.h"
#include "job/job.h"
#include "reshard/layout/error.h"

namespace reshard::bench {

using job::job_world;

namespace {

namespace fs = std::filesystem;

constexpr const char* kScript = "python/bench/bench_storage.py";

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// The script: $RESHARD_BENCH_STORAGE_SCRIPT, or python/bench/bench_storage.py
// in the working directory or a folder above this binary (a build folder
// inside the repository).
fs::path find_script() {
  if (const std::string given = env_or_empty("RESHARD_BENCH_STORAGE_SCRIPT"); !given.empty()) {
    if (!fs::is_regular_file(given)) {
      throw Error(ErrorCode::kIo, fmt::format("bench storage: RESHARD_BENCH_STORAGE_SCRIPT={}: no such file", given));
    }
    return fs::absolute(given);
  }
  std::vector<fs::path> candidates = {fs::current_path() / kScript};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
      candidates.push_back(dir / kScript);
    }
  }
  for (const fs::path& candidate : candidates) {
    if (fs::is_regular_file(candidate, ec)) return candidate;
  }
  throw Error(ErrorCode::kIo,
              fmt::format("bench storage: {} not found in the working directory or above {} (it needs the source "
                          "tree; set RESHARD_BENCH_STORAGE_SCRIPT to its path)",
                          kScript, exe.parent_path().string()));
}

// $RESHARD_PYTHON, or the repository's .venv/bin/python (which has boto3,
// safetensors, numpy and the S3 server's binary).
fs::path find_python(const fs::path& script) {
  if (const std::string given = env_or_empty("RESHARD_PYTHON"); !given.empty()) return given;
  const fs::path venv = script.parent_path().parent_path().parent_path() / ".venv" / "bin" / "python";
  if (!fs::exists(venv)) {
    throw Error(ErrorCode::kIo, fmt::format("bench storage: the project's Python environment is missing: no {} (run "
                                            "scripts/install-python-deps.sh, or set RESHARD_PYTHON to a Python with "
                                            "boto3, safetensors and numpy)",
                                            venv.string()));
  }
  return venv;
}

std::string quoted(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs the script with --json (its progress goes to stderr as it runs) and
// returns its JSON document.
nlohmann::json run_script() {
  const fs::path script = find_script();
  const fs::path python = find_python(script);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(ErrorCode::kIo, "bench storage: cannot tell where this binary is (/proc/self/exe)");
  // Extra arguments are split by the shell, as typed.
  const std::string command = fmt::format("{} {} --json --reshard {} {}", quoted(python.string()),
                                          quoted(script.string()), quoted(exe.string()),
                                          env_or_empty("RESHARD_BENCH_STORAGE_ARGS"));
  std::fflush(nullptr);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw Error(ErrorCode::kIo, fmt::format("bench storage: cannot run {}", command));
  std::string output;
  char chunk[4096];
  for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, pipe)) > 0;) output.append(chunk, n);
  const int status = ::pclose(pipe);
  if (status != 0) {
    throw Error(ErrorCode::kIo, fmt::format("bench storage: {} failed (exit status {}); its messages are above",
                                            command, WIFEXITED(status) ? WEXITSTATUS(status) : status));
  }
  nlohmann::json result = nlohmann::json::parse(output, nullptr, false);
  if (result.is_discarded() || !result.is_array() || result.empty() || !result[0].contains("figures")) {
    throw Error(ErrorCode::kInvalidFile, fmt::format("bench storage: {} printed no report", script.string()));
  }
  return result[0];
}

std::optional<double> optional_number(const nlohmann::json& value) {
  if (value.is_null()) return std::nullopt;
  return value.get<double>();
}

}  // namespace

BenchReport run_storage_benchmark() {
  BenchReport report{"storage", {}};
  // The script launches its own processes (mpirun among them): under mpirun
  // this is skipped rather than run once per process.
  if (job_world().size > 1) {
    if (job_world().rank == 0) std::cerr << "bench storage: skipped under mpirun (it starts its own processes)\n";
    return report;
  }
  const nlohmann::json result = run_script();
  for (const nlohmann::json& f : result.at("figures")) {
    BenchFigure figure;
    figure.name = f.at("name").get<std::string>();
    figure.unit = f.at("unit").get<std::string>();
    figure.value = f.at("value").get<double>();
    figure.baseline_name = f.at("baseline_name").get<std::string>();
    figure.baseline = f.at("baseline").get<double>();
    figure.ratio = f.at("ratio").get<double>();
    figure.target_ratio = optional_number(f.at("target_ratio"));
    figure.target_value = optional_number(f.at("target_value"));
    figure.higher_is_better = f.value("higher_is_better", true);
    report.figures.push_back(std::move(figure));
  }
  return report;
}

}  // namespace reshard::bench
