// The MPI job a test binary runs in, for tests that run on every rank at once.
#pragma once

#include <cstdint>

#include <gtest/gtest.h>

#include "reshard/execute/mpi/mpi_transport.h"

namespace reshard::testing {

// The transport over MPI_COMM_WORLD that main() sets up (timeout: 30 s).
MpiTransport& world_transport();

// Rank 0's test_seed() on every rank: randomized multi-process tests must
// draw the same cases everywhere. Printed once; RESHARD_SEED sets it.
uint64_t shared_test_seed();

// Collective, called at the end of each test: records a failure on this rank
// if any other rank's part of the test failed, naming those ranks, so every
// rank reports the same verdict.
void agree_on_result();

// Collective: every rank's `value`, summed (for byte counts across the job).
uint64_t sum_over_ranks(Transport& t, uint64_t value);

// A test whose verdict every rank shares (agree_on_result in TearDown).
class MpiTest : public ::testing::Test {
 protected:
  void TearDown() override { agree_on_result(); }
};

}  // namespace reshard::testing
