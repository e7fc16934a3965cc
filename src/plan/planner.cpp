#include "reshard/plan/planner.h"

#include <fmt/format.h>

#include "chunk_pieces.h"
#include "replica_chooser.h"
#include "reshard/layout/error.h"

namespace reshard {
namespace {

// The tiling of one side, with every mesh device checked against the job.
Tiling checked_tiling(const NamedSharding& sharding, const PlanKey& key, std::string_view side) {
  try {
    Tiling tiling = sharding.tiling(key.shape);
    for (DeviceId d : sharding.mesh().devices()) {
      if (!key.topology.contains(d)) {
        throw Error(ErrorCode::kUnknownDevice,
                    fmt::format("mesh device {} is not in the job (devices are 0..{})", d,
                                key.topology.num_devices() - 1));
      }
    }
    return tiling;
  } catch (const Error& e) {
    throw e.with_context(fmt::format("{} layout", side));
  }
}

}  // namespace

Plan make_plan(const PlanKey& key) {
  const Tiling src_tiling = checked_tiling(key.src, key, "source");
  const Tiling dst_tiling = checked_tiling(key.dst, key, "target");
  plan_detail::PieceFinder finder(src_tiling, dst_tiling, key.dtype);
  plan_detail::ReplicaChooser chooser(key.src, src_tiling, finder.src_index(), key.topology);
  std::vector<Transfer> transfers;
  size_t count = 0;
  for (int64_t logical = 0; logical < dst_tiling.num_devices; ++logical) {
    count += finder.count_pieces(dst_tiling.chunk_of_device(logical));
  }
  transfers.reserve(count);
  const std::vector<DeviceId>& targets = key.dst.mesh().devices();
  for (size_t logical = 0; logical < targets.size(); ++logical) {
    const DeviceId dst = targets[logical];
    const int dst_process = key.topology.process_of(dst);
    for (plan_detail::Piece& piece : finder.take_pieces(dst_tiling.chunk_of_device(static_cast<int64_t>(logical)))) {
      transfers.push_back({chooser.choose(piece.src_chunk, dst, dst_process, piece.bytes), dst, std::move(piece.box)});
    }
  }
  return Plan(key, std::move(transfers));
}

}  // namespace reshard
