#include "reshard/plan/planner.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "chunk_pieces.h"
#include "fan_out.h"
#include "layout/checked.h"
#include "repeated_keys.h"
#include "replica_chooser.h"
#include "reshard/layout/error.h"
#include "sender_balance.h"
#include "share_split.h"

namespace reshard {

using layout_detail::checked_add;

namespace {

using plan_detail::ChunkIndex;
using plan_detail::Piece;
using plan_detail::PieceFinder;
using ProcessHolder = plan_detail::ReplicaChooser::ProcessHolder;
using plan_detail::ReplicaChooser;
using plan_detail::SendGroup;

// The tiling of one side, with every mesh device checked against the job.
Tiling checked_tiling(const NamedSharding& sharding, const PlanKey& key, std::string_view side) {
  try {
    Tiling tiling = sharding.tiling(key.shape);
    key.topology.check_contains(sharding.mesh().devices(), "the mesh");
    return tiling;
  } catch (const Error& e) {
    throw e.with_context(fmt::format("{} layout", side));
  }
}

constexpr DeviceId kSenderPending = -1;
constexpr size_t kNoGroup = static_cast<size_t>(-1);

// A stage-0 transfer whose sender waits for the batch's balancing.
struct PendingPiece {
  size_t transfer = 0;  // index into the array's stage-0 transfers
  size_t group = 0;     // index into the batch's send groups
  uint64_t bytes = 0;
  int64_t src_chunk = 0;
};

// One array's plan in the making.
struct ArrayPlan {
  explicit ArrayPlan(std::shared_ptr<ReplicaChooser> c) : chooser(std::move(c)) {}
  std::shared_ptr<ReplicaChooser> chooser;  // shared with the array's repeats
  std::vector<Transfer> stage0;
  std::vector<Transfer> stage1;
  std::vector<Transfer> stage2;
  std::vector<PendingPiece> pending;
  std::vector<size_t> group_of_chunk;  // source chunk tuple -> send group, once seen
  std::vector<uint64_t> fixed_added;   // bytes this array added to the batch's `fixed`, by process
};

// A pending piece its holders send in several parts.
struct Split {
  size_t pending = 0;  // index into the array's pending pieces
  std::vector<plan_detail::RowRange> parts;
};

// Plans the arrays of one operation: cuts each into pieces as they come,
// settling every sender it can at once, and those a choice of holder
// processes could send once the whole batch's load is known.
class BatchPlanner {
 public:
  explicit BatchPlanner(const PlanOptions& options) : options_(options) {}

  // `key` must outlive the planner (it is remembered, to spot its repeats).
  void add(const PlanKey& key) {
    // A model repeats a handful of layouts over all its layers: every part of
    // an array's plan except the shares of pending pieces (settled in
    // finish(), by batch order) depends on its key alone, so a repeated key
    // copies the first one's plan instead of planning again.
    if (const std::optional<size_t> first = repeated_.first_of(key, arrays_.size())) return repeat(*first);
    plan_fresh(key);
  }

  std::vector<Plan> finish(std::span<const PlanKey> keys) {
    const std::vector<std::vector<uint64_t>> shares = plan_detail::balance_sends(fixed_, groups_);
    std::vector<std::vector<uint64_t>> ends(shares.size());
    for (size_t g = 0; g < shares.size(); ++g) {
      uint64_t sum = 0;
      for (uint64_t share : shares[g]) ends[g].push_back(sum += share);
    }
    std::vector<uint64_t> placed(groups_.size(), 0);  // bytes of each group handed out so far
    std::vector<Plan> plans;
    plans.reserve(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) plans.emplace_back(keys[i], transfers_of(arrays_[i], ends, placed));
    return plans;
  }

