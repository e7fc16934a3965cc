// Timing several runs against each other on a noisy machine: round after
// round, each round in another order.
#pragma once

#include <algorithm>
#include <functional>
#include <span>
#include <vector>

namespace reshard::bench {

// The least seconds each of `runs` took (each returns the seconds it took),
// over at least `rounds` rounds and at least one per run: round r times the
// runs from run r % n on, in turn, so that every run is timed at every place
// of a round. What ran just before changes a measurement here (the first
// MPI_Alltoallv of a round, after the reshards of the one before, ran 5-20%
// slower than the next one), and a fixed order would hand that cost to the
// same run every time.
inline std::vector<double> least_seconds_in_rotating_rounds(std::span<const std::function<double()>> runs,
                                                            int rounds) {
  const size_t n = runs.size();
  std::vector<double> least(n, 1e300);
  const size_t all_rounds = std::max(static_cast<size_t>(std::max(rounds, 0)), n);
  for (size_t round = 0; round < all_rounds; ++round) {
    for (size_t place = 0; place < n; ++place) {
      const size_t run = (round + place) % n;
      least[run] = std::min(least[run], runs[run]());
    }
  }
  return least;
}

}  // namespace reshard::bench
