#include "strided_reshard_check.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "execute/support/reference_arrays.h"
#include "reshard/execute/operations.h"
#include "reshard/plan/planner.h"

namespace reshard::testing {
namespace {

uint64_t planned_bytes_into(const Plan& plan, const Topology& topology, int rank) {
  uint64_t bytes = 0;
  for (const Transfer& x : plan.transfers()) {
    if (topology.process_of(x.dst) == rank && topology.process_of(x.src) != rank) {
      bytes += static_cast<uint64_t>(x.box.volume()) * 4;
    }
  }
  return bytes;
}

}  // namespace

void check_strided_reshard(Transport& t, int64_t rows, bool round_trip, uint64_t seed) {
  const Topology topology = Topology::uniform(4 * t.size(), t.size());
  const auto devices = topology.num_devices();
  std::vector<DeviceId> order, reversed;
  for (DeviceId d = 0; d < devices; ++d) order.push_back(d);
  reversed.assign(order.rbegin(), order.rend());
  const Shape shape{rows, 64 * devices};
  const NamedSharding by_rows(Mesh({{"x", devices}}, order), PartitionSpec({{"x"}}));
  const NamedSharding by_columns(Mesh({{"x", devices}}, reversed), PartitionSpec({{}, {"x"}}));
  const TransportCounters before = t.counters();
  const ShardedArray there =
      reshard_array(reference_array(shape, DType::kF32, by_rows, topology, t.rank(), seed), by_columns, t);
  EXPECT_TRUE(matches_reference(there, seed));
  uint64_t planned = planned_bytes_into(make_plan(PlanKey{shape, DType::kF32, by_rows, by_columns, topology}),
                                        topology, t.rank());
  if (round_trip) {
    EXPECT_TRUE(matches_reference(reshard_array(there, by_rows, t), seed));
    planned += planned_bytes_into(make_plan(PlanKey{shape, DType::kF32, by_columns, by_rows, topology}), topology,
                                  t.rank());
  }
  EXPECT_EQ(t.counters().bytes_received - before.bytes_received, planned);
}

}  // namespace reshard::testing
