#include "reshard/execute/executor.h"

#include <exception>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "execute_moves.h"
#include "exchange.h"
#include "message_schedule.h"
#include "prepared_exchange.h"
#include "parallel_copy.h"
#include "reshard/execute/transport_calls.h"
#include "reshard/layout/error.h"

namespace reshard {

using execute_detail::ArrayMove;
using execute_detail::CopyJob;
using execute_detail::Exchange;
using execute_detail::PreparedExchange;
using execute_detail::ProcessMessages;
using execute_detail::execute_moves;
using execute_detail::prepare_exchange;
using execute_detail::run_copies;

namespace {

void check_array(const ShardedArray& array, const NamedSharding& sharding, const PlanKey& key, const char* which) {
  if (array.shape() != key.shape || array.dtype() != key.dtype || array.sharding() != sharding ||
      !array.topology().same_processes(key.topology)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("the {} array ({}[{}] on {}) is not the plan's ({}[{}] on {})", which,
                            dtype_name(array.dtype()), fmt::join(array.shape(), ", "), array.sharding().to_string(),
                            dtype_name(key.dtype), fmt::join(key.shape, ", "), sharding.to_string()));
  }
}

void check_inputs(const ArrayMove& move, const Transport& transport) {
  const PlanKey& key = move.plan->key();
  if (transport.size() != key.topology.num_processes()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("the plan's topology has {} processes but the transport has {}",
                            key.topology.num_processes(), transport.size()));
  }
  if (move.src->process() != transport.rank() || move.dst->process() != transport.rank()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("process {} was given the arrays of processes {} and {}", transport.rank(),
                            move.src->process(), move.dst->process()));
  }
  check_array(*move.src, key.src, key, "source");
  check_array(*move.dst, key.dst, key, "target");
  move.dst->check_writable();
}

// FNV-1a over what the message schedule depends on: the message size and each plan (its digest).
class Fingerprint {
 public:
  void add(uint64_t value) {
    for (int i = 0; i < 8; ++i) {
      hash_ = (hash_ ^ ((value >> (8 * i)) & 0xff)) * 0x100000001b3ULL;
    }
  }
  uint64_t value() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

uint64_t batch_fingerprint(std::span<const ArrayMove> moves, const ExecuteOptions& options) {
  Fingerprint f;
  f.add(options.message_bytes);
  f.add(moves.size());
  for (const ArrayMove& move : moves) f.add(move.plan->digest());
  return f.value();
}

// Every process must run the same plans, or their message schedules would not match.
void check_agreement(uint64_t fingerprint, Transport& transport) {
  if (!transport.all_equal(fingerprint)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("process {} runs different plans or options than another process: every process "
                            "must reshard the same arrays between the same layouts",
                            transport.rank()));
  }
}

// The prepared copies of one stage within this process, over these arrays'
// memory. Stage 0 reads the source arrays; stage 1 target shards that stage 0 filled.
std::vector<CopyJob> local_jobs(std::span<const ArrayMove> moves, const PreparedExchange& prepared, int stage) {
  std::vector<CopyJob> jobs;
  jobs.reserve(prepared.local.size());
  for (const PreparedExchange::LocalCopy& local : prepared.local) {
    const ArrayMove& move = moves[local.array];
    const ShardedArray& from_array = stage == 0 ? *move.src : *move.dst;
    jobs.push_back(CopyJob{local.copy, from_array.shards()[local.src_shard].buffer.data(),
                           move.dst->writable_bytes(local.dst_shard).data()});
  }
  return jobs;
}

uint64_t bytes_of(const std::vector<CopyJob>& jobs) {
  uint64_t bytes = 0;
  for (const CopyJob& job : jobs) bytes += job.copy.bytes();
  return bytes;
}

