// `reshard bench io`: safetensors writing, opening and reading, each beside the
// same work done with plain system calls in the same run (and torch.save /
// torch.load where python3-torch is installed).
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/bench_report.h"
#include "reshard/formats/safetensors_reader.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/layout/error.h"

namespace reshard::bench {
namespace {

namespace fs = std::filesystem;
using safetensors::FileLayout;
using safetensors::TensorSpec;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
// 2 GiB as 64 f32 tensors of [4096, 2048] (32 MiB each), a mid-sized model's layers.
constexpr int kBigTensors = 64;
constexpr int64_t kRows = 4096;
constexpr int64_t kCols = 2048;
constexpr size_t kTensorBytes = static_cast<size_t>(kRows * kCols) * sizeof(float);
// The header-heavy file: 10,000 small tensors.
constexpr int kManyTensors = 10'000;
constexpr int kOpenRepetitions = 30;
constexpr int kReadRepetitions = 3;
constexpr int kWriteRepetitions = 3;

template <typename F>
double seconds_of(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

[[noreturn]] void io_failed(const fs::path& path, std::string_view what) {
  throw Error(ErrorCode::kIo, fmt::format("bench io: {} {}: {}", what, path.string(), std::strerror(errno)));
}

// A scratch folder under TMPDIR, removed with everything in it.
class ScratchFolder {
 public:
  ScratchFolder() {
    std::string pattern = (fs::temp_directory_path() / "reshard-bench-io-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) io_failed(pattern, "creating");
    path_ = pattern;
  }
  ~ScratchFolder() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const fs::path& path() const { return path_; }
  fs::path operator/(std::string_view name) const { return path_ / name; }

 private:
  fs::path path_;
};

// A file descriptor closed on scope exit.
class Fd {
 public:
  Fd(const fs::path& path, int flags) : fd_(::open(path.c_str(), flags | O_CLOEXEC, 0644)) {
    if (fd_ < 0) io_failed(path, "opening");
  }
  ~Fd() { ::close(fd_); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

void write_all(int fd, const char* data, size_t size, const fs::path& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) io_failed(path, "writing");
    data += n;
    size -= static_cast<size_t>(n);
  }
}

std::vector<TensorSpec> big_tensor_specs() {
  std::vector<TensorSpec> specs;
  for (int i = 0; i < kBigTensors; ++i) {
    specs.push_back({fmt::format("model.layers.{}.mlp.up_proj.weight", i), DType::kF32, {kRows, kCols}});
  }
  return specs;
}

// The baseline: the writer's exact bytes, with write() and one fsync.
void write_plainly(const fs::path& path, const FileLayout& layout, std::span<const std::byte> tensor) {
  const Fd fd(path, O_WRONLY | O_CREAT | O_TRUNC);
  write_all(fd.get(), layout.header_bytes().data(), layout.header_bytes().size(), path);
  for (int i = 0; i < kBigTensors; ++i) {
    write_all(fd.get(), reinterpret_cast<const char*>(tensor.data()), tensor.size(), path);
  }
  if (::fsync(fd.get()) != 0) io_failed(path, "syncing");
}

void write_streaming(const fs::path& path, const FileLayout& layout, std::span<const std::byte> tensor) {
  safetensors::StreamWriter writer(path, layout);
  for (const safetensors::TensorInfo& info : layout.header().tensors()) writer.write_tensor(info.name, tensor);
  writer.commit();
}

void write_positionally(const fs::path& path, const FileLayout& layout, std::span<const std::byte> tensor) {
  safetensors::PositionalWriter writer = safetensors::PositionalWriter::create(path, layout);
  const auto tensors = layout.header().tensors();
  const auto write_half = [&](size_t first) {
    for (size_t i = first; i < tensors.size(); i += 2) writer.write(tensors[i].name, 0, tensor);
  };
  {
    std::jthread other(write_half, 1);
    write_half(0);
  }
  writer.sync();
  writer.commit();
}

// Writes 2 GiB three ways; leaves the streamed file at `path` for the read figures.
void add_write_figures(BenchReport& report, const fs::path& path) {
  const FileLayout layout = FileLayout::plan(big_tensor_specs());
  const std::vector<std::byte> tensor(kTensorBytes, std::byte{0x3f});
  const double gib = static_cast<double>(layout.file_size()) / kGiB;

  // Interleaved in rotating order, best of each: the disk's speed drifts, and
  // whichever runs first in a round must not always pay for it.
  const fs::path plain = path.parent_path() / "plain.bin";
  const fs::path positional = path.parent_path() / "positional.safetensors";
  const std::array<fs::path, 3> outputs = {plain, positional, path};
  const std::array<std::function<void()>, 3> runs = {
      [&] { write_plainly(plain, layout, tensor); },
      [&] { write_positionally(positional, layout, tensor); },
      [&] { write_streaming(path, layout, tensor); },
  };
  std::array<double, 3> best = {1e30, 1e30, 1e30};
  for (int round = 0; round < kWriteRepetitions; ++round) {
    for (size_t k = 0; k < runs.size(); ++k) {
      const size_t which = (k + static_cast<size_t>(round)) % runs.size();
      std::error_code ignored;
      fs::remove(outputs[which], ignored);
      best[which] = std::min(best[which], seconds_of(runs[which]));
    }
  }
  fs::remove(plain);
  fs::remove(positional);  // the streamed file stays for the read figures
  const double plain_s = best[0], positional_s = best[1], stream_s = best[2];

  const std::string baseline = "write() + fsync, same bytes";
  report.figures.push_back(
      throughput_figure("write 2 GiB, stream writer + commit", gib / stream_s, baseline, gib / plain_s, 0.9));
  report.figures.push_back(throughput_figure("write 2 GiB, positional writer, 2 threads", gib / positional_s,
                                             baseline, gib / plain_s, std::nullopt));
}

// Reads every tensor of the 2 GiB file, beside read() of the whole file, page cache warm.
void add_read_figures(BenchReport& report, const fs::path& path) {
  std::vector<std::byte> buffer(kTensorBytes);
  const double gib = static_cast<double>(fs::file_size(path)) / kGiB;
  const auto read_plainly = [&] {
    const Fd fd(path, O_RDONLY);
    while (true) {
      const ssize_t n = ::read(fd.get(), buffer.data(), buffer.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) io_failed(path, "reading");
      if (n == 0) break;
    }
  };
  const auto read_tensors = [&](safetensors::ReadMode mode) {
    const auto file = safetensors::File::open(path, mode);
    for (const safetensors::TensorInfo& info : file.tensors()) file.read(info, buffer);
  };
  std::array<double, 3> best = {1e30, 1e30, 1e30};  // read(), pread, mmap
  const std::array<std::function<void()>, 3> runs = {
      read_plainly,
      [&] { read_tensors(safetensors::ReadMode::kPread); },
      [&] { read_tensors(safetensors::ReadMode::kMmap); },
  };
  for (int round = 0; round < kReadRepetitions; ++round) {
    for (size_t k = 0; k < runs.size(); ++k) {
      const size_t which = (k + static_cast<size_t>(round)) % runs.size();
      best[which] = std::min(best[which], seconds_of(runs[which]));
    }
  }
  const double plain_s = best[0], pread_s = best[1], mmap_s = best[2];
  const std::string baseline = "read() of the whole file";
  report.figures.push_back(
      throughput_figure("read every tensor, pread (open included)", gib / pread_s, baseline, gib / plain_s, std::nullopt));
  report.figures.push_back(throughput_figure("read every tensor, mmap copy-out (open incl.)", gib / mmap_s, baseline,
                                             gib / plain_s, std::nullopt));
}

// Opens and validates a file of 10,000 tensors, beside reading its header bytes.
void add_open_figures(BenchReport& report, const fs::path& path) {
  std::vector<TensorSpec> specs;
  for (int i = 0; i < kManyTensors; ++i) {
    specs.push_back({fmt::format("model.layers.{}.block.{}.weight", i / 10, i % 10), DType::kBF16, {4, 4}});
  }
  const std::vector<std::byte> tensor(32);
  std::vector<safetensors::TensorData> data;
  for (const TensorSpec& spec : specs) data.push_back({spec, tensor});
  safetensors::write_file(path, data);
  const uint64_t header_bytes = FileLayout::plan(specs).header().data_start();

  std::string header(header_bytes, '\0');
  const auto read_header = [&] {
    const Fd fd(path, O_RDONLY);
    if (::pread(fd.get(), header.data(), header.size(), 0) != static_cast<ssize_t>(header.size())) {
      io_failed(path, "reading");
    }
  };
  // Each kind in its own series: interleaving them lets one kind's freed memory
  // decide the next one's page faults.
  const auto series_ms = [](const auto& action) {
    std::vector<double> ms;
    for (int i = 0; i < kOpenRepetitions; ++i) ms.push_back(seconds_of(action) * 1e3);
    return ms;
  };
  const std::vector<double> plain = series_ms(read_header);
  const std::vector<double> mapped = series_ms([&] { safetensors::File::open(path, safetensors::ReadMode::kMmap); });
  const std::vector<double> pread = series_ms([&] { safetensors::File::open(path, safetensors::ReadMode::kPread); });
  const std::string baseline = fmt::format("open + pread of the {} kB header", header_bytes / 1000);
  report.figures.push_back(time_figure("open + validate 10,000 tensors, mmap (median)", median(mapped), baseline,
                                       median(plain), 5.0));
  report.figures.push_back(time_figure("open + validate 10,000 tensors, pread (median)", median(pread), baseline,
                                       median(plain), 5.0));
}

// scripts/bench_torch_io.py, looked for beside the binary's build folder and
// the working directory (the script needs the source tree).
std::optional<fs::path> torch_script() {
  std::vector<fs::path> candidates = {"scripts/bench_torch_io.py"};
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
      candidates.push_back(dir / "scripts" / "bench_torch_io.py");
    }
  }
  for (const fs::path& candidate : candidates) {
    if (fs::is_regular_file(candidate, ec)) return candidate;
  }
  return std::nullopt;
}

bool torch_installed() { return std::system("python3 -c 'import torch' >/dev/null 2>&1") == 0; }

// Runs the torch script on the same state dict; its JSON gives seconds to save and load.
std::optional<nlohmann::json> run_torch(const fs::path& script, const fs::path& folder) {
  const std::string command = fmt::format("python3 '{}' --tensors {} --rows {} --cols {} --dir '{}'", script.string(),
                                          kBigTensors, kRows, kCols, folder.string());
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string output;
  char chunk[4096];
  for (size_t n; (n = std::fread(chunk, 1, sizeof chunk, pipe)) > 0;) output.append(chunk, n);
  if (::pclose(pipe) != 0) return std::nullopt;
  const nlohmann::json result = nlohmann::json::parse(output, nullptr, false);
  if (result.is_discarded() || !result.contains("save_seconds") || !result.contains("load_seconds")) {
    return std::nullopt;
  }
  return result;
}

void add_torch_figures(BenchReport& report, const fs::path& folder) {
  const std::optional<fs::path> script = torch_script();
  if (!torch_installed() || !script) {
    std::cerr << "bench io: torch.save / torch.load comparison skipped: "
              << (script ? "python3-torch is not installed" : "scripts/bench_torch_io.py not found") << "\n";
    return;
  }
  const std::optional<nlohmann::json> torch = run_torch(*script, folder);
  if (!torch) {
    std::cerr << "bench io: torch.save / torch.load comparison failed; skipped\n";
    return;
  }
  const auto find = [&](std::string_view prefix) {
    return *std::find_if(report.figures.begin(), report.figures.end(),
                         [&](const BenchFigure& f) { return f.name.starts_with(prefix); });
  };
  const double gib = kBigTensors * static_cast<double>(kTensorBytes) / kGiB;
  const BenchFigure write = find("write 2 GiB, stream");
  const BenchFigure read = find("read every tensor, pread");
  report.figures.push_back(throughput_figure("write 2 GiB, stream writer + commit", write.value,
                                             "torch.save + fsync, same tensors",
                                             gib / (*torch)["save_seconds"].get<double>(), std::nullopt));
  report.figures.push_back(throughput_figure("read every tensor, pread", read.value, "torch.load, same tensors",
                                             gib / (*torch)["load_seconds"].get<double>(), std::nullopt));
}

}  // namespace

BenchReport run_io_benchmark() {
  BenchReport report;
  report.benchmark = "io";
  const ScratchFolder scratch;
  const fs::path big = scratch / "big.safetensors";
  add_write_figures(report, big);
  add_read_figures(report, big);
  fs::remove(big);
  add_open_figures(report, scratch / "many.safetensors");
  add_torch_figures(report, scratch.path());
  return report;
}

}  // namespace reshard::bench
