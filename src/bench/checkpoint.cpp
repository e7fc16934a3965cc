// `reshard bench checkpoint`: save throughput beside plain write calls of the
// same bytes, how long an asynchronous save blocks its caller beside the
// whole save (within its staging budget and four times past it), and
// restores with checksums on (onto another layout, and onto slices that cut
// the saved chunks, with the bytes read beside the bytes needed) beside
// restore onto the saved one; all in the same run, by every process of the
// job (mpirun -np 4 for the figure). RESHARD_BENCH_CHECKPOINT_BYTES
// sets the size (2 GiB).
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_job.h"
#include "bench/bench_report.h"
#include "job/job.h"
#include "reshard/execute/transport.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/checkpoint_restore.h"
#include "reshard/pipelines/checkpoint_save.h"

namespace reshard::bench {

using job::job_transport;

namespace {

namespace fs = std::filesystem;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int64_t kCols = 4096;  // f32 columns: 16 KiB rows
constexpr int kTensors = 16;

uint64_t total_bytes_wanted() {
  if (const char* text = std::getenv("RESHARD_BENCH_CHECKPOINT_BYTES")) return std::stoull(text);
  return uint64_t{2} << 30;
}

// Each process writes its bytes into a file of its own with write(), then fsyncs.
void plain_write(const fs::path& path, const std::vector<NamedArray>& arrays) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(ErrorCode::kIo, fmt::format("bench checkpoint: opening {}", path.string()));
  for (const NamedArray& array : arrays) {
    for (const Shard& shard : array.array.shards()) {
      const std::byte* data = shard.buffer.data();
      size_t left = shard.buffer.size();
      while (left > 0) {
        const ssize_t n = ::write(fd, data, left);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw Error(ErrorCode::kIo, fmt::format("bench checkpoint: writing {}", path.string()));
        data += n;
        left -= static_cast<size_t>(n);
      }
    }
  }
  ::fsync(fd);
  ::close(fd);
}

struct Setup {
  Mesh mesh;
  Topology topology;
  NamedSharding sharding;
};

// Two devices per process, rows split over all of them.
Setup setup(int processes, bool reversed) {
  std::vector<DeviceId> devices;
  for (int d = 0; d < 2 * processes; ++d) devices.push_back(reversed ? 2 * processes - 1 - d : d);
  Mesh mesh({{"x", 2 * processes}}, devices);
  NamedSharding sharding(mesh, PartitionSpec::parse("x"));
  return {mesh, Topology::uniform(2 * processes, processes), sharding};
}

// Three devices per process, rows split over all of them, the mesh going
// round the processes: each process needs three row ranges that start and
// end inside the saved chunks, so a verified restore reads parts of chunks.
Setup interleaved_thirds(int processes) {
  std::vector<DeviceId> devices;
  for (int s = 0; s < 3 * processes; ++s) devices.push_back((s % processes) * 3 + s / processes);
  Mesh mesh({{"x", 3 * processes}}, devices);
  NamedSharding sharding(mesh, PartitionSpec::parse("x"));
  return {mesh, Topology::uniform(3 * processes, processes), sharding};
}

// Seconds of a restore onto `targets` with checksums verified, and what it read.
double timed_restore(Transport& transport, const fs::path& path, const std::vector<RestoreTarget>& targets,
                     RestoreResult* stats) {
  RestoreOptions verified;
  verified.verify_checksums = true;
  return timed(transport, [&] { *stats = restore_checkpoint(path, targets, transport, verified); });
}

}  // namespace

