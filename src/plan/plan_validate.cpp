// Plan::validate: checks a plan against its key from first principles, sharing
// nothing with the planner, so a planner bug cannot hide behind it.
#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "layout/checked.h"
#include "plan/box_overlap.h"
#include "reshard/layout/error.h"
#include "reshard/plan/plan.h"

namespace reshard {

using layout_detail::checked_add;
using plan_detail::find_overlap;

namespace {

[[noreturn]] void invalid(const std::string& message) {
  throw Error(ErrorCode::kInvalidPlan, "invalid plan: " + message);
}

// Device id -> its slice, for every device of the sharding's mesh.
std::unordered_map<DeviceId, Box> slices_by_device(const NamedSharding& sharding, const PlanKey& key,
                                                   std::string_view side) {
  std::vector<Box> boxes;
  try {
    boxes = sharding.index_domains(key.shape);
  } catch (const Error& e) {
    invalid(fmt::format("the {} sharding does not fit the array: {}", side, e.what()));
  }
  std::unordered_map<DeviceId, Box> slices;
  const std::vector<DeviceId>& devices = sharding.mesh().devices();
  for (size_t logical = 0; logical < devices.size(); ++logical) {
    if (!key.topology.contains(devices[logical])) {
      invalid(fmt::format("{} mesh device {} is not in the job (devices are 0..{})", side,
                          devices[logical], key.topology.num_devices() - 1));
    }
    slices.emplace(devices[logical], boxes[logical]);
  }
  return slices;
}

std::string describe(const Transfer& t, size_t index) {
  return fmt::format("transfer {} (stage {}, device {} -> device {}, box {})", index, t.stage, t.src, t.dst,
                     t.box.to_string());
}

// The elements `a` and `b` share, counted without building their intersection.
int64_t shared_volume(const Box& a, const Box& b) {
  int64_t volume = 1;
  for (size_t d = 0; d < a.rank(); ++d) {
    const int64_t begin = std::max(a.origin()[d], b.origin()[d]);
    const int64_t end = std::min(a.origin()[d] + a.shape()[d], b.origin()[d] + b.shape()[d]);
    if (end <= begin) return 0;
    volume *= end - begin;
  }
  return volume;
}

// Where a transfer's source must hold its box: the source layout in stage 0,
// a target device of the same process in stage 1 (its cover is checked later).
void check_source(const Transfer& t, size_t index, const PlanKey& key,
                  const std::unordered_map<DeviceId, Box>& src_slices,
                  const std::unordered_map<DeviceId, Box>& dst_slices) {
  if (t.stage == 0) {
    const auto src = src_slices.find(t.src);
    if (src == src_slices.end()) {
      invalid(fmt::format("{}: source device {} is not in the source mesh", describe(t, index), t.src));
    }
    if (!src->second.contains(t.box)) {
      invalid(fmt::format("{}: source device {} holds only {}", describe(t, index), t.src,
                          src->second.to_string()));
    }
    return;
  }
  if (t.stage != 1 && t.stage != 2) {
    invalid(fmt::format("{} has stage {}; stages are 0, 1 and 2", describe(t, index), t.stage));
  }
  if (!dst_slices.contains(t.src)) {
    invalid(fmt::format("{}: a stage-{} source must be a target device, and device {} is not in the target mesh",
                        describe(t, index), t.stage, t.src));
  }
  if (t.src == t.dst) invalid(fmt::format("{} copies a device onto itself in stage {}", describe(t, index), t.stage));
  const int from = key.topology.process_of(t.src);
  const int to = key.topology.process_of(t.dst);
  if (t.stage == 1 && from != to) {
    invalid(fmt::format("{} crosses from process {} to process {}; stage 1 stays inside one process",
                        describe(t, index), from, to));
  }
  if (t.stage == 2 && (from == to || key.topology.host_of_process(from) != key.topology.host_of_process(to))) {
    invalid(fmt::format("{} goes from process {} (host {}) to process {} (host {}); stage 2 goes between two "
                        "processes of one host",
                        describe(t, index), from, key.topology.host_of_process(from), to,
                        key.topology.host_of_process(to)));
  }
}

// One transfer on its own: shape, bounds, and both ends holding the box.
void check_transfer(const Transfer& t, size_t index, const Box& whole, const PlanKey& key,
                    const std::unordered_map<DeviceId, Box>& src_slices,
                    const std::unordered_map<DeviceId, Box>& dst_slices) {
  if (t.box.rank() != whole.rank()) {
    invalid(fmt::format("{} has rank {} but the array has rank {}", describe(t, index), t.box.rank(),
                        whole.rank()));
  }
  if (t.box.empty()) invalid(fmt::format("{} is empty", describe(t, index)));
  if (!whole.contains(t.box)) {
    invalid(fmt::format("{} lies outside the array {}", describe(t, index), whole.to_string()));
  }
  const auto dst = dst_slices.find(t.dst);
  if (dst == dst_slices.end()) {
    invalid(fmt::format("{}: target device {} is not in the target mesh", describe(t, index), t.dst));
  }
  if (!dst->second.contains(t.box)) {
    invalid(fmt::format("{}: target device {} needs only {}", describe(t, index), t.dst,
                        dst->second.to_string()));
  }
  check_source(t, index, key, src_slices, dst_slices);
}

// A stage-1 or stage-2 source must have received the whole box in stage 0
// (not in a later stage: no chains). Its stage-0 boxes are disjoint (check_cover ran first), so
// their shared volumes with the box add up to the box exactly when they cover it.
void check_stage1_source(const Transfer& t, size_t index, const std::vector<Transfer>& transfers,
                         const std::vector<size_t>& stage0_into_source) {
  int64_t covered = 0;
  for (size_t i : stage0_into_source) covered += shared_volume(transfers[i].box, t.box);
  if (covered != t.box.volume()) {
    invalid(fmt::format("{}: device {} receives only {} of its {} elements in stage 0", describe(t, index), t.src,
                        covered, t.box.volume()));
  }
}

// The transfers into one device, all inside its slice, must tile it exactly:
// pairwise disjoint, and together as large as the slice.
void check_cover(DeviceId device, const Box& slice, const std::vector<Transfer>& transfers,
                 const std::vector<size_t>& into_device) {
  std::vector<Box> boxes;
  boxes.reserve(into_device.size());
  int64_t covered = 0;
  for (size_t i : into_device) {
    boxes.push_back(transfers[i].box);
    covered = checked_add(covered, transfers[i].box.volume(), "plan coverage");
  }
  if (const auto overlap = find_overlap(boxes)) {
    const size_t a = into_device[overlap->first];
    const size_t b = into_device[overlap->second];
    invalid(fmt::format("target device {} receives {} twice: {} and {}", device,
                        transfers[a].box.intersect(transfers[b].box).to_string(), describe(transfers[a], a),
                        describe(transfers[b], b)));
  }
  if (covered != slice.volume()) {
    invalid(fmt::format("target device {} receives {} of the {} elements of its slice {} (a gap)", device,
                        covered, slice.volume(), slice.to_string()));
  }
}

}  // namespace

void Plan::validate() const {
  const auto src_slices = slices_by_device(key_.src, key_, "source");
  const auto dst_slices = slices_by_device(key_.dst, key_, "target");
  const Box whole = Box::whole(key_.shape);
  std::unordered_map<DeviceId, std::vector<size_t>> by_target;
  std::unordered_map<DeviceId, std::vector<size_t>> stage0_by_target;
  for (size_t i = 0; i < transfers_.size(); ++i) {
    const Transfer& t = transfers_[i];
    check_transfer(t, i, whole, key_, src_slices, dst_slices);
    if (i > 0 && t.stage < transfers_[i - 1].stage) {
      invalid(fmt::format("{} comes after a stage-{} transfer; stages come in order", describe(t, i),
                          transfers_[i - 1].stage));
    }
    by_target[t.dst].push_back(i);
    if (t.stage == 0) stage0_by_target[t.dst].push_back(i);
  }
  static const std::vector<size_t> kNone;
  for (DeviceId device : key_.dst.mesh().devices()) {
    const auto it = by_target.find(device);
    check_cover(device, dst_slices.at(device), transfers_, it == by_target.end() ? kNone : it->second);
  }
  for (size_t i = 0; i < transfers_.size(); ++i) {
    if (transfers_[i].stage == 0) continue;
    const auto it = stage0_by_target.find(transfers_[i].src);
    check_stage1_source(transfers_[i], i, transfers_, it == stage0_by_target.end() ? kNone : it->second);
  }
}

}  // namespace reshard
