// `reshard bench reshard` under mpirun: a 1 GiB reshard across processes beside
// MPI_Alltoallv moving the same byte matrix, and the bytes it moves beside
// replicating the array on every process and slicing it there.
//
// The byte matrix is the whole operation's, its diagonal too: the bytes a
// process places from its own shards into its own (another device, or a new
// buffer on the same one). A reshard's time includes those copies, and
// MPI_Alltoallv copies the diagonal it is given itself; set beside the
// matrix without it, the baseline did a quarter less work than the reshard
// (4 processes, every target shard taking from every source shard). Each
// target figure is also printed beside Alltoallv of the bytes between
// processes alone, so the two stay comparable with earlier runs.
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <chrono>
#include <span>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_model.h"
#include "bench/bench_report.h"
#include "bench/mpi/tcp_beside_mpi.h"
#include "bench/rotating_rounds.h"
#include "job/job.h"
#include "layout/box_copy.h"
#include "layout/copy_bytes.h"
#include "reshard/execute/mpi/mpi_transport.h"
#include "reshard/execute/operations.h"
#include "reshard/layout/error.h"
#include "reshard/plan/planner.h"

namespace reshard::bench {

using job::JobWorld;
using job::job_transport;
using job::job_world;
using job::with_job_hosts;

using layout_detail::BoxCopy;
using layout_detail::copy_bytes;
using layout_detail::CopyMode;
using layout_detail::finish_streaming;

namespace {

constexpr int kRepetitions = 5;
// Each move is about 1 GiB; the rounds are at least as many as the runs timed
// against each other (least_seconds_in_rotating_rounds).
constexpr int kModelRepetitions = 3;
constexpr int kDevicesPerProcess = 4;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// [32, 8192, 1024] f32 = 1 GiB over 4 devices per process, split along its
// middle dimension. Two targets, each dealing the devices out so that
// processes take turns (0, 4, 8, ..., 1, 5, 9, ...), as the seed's second mesh
// does: the same split in that order (whole shards move, as contiguous
// messages), and a split along the last dimension (every target shard gathers
// 256-byte runs from every process, packed and unpacked). Either way
// (P-1)/P of the array crosses processes. RESHARD_BENCH_RESHARD_BYTES sizes
// it otherwise (rounded down to whole 32 KiB columns, or 32 MiB rows): a slow
// link (tests/netns throttles one) moves 1 GiB some 48 times far too slowly.
Shape split_shape() {
  const char* text = std::getenv("RESHARD_BENCH_RESHARD_BYTES");
  if (text == nullptr) return Shape{32, 8192, 1024};
  constexpr uint64_t kRowBytes = uint64_t{8192} * 1024 * 4;
  const uint64_t bytes = std::stoull(text);
  if (bytes >= kRowBytes) return Shape{static_cast<int64_t>(bytes / kRowBytes), 8192, 1024};
  return Shape{1, 8192, std::max<int64_t>(1, static_cast<int64_t>(bytes / (8192 * 4)))};
}

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

using ByteMatrix = std::vector<std::vector<uint64_t>>;

// Bytes the plans move from each process to each process: [from][to], the
// diagonal (a process to itself) too.
ByteMatrix byte_matrix(std::span<const Plan> plans) {
  const auto n = static_cast<size_t>(plans.front().key().topology.num_processes());
  ByteMatrix bytes(n, std::vector<uint64_t>(n, 0));
  for (const Plan& plan : plans) {
    const Topology& topology = plan.key().topology;
    const uint64_t element_bytes = whole_element_bytes(plan.key().dtype);
    for (const Transfer& t : plan.transfers()) {
      const auto from = static_cast<size_t>(topology.process_of(t.src));
      const auto to = static_cast<size_t>(topology.process_of(t.dst));
      bytes[from][to] += static_cast<uint64_t>(t.box.volume()) * element_bytes;
    }
  }
  return bytes;
}

ByteMatrix byte_matrix(const Plan& plan) { return byte_matrix(std::span<const Plan>(&plan, 1)); }

// The same matrix less what each process moves to itself.
ByteMatrix between_processes(ByteMatrix matrix) {
  for (size_t p = 0; p < matrix.size(); ++p) matrix[p][p] = 0;
  return matrix;
}

uint64_t sum_of(const ByteMatrix& matrix) {
  uint64_t sum = 0;
  for (const auto& row : matrix) sum = std::accumulate(row.begin(), row.end(), sum);
  return sum;
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

  AlltoallvBaseline(const ByteMatrix& matrix, int rank) {
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
  for (size_t i = 0; i < array.shards().size(); ++i) {
    const std::span<std::byte> bytes = array.writable_bytes(i);
    std::memset(bytes.data(), static_cast<int>(array.shards()[i].device & 0xff), bytes.size());
  }
}

// What replicating the array on every host moves: each process fetches, once,
// every element its own devices lack (planned onto one device per process).
uint64_t replicate_bytes(const Shape& shape, const NamedSharding& source, const Topology& topology) {
  std::vector<DeviceId> one_per_process;
  for (int p = 0; p < topology.num_processes(); ++p) one_per_process.push_back(topology.devices_of(p).front());
  const auto processes = static_cast<int64_t>(one_per_process.size());
  const NamedSharding everywhere(Mesh({{"host", processes}}, one_per_process), PartitionSpec());
  return make_plan(PlanKey{shape, DType::kF32, source, everywhere, topology}).stats().bytes_cross_process;
}

// The path the default transport's bytes take between this host's processes:
// "single copy", or why they go through MPI (every rank names the same, as
// the pairs agree; a job over several hosts says "mixed paths").
std::string path_taken(const Transport& transport) {
  const auto* mpi = dynamic_cast<const MpiTransport*>(&transport);
  if (mpi == nullptr || mpi->size() == 1) return "one process";
  std::string_view seen;
  for (int peer = 0; peer < mpi->size(); ++peer) {
    if (peer == mpi->rank()) continue;
    const std::string_view name = peer_path_name(mpi->path_to(peer));
    if (!seen.empty() && name != seen) return "mixed paths";
    seen = name;
  }
  return std::string(seen);
}

// The path, and who copied where the senders wrote some of the bytes
// themselves (into receivers that offered their runs) during `run`.
template <typename Run>
std::string path_while(Transport& transport, Run&& run) {
  const uint64_t before = transport.counters().bytes_written_into_receivers;
  run();
  const uint64_t written = transport.counters().bytes_written_into_receivers - before;
  uint64_t any = 0;
  MPI_Allreduce(&written, &any, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
  const std::string path = path_taken(transport);
  return any > 0 ? path + ", written by the senders" : path;
}

std::string on_cores(int processes) {
  const unsigned cores = std::thread::hardware_concurrency();
  return fmt::format("{} processes on {} core{}", processes, cores, cores == 1 ? "" : "s");
}


// Best times of a reshard and of MPI_Alltoallv moving its byte matrix (whole,
// and less its diagonal), and the bytes of each.
struct Measured {
  std::string path;  // of the default transport's bytes
  double reshard_seconds = 1e9;
  double alltoallv_seconds = 1e9;
  double alltoallv_between_seconds = 1e9;
  double one_pass_seconds = 1e9;
  uint64_t matrix_bytes = 0;  // every byte the reshard places
  uint64_t cross_process_bytes = 0;
  uint64_t array_bytes = 0;
};

// Transfers this large are written around the cache; smaller ones through it
// (a streaming store costs more than it saves on a few cache lines).
constexpr uint64_t kStreamingTransferBytes = uint64_t{64} << 10;

// Packing alone: each transfer's bytes read on their own from the source
// shard, in the shard's layout, and written once, packed back to back into a
// scratch buffer (each transfer at its own place: rewriting one small region
// over and over with streaming stores measured the stores, not the reading).
// No communication. What an implementation that packs a message per transfer
// pays before it sends anything; not a bound on reshard, which reads each
// source row once for every device it goes to. Packs from `at` on (a batch's
// plans one after the other) and leaves `at` past what it wrote.
void one_strided_pass(const Plan& plan, const ShardedArray& source, std::vector<std::byte>& scratch, uint64_t& at) {
  const Topology& topology = source.topology();
  for (const Transfer& t : plan.transfers()) {
    if (topology.process_of(t.src) != source.process()) continue;
    const Shard& shard = source.shard(t.src);
    const BoxCopy copy(t.box, shard.box, t.box, source.element_bytes());
    if (scratch.size() < at + copy.bytes()) scratch.resize(at + copy.bytes());
    const CopyMode mode = copy.bytes() >= kStreamingTransferBytes ? CopyMode::kStreaming : CopyMode::kCached;
    copy.copy(shard.buffer.data(), scratch.data() + at, 0, copy.bytes(), mode);
    at += copy.bytes();
  }
  finish_streaming();
}

// Also the best time through each of `others` (into `other_seconds`).
Measured measure(const ShardedArray& source, const NamedSharding& target_sharding, Transport& transport,
                 std::span<Transport* const> others = {}, std::vector<double>* other_seconds = nullptr) {
  const Topology& topology = source.topology();
  const Shape& shape = source.shape();
  ShardedArray target = ShardedArray::allocate(shape, DType::kF32, target_sharding, topology, source.process());
  const Plan plan = make_plan(PlanKey{shape, DType::kF32, source.sharding(), target_sharding, topology});
  const ByteMatrix matrix = byte_matrix(plan);
  AlltoallvBaseline baseline(matrix, source.process());
  AlltoallvBaseline between(between_processes(matrix), source.process());
  ExecuteOptions options;
  options.threads = 1;  // the processes already share the cores
  // Warm up all (page faults, plan cache, MPI connections), then interleave.
  Measured m;
  m.path = path_while(transport, [&] { reshard_into(source, target, transport, options); });
  for (Transport* other : others) reshard_into(source, target, *other, options);
  baseline.run();
  between.run();
  std::vector<std::byte> scratch;
  const auto one_pass = [&] {
    uint64_t at = 0;
    one_strided_pass(plan, source, scratch, at);
  };
  one_pass();
  const auto reshard_through = [&](Transport& t) {
    return [&, through = &t] { return job_seconds([&] { reshard_into(source, target, *through, options); }); };
  };
  std::vector<std::function<double()>> runs{[&] { return job_seconds([&] { baseline.run(); }); },
                                            [&] { return job_seconds([&] { between.run(); }); },
                                            [&] { return job_seconds(one_pass); }, reshard_through(transport)};
  for (Transport* other : others) runs.push_back(reshard_through(*other));
  const std::vector<double> least = least_seconds_in_rotating_rounds(runs, kRepetitions);
  m.alltoallv_seconds = least[0];
  m.alltoallv_between_seconds = least[1];
  m.one_pass_seconds = least[2];
  m.reshard_seconds = least[3];
  if (other_seconds != nullptr) other_seconds->assign(least.begin() + 4, least.end());
  m.matrix_bytes = sum_of(matrix);
  m.cross_process_bytes = plan.stats().bytes_cross_process;
  m.array_bytes = plan.stats().bytes_total;
  return m;
}

// Throughput of every byte placed, beside Alltoallv of the whole matrix.
BenchFigure against_alltoallv(const std::string& what, const Measured& m, int processes,
                              std::optional<double> target = 0.9) {
  const double gib = static_cast<double>(m.matrix_bytes) / kGiB;
  const double array = static_cast<double>(m.array_bytes);
  const std::string size =
      array >= kGiB ? fmt::format("{:.0f} GiB", array / kGiB) : fmt::format("{:.0f} MiB", array / (1 << 20));
  return throughput_figure(fmt::format("reshard {} {}, {}", size, what, on_cores(processes)),
                           gib / m.reshard_seconds, "MPI_Alltoallv, same byte matrix", gib / m.alltoallv_seconds,
                           target);
}

// The bytes between processes alone, the reshard's time (all of it) beside
// Alltoallv's of those bytes: how this figure was shown before the baseline
// took the diagonal too.
BenchFigure against_alltoallv_between(const std::string& what, const Measured& m, int processes) {
  const double gib = static_cast<double>(m.cross_process_bytes) / kGiB;
  return throughput_figure(fmt::format("reshard {}, bytes between processes, {}", what, on_cores(processes)),
                           gib / m.reshard_seconds, "MPI_Alltoallv, the matrix less its diagonal",
                           gib / m.alltoallv_between_seconds, std::nullopt);
}

// Over several hosts: the bytes the plans take across hosts, beside the
// fewest any plan could (each host's slices less what it holds) and
// beside the same job's plans made blind to hosts.
void cross_host_figures(const std::string& what, std::span<const PlanKey> keys, std::span<const Plan> plans,
                        BenchReport& report) {
  const Topology& real = keys.front().topology;
  uint64_t crossing = 0, fewest = 0;
  for (size_t i = 0; i < plans.size(); ++i) {
    crossing += plans[i].stats().bytes_cross_host;
    for (uint64_t bytes : min_bytes_into_hosts(keys[i])) fewest += bytes;
  }
  std::vector<PlanKey> blind_keys(keys.begin(), keys.end());
  for (PlanKey& key : blind_keys) key.topology = Topology::uniform(real.num_devices(), real.num_processes());
  uint64_t blind = 0;
  for (const Plan& plan : make_plans(blind_keys)) {
    for (const Transfer& t : plan.transfers()) {
      if (real.host_of_process(real.process_of(t.src)) != real.host_of_process(real.process_of(t.dst))) {
        blind += dtype_byte_size(plan.key().dtype, static_cast<uint64_t>(t.box.volume()));
      }
    }
  }
  const std::string name = fmt::format("bytes across hosts, {}, {} hosts", what, real.num_hosts());
  report.figures.push_back(bytes_figure(name, crossing, "the per-host minimum", fewest));
  report.figures.push_back(bytes_figure(name, crossing, "plans blind to hosts", blind));
}

// The array made replicated on every device: the two-stage plan (each
// missing byte crosses into a process once) beside the per-device plan (each
// device fetches what it lacks itself), bytes and time.
void replicated_figures(const Topology& topology, int rank, Transport& transport, BenchReport& report) {
  // 64 MiB, split along its middle dimension over every device in order.
  const Shape shape{32, 512, 1024};
  const NamedSharding source_layout = split_middle(in_order(topology.num_devices()));
  const NamedSharding everywhere(Mesh({{"r", topology.num_devices()}}, in_order(topology.num_devices())),
                                 PartitionSpec());
  const PlanKey key{shape, DType::kF32, source_layout, everywhere, topology};
  const Plan two_stage = make_plan(key);
  const Plan per_device = make_plan(key, PlanOptions{false, false});
  ShardedArray source = ShardedArray::allocate(shape, DType::kF32, source_layout, topology, rank);
  fill(source);
  ShardedArray target = ShardedArray::allocate(shape, DType::kF32, everywhere, topology, rank);
  ExecuteOptions options;
  options.threads = 1;
  execute(two_stage, source, target, transport, options);
  execute(per_device, source, target, transport, options);
  const std::vector<std::function<double()>> runs{
      [&] { return job_seconds([&] { execute(two_stage, source, target, transport, options); }); },
      [&] { return job_seconds([&] { execute(per_device, source, target, transport, options); }); }};
  const std::vector<double> least = least_seconds_in_rotating_rounds(runs, kRepetitions);
  const double two_stage_s = least[0], per_device_s = least[1];
  report.figures.push_back(bytes_figure("bytes between processes, 64 MiB made replicated on every device",
                                        two_stage.stats().bytes_cross_process, "per-device plan",
                                        per_device.stats().bytes_cross_process));
  report.figures.push_back(time_figure("time, 64 MiB made replicated on every device", two_stage_s * 1e3,
                                       "per-device plan", per_device_s * 1e3, std::nullopt));
  if (topology.num_hosts() > 1) {
    cross_host_figures("64 MiB made replicated on every device", std::span(&key, 1), std::span(&two_stage, 1), report);
  }
}

// A Llama-shaped model of about 1 GiB in 309 tensors, fully sharded to
// tensor parallel: all arrays in one operation, beside one array at a time
// and beside MPI_Alltoallv of the same byte matrix.
void model_figures(const Topology& topology, int rank, Transport& transport, Transport& packed, Transport& typed,
                   BenchReport& report) {
  const std::vector<BenchTensor> model = llama_shaped_model(34, 1024, 3072, 48000);
  std::vector<PlanKey> keys;
  for (const BenchTensor& t : model) {
    keys.push_back(PlanKey{t.shape, t.dtype, fsdp_layout(t, topology), tensor_parallel_layout(t, topology), topology});
  }
  const std::vector<Plan> plans = make_plans(keys);
  const std::vector<ShardedArray> source = allocate_model(model, topology, rank, fsdp_layout);
  std::vector<ShardedArray> target = allocate_model(model, topology, rank, tensor_parallel_layout);
  const ByteMatrix matrix = byte_matrix(plans);
  AlltoallvBaseline baseline(matrix, rank);
  AlltoallvBaseline between(between_processes(matrix), rank);
  std::vector<std::byte> scratch;
  const auto one_pass = [&] {
    uint64_t at = 0;
    for (size_t i = 0; i < plans.size(); ++i) one_strided_pass(plans[i], source[i], scratch, at);
  };
  ExecuteOptions options;
  options.threads = 1;
  const auto one_at_a_time = [&] {
    for (size_t i = 0; i < plans.size(); ++i) execute(plans[i], source[i], target[i], transport, options);
  };
  const std::string path = path_while(transport, [&] { execute(plans, source, target, transport, options); });
  baseline.run();
  between.run();
  one_pass();
  const auto batch_through = [&](Transport& t) {
    return [&, through = &t] { return job_seconds([&] { execute(plans, source, target, *through, options); }); };
  };
  const std::vector<std::function<double()>> runs{[&] { return job_seconds([&] { baseline.run(); }); },
                                                  [&] { return job_seconds([&] { between.run(); }); },
                                                  [&] { return job_seconds(one_pass); },
                                                  batch_through(transport),
                                                  batch_through(packed),
                                                  batch_through(typed),
                                                  [&] { return job_seconds(one_at_a_time); }};
  const std::vector<double> least = least_seconds_in_rotating_rounds(runs, kModelRepetitions);
  const double alltoallv_s = least[0], between_s = least[1], pass_s = least[2], batched_s = least[3];
  const double packed_s = least[4], typed_s = least[5], single_s = least[6];
  const ByteMatrix sent_between = between_processes(matrix);
  const uint64_t cross = sum_of(sent_between);
  uint64_t largest_sender = 0;
  for (const auto& row : sent_between) largest_sender = std::max(largest_sender, std::accumulate(row.begin(), row.end(), uint64_t{0}));
  const double gib = static_cast<double>(sum_of(matrix)) / kGiB;
  const double cross_gib = static_cast<double>(cross) / kGiB;
  const std::string operation = fmt::format("model {:.2f} GiB in {} tensors, one operation",
                                            static_cast<double>(model_bytes(model)) / kGiB, model.size());
  const std::string cores = on_cores(topology.num_processes());
  const std::string name = fmt::format("{} ({}), {}", operation, path, cores);
  const std::string through_mpi = fmt::format("{}, {}", operation, cores);
  report.figures.push_back(throughput_figure(name, gib / batched_s, "one array at a time", gib / single_s, std::nullopt));
  report.figures.push_back(
      throughput_figure(name, gib / batched_s, "MPI_Alltoallv, same byte matrix", gib / alltoallv_s, 0.8));
  report.figures.push_back(throughput_figure(fmt::format("{}, bytes between processes, {}", operation, cores),
                                             cross_gib / batched_s, "MPI_Alltoallv, the matrix less its diagonal",
                                             cross_gib / between_s, std::nullopt));
  report.figures.push_back(throughput_figure(
      fmt::format("model: each transfer packed alone (one strided pass), no communication, {}", cores), gib / pass_s,
      "MPI_Alltoallv, same byte matrix", gib / alltoallv_s, std::nullopt));
  report.figures.push_back(throughput_figure(through_mpi, gib / packed_s,
                                             "MPI_Alltoallv (reshard packing, through MPI)", gib / alltoallv_s,
                                             std::nullopt));
  report.figures.push_back(throughput_figure(through_mpi, gib / typed_s, "MPI_Alltoallv (MPI derived datatypes)",
                                             gib / alltoallv_s, std::nullopt));
  BenchFigure sender;
  sender.name = "largest sender's bytes, whole model";
  sender.unit = "MiB";
  sender.value = static_cast<double>(largest_sender) / (1 << 20);
  sender.baseline_name = "even share";
  sender.baseline = static_cast<double>(cross) / topology.num_processes() / (1 << 20);
  sender.ratio = sender.value > 0 ? sender.baseline / sender.value : 0;
  report.figures.push_back(sender);
  if (topology.num_hosts() > 1) cross_host_figures("whole model", keys, plans, report);
}

// A replicated array held by the first half of the processes, moved to the
// second half: what the largest holder sends beside an even split (planned).
BenchFigure replicated_holders_figure(const Topology& topology) {
  const Shape shape{1024, 1024, 256};  // 1 GiB of f32
  std::vector<DeviceId> first, second;
  for (int p = 0; p < topology.num_processes(); ++p) {
    for (DeviceId d : topology.devices_of(p)) (2 * p < topology.num_processes() ? first : second).push_back(d);
  }
  const auto count = [](const std::vector<DeviceId>& d) { return static_cast<int64_t>(d.size()); };
  const NamedSharding from(Mesh({{"r", count(first)}}, first), PartitionSpec());
  const NamedSharding to(Mesh({{"r", count(second)}}, second), PartitionSpec());
  const PlanStats stats = make_plan(PlanKey{shape, DType::kF32, from, to, topology}).stats();
  const int holders = topology.num_processes() / 2;
  BenchFigure f;
  f.name = fmt::format("largest sender's bytes, replicated 1 GiB from {} processes to {} others", holders,
                       topology.num_processes() - holders);
  f.unit = "MiB";
  f.value = static_cast<double>(stats.max_process_send_bytes) / (1 << 20);
  f.baseline_name = "even share";
  f.baseline = static_cast<double>(stats.bytes_cross_process) / holders / (1 << 20);
  f.ratio = f.value > 0 ? f.baseline / f.value : 0;
  return f;
}

// RESHARD_BENCH_ONLY=loop: the split-dimension change again and again
// (RESHARD_BENCH_LOOPS times, 30 unless set), with no MPI call of the bench's
// own (no barrier, no baseline) between them, so every byte and every wait is
// reshard's, under its liveness bound: what the fault tests cut a link under.
// Reports the later reshards' rate beside the first one's.
BenchFigure reshard_loop_figure(const Topology& topology, int rank, Transport& transport) {
  const char* loops_env = std::getenv("RESHARD_BENCH_LOOPS");
  const int loops = loops_env != nullptr ? std::max(2, std::atoi(loops_env)) : 30;
  ShardedArray source = ShardedArray::allocate(split_shape(), DType::kF32,
                                               split_middle(in_order(topology.num_devices())), topology, rank);
  fill(source);
  const NamedSharding target_layout = split_last(processes_take_turns(topology.num_processes()));
  const Plan plan = make_plan(PlanKey{source.shape(), DType::kF32, source.sharding(), target_layout, topology});
  ShardedArray target = ShardedArray::allocate(source.shape(), DType::kF32, target_layout, topology, rank);
  const auto seconds_of = [&] {
    const auto start = std::chrono::steady_clock::now();
    execute(plan, source, target, transport);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const double first_s = seconds_of();
  double rest_s = 0;
  for (int i = 1; i < loops; ++i) rest_s += seconds_of();
  const double gib = static_cast<double>(plan.stats().bytes_cross_process) / kGiB;
  return throughput_figure(fmt::format("{} reshards in a row, split dimension, rank {}", loops, rank),
                           gib * (loops - 1) / rest_s, "the first one", gib / first_s, std::nullopt);
}

}  // namespace

BenchReport run_reshard_mpi_benchmark() {
  const JobWorld world = job_world();
  Transport& transport = job_transport();
  // The default moves bytes between processes of this host with one kernel
  // copy; the same job through MPI, packed by reshard and as MPI derived
  // datatypes, is what ranks on different hosts get.
  MpiTransportOptions packed_options;
  packed_options.single_copy = false;
  MpiTransport packed(MPI_COMM_WORLD, packed_options);
  MpiTransportOptions typed_options = packed_options;
  typed_options.derived_datatypes = true;
  MpiTransport typed(MPI_COMM_WORLD, typed_options);
  // The same processes joined again by the TCP transport (the one jobs that
  // mpirun did not start use), measured in the same rounds as MPI's.
  const std::unique_ptr<TcpTransport> tcp = tcp_beside(transport);
  Transport* const through_mpi[] = {&packed, &typed, tcp.get()};
  const int64_t devices = int64_t{kDevicesPerProcess} * world.size;
  // The hosts the ranks really run on: across hosts (the namespace hosts of
  // scripts/netns-hosts.sh, a pod) plans take each element into a host once.
  const Topology topology = with_job_hosts(Topology::uniform(devices, world.size));
  BenchReport report;
  report.benchmark = "reshard";
  const char* only_env = std::getenv("RESHARD_BENCH_ONLY");
  const std::string only = only_env != nullptr ? only_env : "";
  if (only == "loop") {
    report.figures.push_back(reshard_loop_figure(topology, world.rank, transport));
    return report;
  }
  if (only.empty() || only == "split") {
    ShardedArray source = ShardedArray::allocate(split_shape(), DType::kF32, split_middle(in_order(devices)), topology,
                                                 world.rank);
    fill(source);
    const Measured reorder = measure(source, split_middle(processes_take_turns(world.size)), transport);
    std::vector<double> mpi_seconds;
    const Measured transpose =
        measure(source, split_last(processes_take_turns(world.size)), transport, through_mpi, &mpi_seconds);
    report.figures.push_back(
        against_alltoallv(fmt::format("to another device order ({})", reorder.path), reorder, world.size, 1.2));
    report.figures.push_back(against_alltoallv_between("to another device order", reorder, world.size));
    report.figures.push_back(against_alltoallv(fmt::format("to another split dimension ({})", transpose.path),
                                               transpose, world.size));
    report.figures.push_back(against_alltoallv_between("to another split dimension", transpose, world.size));
    // Packing alone, per transfer (see one_strided_pass).
    Measured packing = transpose;
    packing.reshard_seconds = transpose.one_pass_seconds;
    report.figures.push_back(against_alltoallv(
        "split dimension: each transfer packed alone (one strided pass), no communication", packing,
        world.size, std::nullopt));
    const char* const mpi_names[] = {"(through MPI, packed by reshard)", "(through MPI, derived datatypes)",
                                     "(through the TCP transport)"};
    for (size_t i = 0; i < mpi_seconds.size(); ++i) {
      Measured through = transpose;
      through.reshard_seconds = mpi_seconds[i];
      report.figures.push_back(
          against_alltoallv(fmt::format("to another split dimension {}", mpi_names[i]), through, world.size,
                            std::nullopt));
    }
    // The TCP transport beside the MPI transport's path for ranks of different
    // hosts (packed by reshard, MPI's own TCP or shared memory underneath).
    const double moved = static_cast<double>(transpose.matrix_bytes) / kGiB;
    report.figures.push_back(throughput_figure(
        fmt::format("reshard to another split dimension through the TCP transport, {}", on_cores(world.size)),
        moved / mpi_seconds[2], "the same through the MPI transport (packed by reshard)", moved / mpi_seconds[0],
        0.9));
    BenchFigure bytes;
    bytes.name = "bytes between processes, split dimension change";
    bytes.unit = "GiB";
    bytes.value = static_cast<double>(transpose.cross_process_bytes) / kGiB;
    bytes.baseline_name = "replicate on every host, then slice";
    bytes.baseline = static_cast<double>(replicate_bytes(source.shape(), source.sharding(), topology)) / kGiB;
    bytes.ratio = bytes.value > 0 ? bytes.baseline / bytes.value : 0;  // how many times fewer
    report.figures.push_back(bytes);
  }
  if (only.empty()) replicated_figures(topology, world.rank, transport, report);
  if (only.empty() || only == "model") model_figures(topology, world.rank, transport, packed, typed, report);
  if (world.size >= 2) report.figures.push_back(replicated_holders_figure(topology));
  return report;
}

}  // namespace reshard::bench
