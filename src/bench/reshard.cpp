// `reshard bench reshard`: a 1 GiB reshard between two layouts beside memcpy of the same bytes.
#include <algorithm>
#include <chrono>
#include <optional>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "bench/bench_model.h"
#include "bench/bench_report.h"
#include "bench/rotating_rounds.h"
#include "layout/copy_bytes.h"
#include "reshard/execute/in_process_transport.h"
#include "reshard/execute/operations.h"
#include "reshard/layout/error.h"
#include "reshard/plan/planner.h"

namespace reshard::bench {

using layout_detail::copy_bytes;
using layout_detail::copy_rows_together;
using layout_detail::CopyMode;
using layout_detail::finish_streaming;
using layout_detail::RowsCopy;

namespace {

constexpr int kThreads = 2;
constexpr int kRepetitions = 5;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// [32, 8192, 1024] f32 = 1 GiB: rows over 8 devices, to columns over the same
// devices in another order, so every device sends to every other in 512-byte runs.
const Shape kShape{32, 8192, 1024};

NamedSharding source_layout() { return NamedSharding(Mesh({{"d", 8}}, {0, 1, 2, 3, 4, 5, 6, 7}), PartitionSpec({{"d"}})); }

NamedSharding target_layout() {
  return NamedSharding(Mesh({{"d", 8}}, {0, 2, 4, 6, 1, 3, 5, 7}), PartitionSpec({{}, {}, {"d"}}));
}

template <typename F>
double seconds_of(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The baseline: the same bytes, shard i to buffer i, with `threads` threads
// each taking an equal contiguous share, by memcpy or by the copy engine's own
// streaming stores (so the layout's cost shows apart from the store kind).
void copy_shards(const std::vector<Shard>& from, std::vector<Shard>& to, int threads, std::optional<CopyMode> mode) {
  uint64_t total = 0;
  for (const Shard& s : from) total += s.buffer.size();
  const auto copy_range = [&](uint64_t begin, uint64_t end) {
    uint64_t start = 0;
    for (size_t i = 0; i < from.size(); ++i) {
      const uint64_t size = from[i].buffer.size();
      const uint64_t lo = std::max(begin, start), hi = std::min(end, start + size);
      if (lo < hi) {
        std::byte* dst = to[i].buffer.data() + (lo - start);
        const std::byte* src = from[i].buffer.data() + (lo - start);
        mode ? copy_bytes(dst, src, hi - lo, *mode) : static_cast<void>(std::memcpy(dst, src, hi - lo));
      }
      start += size;
    }
    if (mode == CopyMode::kStreaming) finish_streaming();
  };
  std::vector<std::jthread> workers;
  const auto share = total / static_cast<uint64_t>(threads);
  for (int t = 1; t < threads; ++t) {
    const auto part = static_cast<uint64_t>(t);
    workers.emplace_back(copy_range, part * share, t + 1 == threads ? total : (part + 1) * share);
  }
  copy_range(0, share);
}

// The bound for rows->columns: the same row copies with nothing around them
// (no plan, no grouping), each source shard's 4 KiB rows cut into 8 parts of
// 512 bytes, row by row across the 8 targets (as the engine walks them),
// source shards split over `threads` threads. The targets' column blocks
// land in shard order here, not the layout's device order: the bytes are
// checked after the reshard that follows, which writes them right.
void copy_rows_alone(const std::vector<Shard>& from, std::vector<Shard>& to, int threads) {
  const size_t parts = to.size();
  const size_t row_bytes = static_cast<size_t>(kShape[2]) * sizeof(float);
  const size_t part_bytes = row_bytes / parts;
  const auto copy_sources = [&](size_t first, size_t last) {
    for (size_t i = first; i < last; ++i) {
      const uint64_t rows = from[i].buffer.size() / row_bytes;
      std::vector<RowsCopy> copies;
      for (size_t j = 0; j < parts; ++j) {
        copies.push_back({to[j].buffer.data() + i * rows * part_bytes, static_cast<int64_t>(part_bytes),
                          from[i].buffer.data() + j * part_bytes, static_cast<int64_t>(row_bytes)});
      }
      copy_rows_together(copies, part_bytes, rows, CopyMode::kStreaming);
    }
    finish_streaming();
  };
  std::vector<std::jthread> workers;
  const auto share = [&](int t) { return from.size() * static_cast<size_t>(t) / static_cast<size_t>(threads); };
  for (int t = 1; t < threads; ++t) workers.emplace_back(copy_sources, share(t), share(t + 1));
  copy_sources(0, share(1));
}

// A spot check that the timed runs moved the right bytes: element (i, j, k) of
// the array is the word i*2^23 + j*2^10 + k (as fill wrote it).
void check_sample(const ShardedArray& target) {
  for (uint32_t n = 0; n < 1000; ++n) {
    const std::vector<int64_t> index{n % 32, (n * 7919) % 8192, (n * 104729) % 1024};
    const auto expected = static_cast<uint32_t>((index[0] << 23) + (index[1] << 10) + index[2]);
    for (const Shard& shard : target.shards()) {
      if (!shard.box.contains(Box(index, {1, 1, 1}))) continue;
      uint32_t actual = 0;
      std::memcpy(&actual, target.element(shard.device, index).data(), sizeof actual);
      if (actual != expected) {
        throw Error(ErrorCode::kInvalidPlan, fmt::format("bench reshard: element [{}] of device {} is {}, not {}",
                                                         fmt::join(index, ", "), shard.device, actual, expected));
      }
    }
  }
}

void fill(ShardedArray& array) {
  for (size_t shard = 0; shard < array.shards().size(); ++shard) {
    // Row-major from the shard's origin: the word's value is its global position.
    const auto first = static_cast<uint32_t>(array.shards()[shard].box.origin()[0] << 23);
    const std::span<std::byte> bytes = array.writable_bytes(shard);
    auto* words = reinterpret_cast<uint32_t*>(bytes.data());
    for (size_t i = 0; i < bytes.size() / 4; ++i) words[i] = first + static_cast<uint32_t>(i);
  }
}

// Runs `body(rank)` on one thread per rank and waits for all.
template <typename Body>
void on_every_rank(int ranks, Body&& body) {
  std::vector<std::jthread> threads;
  for (int r = 0; r < ranks; ++r) threads.emplace_back([&, r] { body(r); });
}

// 32 MiB made replicated on all 16 devices of 4 processes (threads here):
// the two-stage plan beside the per-device plan it replaces, bytes and time.
void replicated_figures(BenchReport& report) {
  constexpr int kProcesses = 4;
  const Topology topology = Topology::uniform(16, kProcesses);
  const Shape shape{32, 256, 1024};
  std::vector<DeviceId> devices;
  for (DeviceId d = 0; d < 16; ++d) devices.push_back(d);
  const NamedSharding rows(Mesh({{"d", 16}}, devices), PartitionSpec({{}, {"d"}}));
  const NamedSharding everywhere(Mesh({{"d", 16}}, devices), PartitionSpec());
  const PlanKey key{shape, DType::kF32, rows, everywhere, topology};
  const Plan two_stage = make_plan(key);
  const Plan per_device = make_plan(key, PlanOptions{false, false});
  InProcessGroup group(kProcesses);
  std::vector<ShardedArray> sources, targets;
  for (int r = 0; r < kProcesses; ++r) {
    sources.push_back(ShardedArray::allocate(shape, DType::kF32, rows, topology, r));
    fill(sources.back());
    targets.push_back(ShardedArray::allocate(shape, DType::kF32, everywhere, topology, r));
  }
  ExecuteOptions options;
  options.threads = 1;  // the four ranks share the cores
  const auto run = [&](const Plan& plan) {
    on_every_rank(kProcesses, [&](int r) {
      execute(plan, sources[static_cast<size_t>(r)], targets[static_cast<size_t>(r)], group.transport(r), options);
    });
  };
  run(two_stage);
  run(per_device);
  const std::vector<std::function<double()>> runs{[&] { return seconds_of([&] { run(two_stage); }); },
                                                  [&] { return seconds_of([&] { run(per_device); }); }};
  const std::vector<double> least = least_seconds_in_rotating_rounds(runs, kRepetitions);
  const double two_stage_s = least[0], per_device_s = least[1];
  report.figures.push_back(
      bytes_figure("bytes between processes, 32 MiB made replicated on 16 devices of 4 processes (threads)",
                   two_stage.stats().bytes_cross_process, "per-device plan", per_device.stats().bytes_cross_process));
  report.figures.push_back(time_figure("time, 32 MiB made replicated on 16 devices of 4 processes (threads)",
                                       two_stage_s * 1e3, "per-device plan", per_device_s * 1e3, std::nullopt));
}

// A Llama-shaped model of about 1 GiB in 309 tensors on 8 devices of this
// process, fully sharded to tensor parallel: all arrays in one operation,
// beside one array at a time and beside memcpy of the same bytes.
void model_figures(BenchReport& report) {
  const Topology topology = Topology::uniform(8, 1);
  InProcessGroup group(1);
  Transport& transport = group.transport(0);
  const std::vector<BenchTensor> model = llama_shaped_model(34, 1024, 3072, 48000);
  std::vector<PlanKey> keys;
  for (const BenchTensor& t : model) {
    keys.push_back(PlanKey{t.shape, t.dtype, fsdp_layout(t, topology), tensor_parallel_layout(t, topology), topology});
  }
  const std::vector<Plan> plans = make_plans(keys);
  const std::vector<ShardedArray> source = allocate_model(model, topology, 0, fsdp_layout);
  std::vector<ShardedArray> target = allocate_model(model, topology, 0, tensor_parallel_layout);
  // The baseline writes each target shard with memcpy from a source shard of the same size.
  std::vector<Shard> from, to;
  for (size_t i = 0; i < model.size(); ++i) {
    from.insert(from.end(), source[i].shards().begin(), source[i].shards().end());
    to.insert(to.end(), target[i].shards().begin(), target[i].shards().end());
  }
  ExecuteOptions options;
  options.threads = kThreads;
  const auto one_at_a_time = [&] {
    for (size_t i = 0; i < plans.size(); ++i) execute(plans[i], source[i], target[i], transport, options);
  };
  execute(plans, source, target, transport, options);
  const std::vector<std::function<double()>> runs{
      [&] { return seconds_of([&] { copy_shards(from, to, kThreads, {}); }); },
      [&] { return seconds_of([&] { execute(plans, source, target, transport, options); }); },
      [&] { return seconds_of(one_at_a_time); }};
  const std::vector<double> least = least_seconds_in_rotating_rounds(runs, kRepetitions);
  const double memcpy_s = least[0], batched_s = least[1], single_s = least[2];
  const double gib = static_cast<double>(model_bytes(model)) / kGiB;
  const std::string name = fmt::format("model {:.2f} GiB in {} tensors, one operation, {} threads", gib,
                                       model.size(), kThreads);
  report.figures.push_back(throughput_figure(name, gib / batched_s, "one array at a time", gib / single_s, std::nullopt));
  report.figures.push_back(throughput_figure(name, gib / batched_s, fmt::format("memcpy, {} threads", kThreads),
                                             gib / memcpy_s, std::nullopt));
}

}  // namespace

BenchReport run_reshard_benchmark() {
  const Topology topology = Topology::uniform(8, 1);
  InProcessGroup group(1);
  Transport& transport = group.transport(0);
  ShardedArray source = ShardedArray::allocate(kShape, DType::kF32, source_layout(), topology, 0);
  ShardedArray target = ShardedArray::allocate(kShape, DType::kF32, target_layout(), topology, 0);
  fill(source);
  ExecuteOptions options;
  options.threads = kThreads;
  // The baselines write into memory of their own, shaped as the target's
  // shards: the runs take turns in changing orders, and the reshard back
  // (the last run, which writes the source's own bytes over it again) must
  // always read a whole target. Every destination is written once first, so
  // no run pays for page faults.
  ShardedArray scratch = ShardedArray::allocate(kShape, DType::kF32, target_layout(), topology, 0);
  std::vector<Shard> copies = scratch.shards();
  copy_shards(source.shards(), copies, kThreads, {});
  reshard_into(source, target, transport, options);
  // Interleaved, so all see the same machine.
  const std::vector<std::function<double()>> runs{
      [&] { return seconds_of([&] { copy_shards(source.shards(), copies, kThreads, {}); }); },
      [&] { return seconds_of([&] { copy_shards(source.shards(), copies, kThreads, CopyMode::kStreaming); }); },
      [&] { return seconds_of([&] { copy_rows_alone(source.shards(), copies, kThreads); }); },
      [&] { return seconds_of([&] { reshard_into(source, target, transport, options); }); },
      [&] { return seconds_of([&] { reshard_into(target, source, transport, options); }); }};
  const std::vector<double> least = least_seconds_in_rotating_rounds(runs, kRepetitions);
  const double memcpy_best = least[0], streaming_best = least[1], rows_alone_best = least[2];
  const double reshard_best = least[3], back_best = least[4];
  check_sample(target);
  check_sample(source);
  const double gib = static_cast<double>(target.shards().size() * target.shards()[0].buffer.size()) / kGiB;
  BenchReport report;
  report.benchmark = "reshard";
  const std::string name = fmt::format("reshard 1 GiB rows->columns, {} threads", kThreads);
  report.figures.push_back(throughput_figure(name, gib / reshard_best, fmt::format("memcpy 1 GiB, {} threads", kThreads),
                                             gib / memcpy_best, 0.9));
  report.figures.push_back(throughput_figure(name, gib / reshard_best,
                                             fmt::format("streaming copy 1 GiB, {} threads", kThreads),
                                             gib / streaming_best, 1.0));
  // Where the time goes: the row copies alone against the same baseline.
  // Eight streams of stores per thread cost this machine some 4-10% against
  // one, so the reshard can reach this bound, not the copy's.
  report.figures.push_back(throughput_figure(
      fmt::format("rows->columns: the row copies alone, no plan, {} threads", kThreads), gib / rows_alone_best,
      fmt::format("streaming copy 1 GiB, {} threads", kThreads), gib / streaming_best, std::nullopt));
  report.figures.push_back(throughput_figure(fmt::format("reshard 1 GiB columns->rows, {} threads", kThreads),
                                             gib / back_best, fmt::format("memcpy 1 GiB, {} threads", kThreads),
                                             gib / memcpy_best, 0.9));
  replicated_figures(report);
  model_figures(report);
  return report;
}

}  // namespace reshard::bench
