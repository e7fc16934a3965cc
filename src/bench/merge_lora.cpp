// merge-lora's figures for `reshard bench export`: the merge itself (W += B @ A
// * scaling on row blocks, in memory) and the whole command (files in, files
// out), each beside a memcpy of the same weights measured in the same run.
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <span>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_report.h"
#include "bench/rotating_rounds.h"
#include "formats/hf_folder_writer.h"
#include "pipelines/lora/merge_box.h"
#include "reshard/formats/safetensors_layout.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/lora_config.h"
#include "reshard/pipelines/merge_lora.h"
#include "reshard/pipelines/peft_adapter.h"

namespace reshard::bench {

using formats_detail::write_produced_file;
using pipelines_detail::LoraDelta;
using pipelines_detail::LoraFactor;
using pipelines_detail::merge_lora_box;

namespace {

namespace fs = std::filesystem;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// 256 MiB of f32 weights as 32 tensors of [2048, 1024], LoRA rank 8 (hf-peft.md's
// example) on every one. In memory, 8 distinct weights (64 MiB, past any
// cache) are gone through 4 times.
constexpr int kWeights = 32;
constexpr int kDistinct = 8;
constexpr int64_t kRows = 2048;
constexpr int64_t kCols = 1024;
constexpr int64_t kRank = 8;
constexpr size_t kWeightBytes = static_cast<size_t>(kRows * kCols) * sizeof(float);
constexpr size_t kBlockBytes = size_t{8} << 20;  // what merge-lora merges at a time
constexpr int kRepetitions = 3;
constexpr int kWallRounds = 4;  // the command beside the plain copy, in turns

double thread_cpu_seconds() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// Best of a few runs in this thread's CPU time: on a shared machine, wall time
// mostly measures the other processes; both sides are single-threaded work.
template <typename F>
double best_seconds(F&& f) {
  double best = 1e30;
  for (int i = 0; i < kRepetitions; ++i) {
    const double start = thread_cpu_seconds();
    f();
    best = std::min(best, thread_cpu_seconds() - start);
  }
  return best;
}

template <typename F>
double wall_seconds(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 0.02f);
  std::vector<float> values(n);
  for (float& v : values) v = dist(rng);
  return values;
}

class Scratch {
 public:
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "reshard-bench-merge-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw Error(ErrorCode::kIo, "bench export: cannot create a scratch folder");
    path_ = pattern;
  }
  ~Scratch() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

constexpr size_t kWeightFloats = kWeightBytes / sizeof(float);

// memcpy of every weight into an output of its own.
double memcpy_seconds(const std::vector<float>& w, std::vector<float>& out) {
  return best_seconds([&] {
    for (int t = 0; t < kWeights; ++t) {
      const size_t at = static_cast<size_t>(t % kDistinct) * kWeightFloats;
      std::memcpy(out.data() + at, w.data() + at, kWeightBytes);
    }
  });
}

// The merge on the same blocks merge-lora uses, memory to memory.
double merge_seconds(const LoraDelta& delta, const std::vector<float>& w, std::vector<float>& out) {
  const int64_t block_rows = static_cast<int64_t>(kBlockBytes / (kCols * sizeof(float)));
  return best_seconds([&] {
    for (int t = 0; t < kWeights; ++t) {
      const size_t at = static_cast<size_t>(t % kDistinct) * kWeightFloats;
      const auto w_bytes = std::as_bytes(std::span(w).subspan(at, kWeightFloats));
      const auto out_bytes = std::as_writable_bytes(std::span(out).subspan(at, kWeightFloats));
      for (int64_t row = 0; row < kRows; row += block_rows) {
        const int64_t count = std::min(block_rows, kRows - row);
        const size_t offset = static_cast<size_t>(row * kCols) * sizeof(float);
        const size_t size = static_cast<size_t>(count * kCols) * sizeof(float);
        merge_lora_box(delta, Box({row, 0}, {count, kCols}), DType::kF32, w_bytes.subspan(offset, size), DType::kF32,
                       out_bytes.subspan(offset, size));
      }
    }
  });
}

// The I/O floor of the command: read the base file and write its bytes to a
// new file with plain read/write calls, then fsync.
void copy_plainly(const fs::path& from, const fs::path& to) {
  const int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC);
  const int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (in < 0 || out < 0) throw Error(ErrorCode::kIo, "bench export: cannot open the copy's files");
  std::vector<char> buffer(kBlockBytes);
  bool ok = true;
  while (ok) {
    const ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n <= 0) {
      ok = n == 0;
      break;
    }
    ok = ::write(out, buffer.data(), static_cast<size_t>(n)) == n;
  }
  ok = ::fsync(out) == 0 && ok;
  ::close(in);
  ::close(out);
  if (!ok) throw Error(ErrorCode::kIo, "bench export: the plain copy failed");
}