 private:
  // Plans `key` from its layouts: cuts it into pieces, settling every sender
  // it can at once and leaving the shared ones pending.
  void plan_fresh(const PlanKey& key) {
    const Tiling src_tiling = checked_tiling(key.src, key, "source");
    const Tiling dst_tiling = checked_tiling(key.dst, key, "target");
    PieceFinder finder(src_tiling, dst_tiling, key.dtype);
    ArrayPlan& array = arrays_.emplace_back(
        std::make_shared<ReplicaChooser>(key.src, src_tiling, finder.src_index(), key.topology));
    if (fixed_.size() < static_cast<size_t>(key.topology.num_processes())) {
      fixed_.resize(static_cast<size_t>(key.topology.num_processes()), 0);
    }
    const ChunkIndex dst_index(dst_tiling);
    const std::vector<DeviceId> receivers =
        options_.fan_out ? plan_detail::stage0_receivers(key.dst, dst_tiling, dst_index, key.topology)
                         : std::vector<DeviceId>{};
    // Where processes share hosts, a piece no process of the host holds
    // crosses into the host once, to the host's lowest device needing it.
    const bool by_host = options_.fan_out && key.topology.hosts_shared();
    const std::vector<DeviceId> host_receivers =
        by_host ? plan_detail::stage0_receivers(key.dst, dst_tiling, dst_index, key.topology,
                                                plan_detail::ReceiverScope::kHost)
                : std::vector<DeviceId>{};
    // Room for every piece in stage 0 (stage 1 is appended there at the end)
    // and for those of devices that others receive for in stage 1.
    size_t count = 0;
    size_t fanned = 0;
    for (int64_t logical = 0; logical < dst_tiling.num_devices; ++logical) {
      const size_t pieces = finder.count_pieces(dst_tiling.chunk_of_device(logical));
      count += pieces;
      const auto l = static_cast<size_t>(logical);
      if (options_.fan_out && receivers[l] != key.dst.mesh().devices()[l]) fanned += pieces;
    }
    array.stage0.reserve(count);
    array.stage1.reserve(fanned);
    const std::vector<DeviceId>& targets = key.dst.mesh().devices();
    for (size_t logical = 0; logical < targets.size(); ++logical) {
      const DeviceId dst = targets[logical];
      const int dst_process = key.topology.process_of(dst);
      const int dst_host = key.topology.host_of_process(dst_process);
      const DeviceId receiver = options_.fan_out ? receivers[logical] : dst;
      const DeviceId host_receiver = by_host ? host_receivers[logical] : receiver;
      for (Piece& piece : finder.take_pieces(dst_tiling.chunk_of_device(static_cast<int64_t>(logical)))) {
        if (const std::optional<DeviceId> home = array.chooser->local(piece.src_chunk, dst, dst_process)) {
          array.stage0.push_back({*home, dst, std::move(piece.box)});
          continue;
        }
        const std::span<const ProcessHolder> on_host =
            by_host ? holders_on_host(array, piece.src_chunk, dst_host, key.topology) : std::span<const ProcessHolder>{};
        if (receiver != dst && (!on_host.empty() || key.topology.process_of(host_receiver) == dst_process)) {
          array.stage1.push_back({receiver, dst, std::move(piece.box), 1});
        } else if (on_host.empty() && host_receiver != dst) {
          array.stage2.push_back({host_receiver, dst, std::move(piece.box), 2});
        } else {
          const DeviceId src = remote_sender(array, piece, on_host);
          array.stage0.push_back({src, dst, std::move(piece.box)});
        }
      }
    }
  }

  // The holders of `src_chunk` on `host` (into a buffer reused per piece).
  std::span<const ProcessHolder> holders_on_host(const ArrayPlan& array, int64_t src_chunk, int host,
                                                 const Topology& topology) {
    on_host_.clear();
    for (const ProcessHolder& holder : array.chooser->processes_holding(src_chunk)) {
      if (topology.host_of_process(holder.process) == host) on_host_.push_back(holder);
    }
    return on_host_;
  }

  // A repeat of array `first` (planned from an equal key): a copy of its
  // transfers and pending pieces, and the same load added to the batch.
  void repeat(size_t first) {
    ArrayPlan array(arrays_[first].chooser);
    const ArrayPlan& original = arrays_[first];
    for (size_t p = 0; p < original.fixed_added.size(); ++p) {
      fixed_[p] = checked_add(fixed_[p], original.fixed_added[p], "bytes sent by one process");
    }
    for (const PendingPiece& piece : original.pending) {
      SendGroup& group = groups_[piece.group];
      group.bytes = checked_add(group.bytes, piece.bytes, "bytes shared by holder processes");
    }
    // With room for stage 1, as plan_fresh() leaves it (see transfers_of()).
    array.stage0.reserve(original.stage0.size() + original.stage1.size());
    array.stage0.insert(array.stage0.end(), original.stage0.begin(), original.stage0.end());
    array.stage1 = original.stage1;
    array.stage2 = original.stage2;
    array.pending = original.pending;
    arrays_.push_back(std::move(array));  // after the copies: this may move `original`
  }

