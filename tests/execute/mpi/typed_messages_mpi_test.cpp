// MpiTransport with derived datatypes: strided messages go as one typed MPI message each, and
// mixed with packed ones at the other end they still match byte for byte.
#include <gtest/gtest.h>

#include "execute/support/reference_arrays.h"
#include "execute/support/transport_suite.h"
#include "mpi_world.h"
#include "reshard/execute/operations.h"
#include "reshard/plan/planner.h"

namespace reshard {
namespace {

MpiTransportOptions typed_options() {
  MpiTransportOptions options;
  options.derived_datatypes = true;
  options.timeout = std::chrono::seconds(30);
  return options;
}

class TypedMessagesMpi : public testing::MpiTest {};

TEST_F(TypedMessagesMpi, GatherAndScatterPassTheConformanceCase) {
  MpiTransport t(MPI_COMM_WORLD, typed_options());
  for (const testing::TransportCase& c : testing::transport_cases()) {
    if (c.name == "GatherAndScatter" || c.name == "CountsPayloadBytes") c.run(t);
  }
}

TEST_F(TypedMessagesMpi, AStridedReshardArrivesWholeAndIsCounted) {
  MpiTransport t(MPI_COMM_WORLD, typed_options());
  const Topology topology = Topology::uniform(4 * t.size(), t.size());
  const auto devices = topology.num_devices();
  std::vector<DeviceId> order, reversed;
  for (DeviceId d = 0; d < devices; ++d) order.push_back(d);
  reversed.assign(order.rbegin(), order.rend());
  // Rows to columns: every message gathers runs of 64 floats (256 bytes).
  const Shape shape{64, 64 * devices};
  const NamedSharding rows(Mesh({{"x", devices}}, order), PartitionSpec({{"x"}}));
  const NamedSharding columns(Mesh({{"x", devices}}, reversed), PartitionSpec({{}, {"x"}}));
  const TransportCounters before = t.counters();
  const ShardedArray moved =
      reshard_array(testing::reference_array(shape, DType::kF32, rows, topology, t.rank(), 31), columns, t);
  const TransportCounters after = t.counters();
  EXPECT_TRUE(testing::matches_reference(moved, 31));
  const Plan plan = make_plan(PlanKey{shape, DType::kF32, rows, columns, topology});
  uint64_t planned_in = 0;
  for (const Transfer& x : plan.transfers()) {
    if (topology.process_of(x.dst) == t.rank() && topology.process_of(x.src) != t.rank()) {
      planned_in += static_cast<uint64_t>(x.box.volume()) * 4;
    }
  }
  EXPECT_EQ(after.bytes_received - before.bytes_received, planned_in);
}

}  // namespace
}  // namespace reshard