BenchReport run_checkpoint_benchmark() {
  Transport& transport = job_transport();
  const int processes = transport.size();
  // Rows divisible by 6 per process: two saved chunks per process, three restored slices.
  const int64_t rows_per_tensor =
      std::max<int64_t>(6 * processes, static_cast<int64_t>(total_bytes_wanted() / kTensors / (kCols * 4)) /
                                           (6 * processes) * (6 * processes));
  const Setup saved = setup(processes, false);
  std::vector<NamedArray> arrays;
  std::vector<RestoreTarget> same, other, thirds;
  const Setup moved = setup(processes, true);
  const Setup split = interleaved_thirds(processes);
  for (int t = 0; t < kTensors; ++t) {
    const std::string name = fmt::format("layers.{}.w", t);
    arrays.push_back({name, ShardedArray::allocate({rows_per_tensor, kCols}, DType::kF32, saved.sharding, saved.topology,
                                                   transport.rank())});
    ShardedArray& array = arrays.back().array;
    for (size_t i = 0; i < array.shards().size(); ++i) std::ranges::fill(array.writable_bytes(i), std::byte(t + 1));
    same.push_back({name, saved.sharding, saved.topology});
    other.push_back({name, moved.sharding, moved.topology});
    thirds.push_back({name, split.sharding, split.topology});
  }
  const double bytes = static_cast<double>(kTensors) * static_cast<double>(rows_per_tensor) * kCols * 4;
  const fs::path scratch = shared_scratch(transport, "checkpoint");

  // Best of two, in alternating order, on a machine that may be busy.
  double plain_s = 1e30, save_s = 1e30;
  for (int round = 0; round < 2; ++round) {
    const auto plain = [&] {
      plain_s = std::min(plain_s, timed(transport, [&] {
        plain_write(scratch / fmt::format("plain-{}-{}.bin", round, transport.rank()), arrays);
      }));
    };
    const auto save = [&] {
      save_s = std::min(save_s, timed(transport, [&] {
        save_checkpoint(arrays, scratch / fmt::format("ckpt{}", round), transport);
      }));
    };
    if (round == 0) {
      plain();
      save();
    } else {
      save();
      plain();
    }
  }
  // An async save within its budget (the default 1 GiB), and one four times its budget.
  const uint64_t my_bytes = static_cast<uint64_t>(bytes) / static_cast<uint64_t>(processes);
  const auto async_save = [&](uint64_t budget, double& blocked_s) {
    SaveOptions options;
    options.staging_bytes = budget;
    return timed(transport, [&] {
      const auto start = std::chrono::steady_clock::now();
      SaveHandle handle = save_checkpoint_async(arrays, scratch / "ckpt0", transport, options);
      blocked_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      handle.wait();
    });
  };
  double blocked_s = 0, blocked_small_s = 0;
  const double async_s = async_save(SaveOptions{}.staging_bytes, blocked_s);
  const double async_small_s = async_save(std::max<uint64_t>(my_bytes / 4, 1), blocked_small_s);
  RestoreResult same_stats, other_stats, thirds_stats;
  const double restore_same_s = timed_restore(transport, scratch / "ckpt1", same, &same_stats);
  const double restore_other_s = timed_restore(transport, scratch / "ckpt1", other, &other_stats);
  const double restore_thirds_s = timed_restore(transport, scratch / "ckpt1", thirds, &thirds_stats);
  transport.barrier();
  if (transport.rank() == 0) {
    std::error_code ignored;
    fs::remove_all(scratch, ignored);
  }

  BenchReport report{"checkpoint", {}};
  const std::string size = fmt::format("{:.2f} GiB, {} process{}", bytes / kGiB, processes, processes == 1 ? "" : "es");
  report.figures.push_back(throughput_figure(fmt::format("save ({})", size), bytes / kGiB / save_s,
                                             "plain write() + fsync, same bytes", bytes / kGiB / plain_s, 0.85));
  report.figures.push_back(time_figure("async save: time the caller is blocked", blocked_s * 1e3,
                                       "the whole async save", async_s * 1e3, std::nullopt));
  report.figures.push_back(time_figure("async save, staging budget 1/4 of the save: time the caller is blocked",
                                       blocked_small_s * 1e3, "the whole async save", async_small_s * 1e3,
                                       std::nullopt));
  report.figures.push_back(throughput_figure("restore onto another layout (devices reversed), checksums on",
                                             bytes / kGiB / restore_other_s, "restore onto the saved layout, checksums on",
                                             bytes / kGiB / restore_same_s, std::nullopt));
  report.figures.push_back(throughput_figure(
      "restore onto 3 interleaved slices per process (parts of chunks), checksums on", bytes / kGiB / restore_thirds_s,
      "restore onto the saved layout, checksums on", bytes / kGiB / restore_same_s, std::nullopt));
  // Verified partial reads round out to 1 MiB checksum blocks: bytes this process needs beside what it read.
  BenchFigure read{};
  read.name = "bytes read by this process, 3 interleaved slices, checksums on";
  read.unit = "MiB";
  read.value = static_cast<double>(thirds_stats.data_bytes_read) / (1024.0 * 1024.0);
  read.baseline_name = "bytes its devices need";
  read.baseline = static_cast<double>(my_bytes) / (1024.0 * 1024.0);
  read.ratio = read.value > 0 ? read.baseline / read.value : 0;
  read.higher_is_better = false;
  report.figures.push_back(read);
  return report;
}

}  // namespace reshard::bench
