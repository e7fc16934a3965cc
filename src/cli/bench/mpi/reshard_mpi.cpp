// `reshard bench reshard` under mpirun: a 1 GiB reshard across processes beside
// MPI_Alltoallv moving the same byte matrix, and the bytes it moves beside
// replicating the array on every process and slicing it there.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "cli/bench_report.h"
#include "cli/job.h"
#include "reshard/execute/operations.h"
#include "reshard/layout/error.h"
#include "reshard/plan/planner.h"

namespace reshard::cli {
namespace {

constexpr int kRepetitions = 5;
constexpr int kDevicesPerProcess = 4;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// [32, 8192, 1024] f32 = 1 GiB over 4 devices per process, split along its
// middle dimension. Two targets, each dealing the devices out so that
// processes take turns (0, 4, 8, ..., 1, 5, 9, ...), as the seed's second mesh
// does: the same split in that order (whole shards move, as contiguous
// messages), and a split along the last dimension (every target shard gathers
// 256-byte runs from every process, packed and unpacked). Either way
// (P-1)/P of the array crosses processes.
const Shape kShape{32, 8192, 1024};

std::vector<DeviceId> in_order(int64_t devices) {
  std::vector<DeviceId> order(static_cast<size_t>(devices));
  for (int64_t i = 0; i < devices; ++i) order[static_cast<size_t>(i)] = i;
  return order;
}

std::vector<DeviceId> processes_take_turns(int processes) {
  std::vector<DeviceId> order;
  for (int64_t local = 0; local < kDevicesPerProcess; ++local) {
    for (int64_t p = 0; p < processes; ++p) order.push_back(p * kDevicesPerProcess + local);
  }
  return order;
}

NamedSharding split_middle(std::vector<DeviceId> order) {
  const auto n = static_cast<int64_t>(order.size());
  return NamedSharding(Mesh({{"d", n}}, std::move(order)), PartitionSpec({{}, {"d"}}));
}

NamedSharding split_last(std::vector<DeviceId> order) {
  const auto n = static_cast<int64_t>(order.size());
  return NamedSharding(Mesh({{"d", n}}, std::move(order)), PartitionSpec({{}, {}, {"d"}}));
}

// Bytes the plan sends from each process to each other one: [from][to].
std::vector<std::vector<uint64_t>> byte_matrix(const Plan& plan, size_t element_bytes) {
  const Topology& topology = plan.key().topology;
  const auto n = static_cast<size_t>(topology.num_processes());
  std::vector<std::vector<uint64_t>> bytes(n, std::vector<uint64_t>(n, 0));
  for (const Transfer& t : plan.transfers()) {
    const auto from = static_cast<size_t>(topology.process_of(t.src));
    const auto to = static_cast<size_t>(topology.process_of(t.dst));
    if (from != to) bytes[from][to] += static_cast<uint64_t>(t.box.volume()) * element_bytes;
  }
  return bytes;
}

// MPI counts are int: the baseline needs every pair under 2 GiB.
std::vector<int> as_counts(const std::vector<uint64_t>& bytes) {
  std::vector<int> counts;
  for (uint64_t b : bytes) {
    if (b > static_cast<uint64_t>(INT32_MAX)) {
      throw Error(ErrorCode::kUnsupported, fmt::format("bench: {} bytes between two processes exceed MPI's int", b));
    }
    counts.push_back(static_cast<int>(b));
  }
  return counts;
}

std::vector<int> displacements(const std::vector<int>& counts) {
  std::vector<int> out(counts.size(), 0);
  for (size_t i = 1; i < counts.size(); ++i) out[i] = out[i - 1] + counts[i - 1];
  return out;
}

// The moved bytes of MPI_Alltoallv, laid out contiguously per peer.
struct AlltoallvBaseline {
  std::vector<int> send_counts, send_offsets, receive_counts, receive_offsets;
  std::vector<std::byte> send, receive;

  AlltoallvBaseline(const std::vector<std::vector<uint64_t>>& matrix, int rank) {
    const auto me = static_cast<size_t>(rank);
    std::vector<uint64_t> outgoing = matrix[me], incoming;
    for (const auto& row : matrix) incoming.push_back(row[me]);
    send_counts = as_counts(outgoing);
    receive_counts = as_counts(incoming);
    send_offsets = displacements(send_counts);
    receive_offsets = displacements(receive_counts);
    send.assign(static_cast<size_t>(send_offsets.back()) + static_cast<size_t>(send_counts.back()), std::byte{7});
    receive.assign(static_cast<size_t>(receive_offsets.back()) + static_cast<size_t>(receive_counts.back()), std::byte{0});
  }