void write_model(const fs::path& base, const fs::path& adapter, const std::vector<float>& w,
                 const std::vector<float>& a, const std::vector<float>& b) {
  std::vector<safetensors::TensorSpec> weights, factors;
  for (int i = 0; i < kWeights; ++i) {
    const std::string module = fmt::format("model.layers.{}.mlp.up_proj", i);
    weights.push_back({module + ".weight", DType::kF32, {kRows, kCols}});
    factors.push_back({adapter_key(module, AdapterKey::Factor::kA), DType::kF32, {kRank, kCols}});
    factors.push_back({adapter_key(module, AdapterKey::Factor::kB), DType::kF32, {kRows, kRank}});
  }
  fs::create_directories(base);
  write_produced_file(base / "model.safetensors", safetensors::FileLayout::plan(weights),
                      [&](const safetensors::TensorInfo&, const ByteSink& sink) {
                        sink(std::as_bytes(std::span(w).first(kWeightFloats)));
                      });
  LoraConfig config;
  config.r = kRank;
  config.lora_alpha = 32;
  config.target_modules = {"up_proj"};
  write_peft_adapter(config, factors, [&](const safetensors::TensorInfo& tensor, const ByteSink& sink) {
    sink(std::as_bytes(std::span(tensor.name.ends_with("lora_A.weight") ? a : b)));
  }, adapter);
}

}  // namespace

std::vector<BenchFigure> merge_lora_figures() {
  std::mt19937 rng(7);
  const std::vector<float> w = random_floats(kWeightFloats * kDistinct, rng);
  const std::vector<float> a = random_floats(static_cast<size_t>(kRank * kCols), rng);
  const std::vector<float> b = random_floats(static_cast<size_t>(kRows * kRank), rng);
  std::vector<float> out(w.size());
  const LoraDelta delta{LoraFactor::in_memory(DType::kF32, {kRank, kCols}, std::as_bytes(std::span(a))),
                        LoraFactor::in_memory(DType::kF32, {kRows, kRank}, std::as_bytes(std::span(b))), 2.0f, false};
  const double total_gib = static_cast<double>(kWeightBytes) * kWeights / kGiB;
  const double copy = total_gib / memcpy_seconds(w, out);
  const double merge = total_gib / merge_seconds(delta, w, out);

  Scratch scratch;
  write_model(scratch.path() / "base", scratch.path() / "adapter", w, a, b);
  MergeLoraOptions options;
  options.replace = true;
  // Taking turns: the disk's pace drifts (writeback of the run before, other
  // work on the machine), and a fixed order hands the drift to one side.
  const std::vector<std::function<double()>> runs{
      [&] {
        return wall_seconds([&] {
          merge_lora_folder(scratch.path() / "base", scratch.path() / "adapter", scratch.path() / "merged", options);
        });
      },
      [&] {
        return wall_seconds(
            [&] { copy_plainly(scratch.path() / "base" / "model.safetensors", scratch.path() / "copy.bin"); });
      }};
  const std::vector<double> least = least_seconds_in_rotating_rounds(runs, kWallRounds);
  const double command = total_gib / least[0];
  const double plain = total_gib / least[1];
  const std::string label = fmt::format("{} MiB f32, r={}", static_cast<int>(total_gib * 1024), kRank);
  return {
      throughput_figure("merge-lora merge (CPU time), " + label, merge, "memcpy of the weights (CPU time)", copy, 0.5),
      throughput_figure("merge-lora command (wall, files, fsync), " + label, command,
                        "read + write + fsync of the base file (wall)", plain, 0.8),
  };
}

}  // namespace reshard::bench
