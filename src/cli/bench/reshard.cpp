// `reshard bench reshard`: a 1 GiB reshard between two layouts beside memcpy of the same bytes.
#include <algorithm>
#include <chrono>
#include <optional>
#include <cstring>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/bench_report.h"
#include "execute/copy_bytes.h"
#include "reshard/execute/in_process_transport.h"
#include "reshard/execute/operations.h"
#include "reshard/layout/error.h"

namespace reshard::cli {
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
  for (Shard& s : array.mutable_shards()) {
    // Row-major from the shard's origin: the word's value is its global position.
    const auto first = static_cast<uint32_t>(s.box.origin()[0] << 23);
    auto* words = reinterpret_cast<uint32_t*>(s.buffer.data());
    for (size_t i = 0; i < s.buffer.size() / 4; ++i) words[i] = first + static_cast<uint32_t>(i);
  }
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
  // Both destinations are written once first, so neither run pays for page faults.
  reshard_into(source, target, transport, options);
  std::vector<Shard> copies = target.shards();  // the baselines write over the same memory
  double reshard_best = 1e9, back_best = 1e9, memcpy_best = 1e9, streaming_best = 1e9;
  for (int rep = 0; rep < kRepetitions; ++rep) {  // interleaved, so all see the same machine
    memcpy_best = std::min(memcpy_best, seconds_of([&] { copy_shards(source.shards(), copies, kThreads, {}); }));
    streaming_best = std::min(
        streaming_best, seconds_of([&] { copy_shards(source.shards(), copies, kThreads, CopyMode::kStreaming); }));
    reshard_best = std::min(reshard_best, seconds_of([&] { reshard_into(source, target, transport, options); }));
    // And back, which writes the source's own bytes over it again.
    back_best = std::min(back_best, seconds_of([&] { reshard_into(target, source, transport, options); }));
  }
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
                                             gib / streaming_best, std::nullopt));
  report.figures.push_back(throughput_figure(fmt::format("reshard 1 GiB columns->rows, {} threads", kThreads),
                                             gib / back_best, fmt::format("memcpy 1 GiB, {} threads", kThreads),
                                             gib / memcpy_best, 0.9));
  return report;
}

}  // namespace reshard::cli