// Stage 0: local copies on their threads while the messages flow.
void run_stage_zero(std::span<const ArrayMove> moves, Transport& transport, Tag base, const ExecuteOptions& options,
                    ExecuteStats& stats) {
  const std::shared_ptr<const PreparedExchange> prepared =
      prepare_exchange(moves, transport.rank(), options.message_bytes, 0);
  const ProcessMessages& messages = prepared->messages;
  std::vector<CopyJob> jobs = local_jobs(moves, *prepared, 0);
  stats.bytes_copied += bytes_of(jobs);
  const int threads = options.copy_threads(processes_on_this_host(transport));
  if (messages.sends.empty() && messages.receives.empty()) {
    run_copies(jobs, threads);
    return;
  }
  // Copies that read what sends read may go with them (the transport's walk).
  Exchange exchange(moves, *prepared, transport, base, options.max_bytes_in_flight, threads, std::move(jobs));
  const std::vector<CopyJob> ours = exchange.copies_left_to_caller();
  std::exception_ptr copy_error;
  {
    std::jthread local([&] {
      try {
        run_copies(ours, threads);
      } catch (...) {
        copy_error = std::current_exception();
      }
    });
    // The exchange's gathers share the budget with the local copies: these
    // are the smaller part and end first, then the gathers have it alone.
    exchange.run(stats);
  }
  if (copy_error) std::rethrow_exception(copy_error);
}

bool has_stage(std::span<const ArrayMove> moves, int stage) {
  for (const ArrayMove& move : moves) {
    for (auto t = move.plan->transfers().rbegin(); t != move.plan->transfers().rend() && t->stage >= stage; ++t) {
      if (t->stage == stage) return true;
    }
  }
  return false;
}

// Stage 2: between processes of one host, from target shards that stages 0
// and 1 filled, as an exchange of its own (its own tags). Every process runs
// the same plans, so all of them agree on whether there is one.
void run_host_relay(std::span<const ArrayMove> moves, Transport& transport, const ExecuteOptions& options,
                    ExecuteStats& stats) {
  if (!has_stage(moves, 2)) return;
  const Tag base = transport.begin_operation();
  const std::shared_ptr<const PreparedExchange> prepared =
      prepare_exchange(moves, transport.rank(), options.message_bytes, 2);
  if (prepared->messages.sends.empty() && prepared->messages.receives.empty()) return;
  Exchange(moves, *prepared, transport, base, options.max_bytes_in_flight,
           options.copy_threads(processes_on_this_host(transport)))
      .run(stats);
}

ExecuteStats execute_unguarded(std::span<const ArrayMove> moves, Transport& transport,
                               const ExecuteOptions& options) {
  for (size_t i = 0; i < moves.size(); ++i) {
    try {
      check_inputs(moves[i], transport);
    } catch (const Error& e) {
      if (moves.size() == 1) throw;
      throw e.with_context(fmt::format("array {} of the batch", i));
    }
  }
  const Tag base = transport.begin_operation();
  if (transport.size() > 1) check_agreement(batch_fingerprint(moves, options), transport);
  ExecuteStats stats;
  run_stage_zero(moves, transport, base, options, stats);
  // Stage 1 reads what stage 0 wrote, all of which is in place now.
  const std::vector<CopyJob> fan_out =
      local_jobs(moves, *prepare_exchange(moves, transport.rank(), options.message_bytes, 1), 1);
  stats.bytes_copied += bytes_of(fan_out);
  run_copies(fan_out, options.copy_threads(processes_on_this_host(transport)));
  run_host_relay(moves, transport, options, stats);
  return stats;
}

}  // namespace

int ExecuteOptions::copy_threads(int processes_on_host) const {
  if (threads > 0) return threads;
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, processes_on_host));
}

ExecuteStats execute_detail::execute_moves(std::span<const ArrayMove> moves, Transport& transport,
                                           const ExecuteOptions& options) {
  try {
    return execute_unguarded(moves, transport, options);
  } catch (const std::exception& e) {
    transport.abort(e.what());
    throw;
  }
}

ExecuteStats execute(const Plan& plan, const ShardedArray& src, ShardedArray& dst, Transport& transport,
                     const ExecuteOptions& options) {
  const ArrayMove move{&plan, &src, &dst};
  return execute_moves(std::span<const ArrayMove>(&move, 1), transport, options);
}

ExecuteStats execute(std::span<const Plan> plans, std::span<const ShardedArray> src, std::span<ShardedArray> dst,
                     Transport& transport, const ExecuteOptions& options) {
  std::vector<ArrayMove> moves;
  try {
    if (src.size() != plans.size() || dst.size() != plans.size()) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("a batch of {} plans was given {} source and {} target arrays", plans.size(),
                              src.size(), dst.size()));
    }
    for (size_t i = 0; i < plans.size(); ++i) moves.push_back(ArrayMove{&plans[i], &src[i], &dst[i]});
  } catch (const std::exception& e) {
    transport.abort(e.what());
    throw;
  }
  return execute_moves(moves, transport, options);
}

}  // namespace reshard
