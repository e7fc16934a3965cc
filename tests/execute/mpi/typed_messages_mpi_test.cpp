// MpiTransport with derived datatypes: strided messages go as one typed MPI message each, and
// mixed with packed ones at the other end they still match byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

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
  options.single_copy = false;  // through MPI: what ranks on different hosts use
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

// A typed receive is matched and completed by waits on other requests too, as
// chunked ones are: MPI moves a non-contiguous message only while it is
// driven, so one left to its own wait would stall its sender meanwhile.
TEST_F(TypedMessagesMpi, WaitsOnOtherRequestsDriveATypedReceive) {
  MpiTransport t(MPI_COMM_WORLD, typed_options());
  if (t.size() < 2 || t.rank() > 1) return;
  // Four runs of 64 bytes, one apart: strided at both ends.
  auto strided = std::make_shared<std::vector<std::byte>>(512, std::byte{0});
  std::vector<std::byte> plain(16, std::byte{0});
  const Tag base = 0;
  if (t.rank() == 0) {
    std::vector<ConstByteRun> runs;
    for (size_t i = 0; i < 4; ++i) {
      std::fill_n(strided->begin() + static_cast<std::ptrdiff_t>(128 * i), 64, std::byte{static_cast<uint8_t>(i + 1)});
      runs.push_back(ConstByteRun{strided->data() + 128 * i, 64});
    }
    auto typed = t.isend_gather(1, base + 1, runs, strided);
    t.send(1, base + 2, plain);
    t.send(1, base + 3, plain);
    typed->wait();
    return;
  }
  std::vector<ByteRun> runs;
  for (size_t i = 0; i < 4; ++i) runs.push_back(ByteRun{strided->data() + 128 * i, 64});
  const TransportCounters before = t.counters();
  auto typed = t.irecv_scatter(0, base + 1, runs, strided);
  t.recv(0, base + 2, plain);
  t.recv(0, base + 3, plain);
  // Sent before the plain messages, so it arrived before them and the waits
  // on them received it.
  EXPECT_EQ(t.counters().bytes_received - before.bytes_received, 256u + 32u);
  typed->wait();
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*strided)[128 * i], std::byte{static_cast<uint8_t>(i + 1)});
    EXPECT_EQ((*strided)[128 * i + 64], std::byte{0});
  }
}

}  // namespace
}  // namespace reshard