  // The sender of a piece no device of the target's process holds, or
  // kSenderPending when several processes could send it: one of `on_host`
  // (the holders on the target's host) when there are any, else any holder.
  DeviceId remote_sender(ArrayPlan& array, const Piece& piece, std::span<const ProcessHolder> on_host) {
    if (!options_.balance_senders && on_host.empty()) return array.chooser->least_loaded(piece.src_chunk, piece.bytes);
    const auto holders = on_host.empty() ? array.chooser->processes_holding(piece.src_chunk) : on_host;
    if (holders.size() <= 1) {  // none is impossible; least_loaded says so
      if (holders.empty()) return array.chooser->least_loaded(piece.src_chunk, piece.bytes);
      add_fixed(array, holders.front().process, piece.bytes);
      return holders.front().device;
    }
    if (!options_.balance_senders) return holders.front().device;
    const size_t group = on_host.empty() ? group_of(array, piece.src_chunk) : group_of(on_host);
    groups_[group].bytes = checked_add(groups_[group].bytes, piece.bytes, "bytes shared by holder processes");
    array.pending.push_back({array.stage0.size(), group, piece.bytes, piece.src_chunk});
    return kSenderPending;
  }

  // Counts `bytes` that only `process` can send against it, and against the
  // array (for its repeats).
  void add_fixed(ArrayPlan& array, int process, uint64_t bytes) {
    const auto p = static_cast<size_t>(process);
    fixed_[p] = checked_add(fixed_[p], bytes, "bytes sent by one process");
    if (array.fixed_added.size() <= p) array.fixed_added.resize(fixed_.size(), 0);
    array.fixed_added[p] += bytes;  // at most fixed_[p]: cannot overflow
  }

  // The send group of the processes holding `src_chunk`, shared by every
  // array of the batch whose pieces these same processes hold.
  size_t group_of(ArrayPlan& array, int64_t src_chunk) {
    const auto chunk = static_cast<size_t>(src_chunk);
    if (array.group_of_chunk.empty()) array.group_of_chunk.assign(array.chooser->num_chunks(), kNoGroup);
    size_t& group = array.group_of_chunk[chunk];
    if (group != kNoGroup) return group;
    return group = group_of(array.chooser->processes_holding(src_chunk));
  }

  // The send group of exactly these holder processes.
  size_t group_of(std::span<const ProcessHolder> holder_processes) {
    std::vector<int> holders;
    for (const ProcessHolder& holder : holder_processes) holders.push_back(holder.process);
    const auto [it, inserted] = group_ids_.try_emplace(holders, groups_.size());
    if (inserted) groups_.push_back({std::move(holders), 0});
    return it->second;
  }

  // The lowest device of holder `holder` of group `group` holding `src_chunk`.
  DeviceId holder_device(const ArrayPlan& array, int64_t src_chunk, size_t group, size_t holder) const {
    const int process = groups_[group].holders[holder];
    const auto holders = array.chooser->processes_holding(src_chunk);
    const auto it = std::lower_bound(holders.begin(), holders.end(), process,
                                     [](const ProcessHolder& p, int wanted) { return p.process < wanted; });
    return it->device;  // the group's holders are some of the chunk's
  }

  // The array's transfers: stage 0 with every pending piece given its
  // holders' parts (in the batch's order of pieces), then stage 1, moved.
  std::vector<Transfer> transfers_of(ArrayPlan& array, const std::vector<std::vector<uint64_t>>& ends,
                                     std::vector<uint64_t>& placed) {
    if (choose_senders(array, ends, placed) > 0) return with_splits(array);
    // The common case: senders set in place, and stage 1 appended without
    // moving stage 0 (reserved for every piece of both stages).
    for (size_t n = 0; n < array.pending.size(); ++n) array.stage0[array.pending[n].transfer].src = senders_[n];
    std::move(array.stage1.begin(), array.stage1.end(), std::back_inserter(array.stage0));
    std::move(array.stage2.begin(), array.stage2.end(), std::back_inserter(array.stage0));
    return std::move(array.stage0);
  }

