// Seeds for randomized tests: printed, and settable with RESHARD_SEED.
#pragma once

#include <cstdint>
#include <random>

namespace reshard::testing {

// RESHARD_SEED from the environment if set, else a fresh random seed. The
// seed is printed (with the test's name) so any failure can be replayed.
uint64_t test_seed();

// A generator seeded with test_seed().
std::mt19937_64 seeded_rng();

}  // namespace reshard::testing
