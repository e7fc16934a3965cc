// MpiTransport with derived datatypes: strided messages go as one typed MPI message each, and
// mixed with packed ones at the other end they still match byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "execute/support/reference_arrays.h"
#include "execute/support/transport_suite.h"
#include "mpi_side_channel.h"
#include "mpi_world.h"
#include "strided_reshard_check.h"
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
  // Picked by name: counted, so that a renamed case fails here instead of
  // leaving nothing run.
  const std::vector<std::string> wanted = {"GatherAndScatter", "CountsPayloadBytes"};
  size_t ran = 0;
  testing::MpiSideChannel side(MPI_COMM_WORLD);
  for (const testing::TransportCase& c : testing::transport_cases()) {
    if (std::find(wanted.begin(), wanted.end(), c.name) == wanted.end()) continue;
    c.run(t, side);
    ++ran;
  }
  EXPECT_EQ(ran, wanted.size()) << "a conformance case named here is no longer in the suite";
}

TEST_F(TypedMessagesMpi, AStridedReshardArrivesWholeAndIsCounted) {
  MpiTransport t(MPI_COMM_WORLD, typed_options());
  testing::check_strided_reshard(t, 64, /*round_trip=*/false, 31);
}

// A typed receive is matched and completed by waits on other requests too, as
// segmented ones are: MPI moves a non-contiguous message only while it is
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