  // transfers_of() when some pending pieces are cut into parts (splits_).
  std::vector<Transfer> with_splits(ArrayPlan& array) {
    size_t extra = 0;
    for (const Split& split : splits_) extra += split.parts.size() - 1;
    std::vector<Transfer> out;
    out.reserve(array.stage0.size() + extra + array.stage1.size() + array.stage2.size());
    size_t n = 0;      // the next pending piece
    size_t split = 0;  // the next split one
    for (size_t k = 0; k < array.stage0.size(); ++k) {
      const bool pending = n < array.pending.size() && array.pending[n].transfer == k;
      if (pending && split < splits_.size() && splits_[split].pending == n) {
        append_parts(out, array, array.stage0[k], splits_[split++]);
      } else {
        out.push_back(std::move(array.stage0[k]));
        if (pending) out.back().src = senders_[n];
      }
      n += pending;
    }
    std::move(array.stage1.begin(), array.stage1.end(), std::back_inserter(out));
    std::move(array.stage2.begin(), array.stage2.end(), std::back_inserter(out));
    return out;
  }

  // The sender of each of the array's pending pieces (senders_, by pending
  // index), from its group's shares in the batch's order of pieces; the
  // pieces several holders send in parts go to splits_. Returns how many
  // pieces are split.
  size_t choose_senders(const ArrayPlan& array, const std::vector<std::vector<uint64_t>>& ends,
                        std::vector<uint64_t>& placed) {
    senders_.resize(array.pending.size());
    splits_.clear();
    for (size_t n = 0; n < array.pending.size(); ++n) {
      const PendingPiece& p = array.pending[n];
      const size_t holder = holder_of(array, n, placed[p.group], ends[p.group]);
      senders_[n] = holder_device(array, p.src_chunk, p.group, holder);
      placed[p.group] += p.bytes;
    }
    return splits_.size();
  }

  // The holder that sends pending piece n (the first, if it is split: then
  // its parts go to splits_), the piece occupying bytes [begin, begin +
  // bytes) of its group, holder j sending [ends[j - 1], ends[j]).
  size_t holder_of(const ArrayPlan& array, size_t n, uint64_t begin, std::span<const uint64_t> ends) {
    const PendingPiece& p = array.pending[n];
    // Most pieces lie within one holder's bytes: that one sends the piece
    // whole, as split_by_shares() would say, without reading the (cold) box.
    const auto first = std::upper_bound(ends.begin(), ends.end(), begin);
    if (first != ends.end() && p.bytes <= *first - begin) return static_cast<size_t>(first - ends.begin());
    plan_detail::split_by_shares(array.stage0[p.transfer].box, begin, p.bytes, ends, parts_);
    if (parts_.size() > 1) splits_.push_back({n, parts_});
    return parts_.front().holder;
  }

  // The parts of pending piece `whole`, each from its holder.
  void append_parts(std::vector<Transfer>& out, const ArrayPlan& array, const Transfer& whole,
                    const Split& split) const {
    const size_t dim = plan_detail::cut_dimension(whole.box);
    const PendingPiece& piece = array.pending[split.pending];
    for (const plan_detail::RowRange& range : split.parts) {
      out.push_back({holder_device(array, piece.src_chunk, piece.group, range.holder), whole.dst,
                     plan_detail::rows_of(whole.box, dim, range)});
    }
  }

  PlanOptions options_;
  std::vector<ArrayPlan> arrays_;
  std::vector<uint64_t> fixed_;  // bytes only one process can send, by process
  std::vector<SendGroup> groups_;
  std::map<std::vector<int>, size_t> group_ids_;
  plan_detail::RepeatedKeys repeated_;
  // Reused by transfers_of() for every array.
  std::vector<DeviceId> senders_;
  std::vector<Split> splits_;
  std::vector<plan_detail::RowRange> parts_;
  std::vector<ProcessHolder> on_host_;
};

}  // namespace

std::vector<Plan> make_plans(std::span<const PlanKey> keys, const PlanOptions& options) {
  BatchPlanner planner(options);
  for (size_t i = 0; i < keys.size(); ++i) {
    try {
      planner.add(keys[i]);
    } catch (const Error& e) {
      if (keys.size() == 1) throw;
      throw e.with_context(fmt::format("array {} of {}", i, keys.size()));
    }
  }
  return planner.finish(keys);
}

Plan make_plan(const PlanKey& key, const PlanOptions& options) {
  return std::move(make_plans(std::span(&key, 1), options).front());
}

}  // namespace reshard
