#include "reshard/execute/executor.h"

#include <array>
#include <cstring>
#include <exception>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "exchange.h"
#include "message_schedule.h"
#include "parallel_copy.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

void check_array(const ShardedArray& array, const NamedSharding& sharding, const PlanKey& key, const char* which) {
  if (array.shape() != key.shape || array.dtype() != key.dtype || array.sharding() != sharding ||
      array.topology() != key.topology) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("the {} array ({}[{}] on {}) is not the plan's ({}[{}] on {})", which,
                            dtype_name(array.dtype()), fmt::join(array.shape(), ", "), array.sharding().to_string(),
                            dtype_name(key.dtype), fmt::join(key.shape, ", "), sharding.to_string()));
  }
}

void check_inputs(const Plan& plan, const ShardedArray& src, const ShardedArray& dst, const Transport& transport) {
  const PlanKey& key = plan.key();
  if (transport.size() != key.topology.num_processes()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("the plan's topology has {} processes but the transport has {}",
                            key.topology.num_processes(), transport.size()));
  }
  if (src.process() != transport.rank() || dst.process() != transport.rank()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("process {} was given the arrays of processes {} and {}", transport.rank(),
                            src.process(), dst.process()));
  }
  check_array(src, key.src, key, "source");
  check_array(dst, key.dst, key, "target");
  dst.check_writable();
}

// FNV-1a over everything the message schedule depends on.
class Fingerprint {
 public:
  void add(uint64_t value) {
    for (int i = 0; i < 8; ++i) {
      hash_ = (hash_ ^ ((value >> (8 * i)) & 0xff)) * 0x100000001b3ULL;
    }
  }
  void add(const std::vector<int64_t>& values) {
    add(values.size());
    for (int64_t v : values) add(static_cast<uint64_t>(v));
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

uint64_t plan_fingerprint(const Plan& plan, const ExecuteOptions& options) {
  Fingerprint f;
  f.add(plan.key().shape);
  f.add(static_cast<uint64_t>(plan.key().dtype));
  f.add(options.chunk_bytes);
  for (const Transfer& t : plan.transfers()) {
    f.add(static_cast<uint64_t>(t.src));
    f.add(static_cast<uint64_t>(t.dst));
    f.add(t.box.origin());
    f.add(t.box.shape());
  }
  return f.value();
}

// Every process must run the same plan, or their message schedules would not match.
void check_agreement(uint64_t fingerprint, Transport& transport) {
  std::array<std::byte, sizeof fingerprint> local{};
  std::memcpy(local.data(), &fingerprint, sizeof fingerprint);
  const auto all = transport.all_gather(local);
  for (size_t rank = 0; rank < all.size(); ++rank) {
    if (all[rank].size() != local.size() || std::memcmp(all[rank].data(), local.data(), local.size()) != 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("process {} runs a different plan or options than process {}: every process "
                              "must reshard the same array between the same layouts",
                              rank, transport.rank()));
    }
  }
}

std::vector<CopyJob> local_jobs(const Plan& plan, const ShardedArray& src, ShardedArray& dst) {
  const Topology& topology = plan.key().topology;
  const int process = src.process();
  std::vector<CopyJob> jobs;
  for (const Transfer& t : plan.transfers()) {
    if (topology.process_of(t.src) != process || topology.process_of(t.dst) != process) continue;
    const Shard& from = src.shard(t.src);
    Shard& to = dst.mutable_shard(t.dst);
    jobs.push_back(CopyJob{BoxCopy(t.box, from.box, to.box, src.element_bytes()), from.buffer.data(),
                           to.buffer.data()});
  }
  return jobs;
}

ExecuteStats execute_unguarded(const Plan& plan, const ShardedArray& src, ShardedArray& dst, Transport& transport,
                               const ExecuteOptions& options) {
  check_inputs(plan, src, dst, transport);
  const Tag base = transport.begin_operation();
  if (transport.size() > 1) check_agreement(plan_fingerprint(plan, options), transport);
  const ProcessMessages messages = schedule_messages(plan, transport.rank(), options.chunk_bytes);
  const std::vector<CopyJob> jobs = local_jobs(plan, src, dst);
  ExecuteStats stats;
  for (const CopyJob& job : jobs) stats.bytes_copied += job.copy.bytes();
  const int threads = options.copy_threads();
  if (messages.sends.empty() && messages.receives.empty()) {
    run_copies(jobs, threads);
    return stats;
  }
  // Local copies proceed while messages flow.
  std::exception_ptr copy_error;
  {
    std::jthread local([&] {
      try {
        run_copies(jobs, threads);
      } catch (...) {
        copy_error = std::current_exception();
      }
    });
    Exchange(plan, messages, src, dst, transport, base, options.max_bytes_in_flight).run(stats);
  }
  if (copy_error) std::rethrow_exception(copy_error);
  return stats;
}

}  // namespace

int ExecuteOptions::copy_threads() const {
  if (threads > 0) return threads;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

ExecuteStats execute(const Plan& plan, const ShardedArray& src, ShardedArray& dst, Transport& transport,
                     const ExecuteOptions& options) {
  try {
    return execute_unguarded(plan, src, dst, transport, options);
  } catch (const std::exception& e) {
    transport.abort(e.what());
    throw;
  }
}

}  // namespace reshard