  void run() {
    MPI_Alltoallv(send.data(), send_counts.data(), send_offsets.data(), MPI_BYTE, receive.data(),
                  receive_counts.data(), receive_offsets.data(), MPI_BYTE, MPI_COMM_WORLD);
  }
};

// Wall time of `f` across the job: from a common start to the last rank's end.
template <typename F>
double job_seconds(F&& f) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = std::chrono::steady_clock::now();
  f();
  double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

void fill(ShardedArray& array) {
  for (Shard& s : array.mutable_shards()) {
    std::memset(s.buffer.data(), static_cast<int>(s.device & 0xff), s.buffer.size());
  }
}

// What replicating the array on every host moves: each process fetches, once,
// every element its own devices lack (planned onto one device per process).
uint64_t replicate_bytes(const NamedSharding& source, const Topology& topology) {
  std::vector<DeviceId> one_per_process;
  for (int p = 0; p < topology.num_processes(); ++p) one_per_process.push_back(topology.devices_of(p).front());
  const auto processes = static_cast<int64_t>(one_per_process.size());
  const NamedSharding everywhere(Mesh({{"host", processes}}, one_per_process), PartitionSpec());
  return make_plan(PlanKey{kShape, DType::kF32, source, everywhere, topology}).stats().bytes_cross_process;
}

std::string on_cores(int processes) {
  const unsigned cores = std::thread::hardware_concurrency();
  return fmt::format("{} processes on {} core{}", processes, cores, cores == 1 ? "" : "s");
}


// Best times of a reshard and of MPI_Alltoallv moving its byte matrix, and
// the bytes that cross processes.
struct Measured {
  double reshard_seconds = 1e9;
  double alltoallv_seconds = 1e9;
  uint64_t cross_process_bytes = 0;
  uint64_t total_bytes = 0;
};

Measured measure(const ShardedArray& source, const NamedSharding& target_sharding, Transport& transport) {
  const Topology& topology = source.topology();
  ShardedArray target = ShardedArray::allocate(kShape, DType::kF32, target_sharding, topology, source.process());
  const Plan plan = make_plan(PlanKey{kShape, DType::kF32, source.sharding(), target_sharding, topology});
  AlltoallvBaseline baseline(byte_matrix(plan, 4), source.process());
  ExecuteOptions options;
  options.threads = 1;  // the processes already share the cores
  // Warm up both (page faults, plan cache, MPI connections), then interleave.
  reshard_into(source, target, transport, options);
  baseline.run();
  Measured m;
  for (int rep = 0; rep < kRepetitions; ++rep) {
    m.alltoallv_seconds = std::min(m.alltoallv_seconds, job_seconds([&] { baseline.run(); }));
    m.reshard_seconds =
        std::min(m.reshard_seconds, job_seconds([&] { reshard_into(source, target, transport, options); }));
  }
  m.cross_process_bytes = plan.stats().bytes_cross_process;
  m.total_bytes = plan.stats().bytes_total;
  return m;
}

BenchFigure against_alltoallv(const std::string& what, const Measured& m, int processes) {
  const double cross_gib = static_cast<double>(m.cross_process_bytes) / kGiB;
  return throughput_figure(fmt::format("reshard {:.0f} GiB {}, {}", static_cast<double>(m.total_bytes) / kGiB, what,
                                       on_cores(processes)),
                           cross_gib / m.reshard_seconds, "MPI_Alltoallv, same byte matrix",
                           cross_gib / m.alltoallv_seconds, 0.9);
}

}  // namespace

BenchReport run_reshard_mpi_benchmark() {
  const JobWorld world = job_world();
  Transport& transport = job_transport();
  const int64_t devices = int64_t{kDevicesPerProcess} * world.size;
  const Topology topology = Topology::uniform(devices, world.size);
  ShardedArray source = ShardedArray::allocate(kShape, DType::kF32, split_middle(in_order(devices)), topology,
                                               world.rank);
  fill(source);
  const Measured reorder = measure(source, split_middle(processes_take_turns(world.size)), transport);
  const Measured transpose = measure(source, split_last(processes_take_turns(world.size)), transport);
  BenchReport report;
  report.benchmark = "reshard";
  report.figures.push_back(against_alltoallv("to another device order", reorder, world.size));
  report.figures.push_back(against_alltoallv("to another split dimension", transpose, world.size));
  BenchFigure bytes;
  bytes.name = "bytes between processes, split dimension change";
  bytes.unit = "GiB";
  bytes.value = static_cast<double>(transpose.cross_process_bytes) / kGiB;
  bytes.baseline_name = "replicate on every host, then slice";
  bytes.baseline = static_cast<double>(replicate_bytes(source.sharding(), topology)) / kGiB;
  bytes.ratio = bytes.value > 0 ? bytes.baseline / bytes.value : 0;  // how many times fewer
  report.figures.push_back(bytes);
  return report;
}

}  // namespace reshard::cli
