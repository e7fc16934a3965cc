#include "bench/rotating_rounds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <vector>

namespace reshard::bench {
namespace {

// Three runs whose time is set by the place they are timed at: the first of
// a round is slow. Each must be timed once at every place, so each one's
// least time is the fast one, and the rounds asked for are all run.
TEST(RotatingRounds, EveryRunIsTimedAtEveryPlaceOfARound) {
  int place = 0;
  std::vector<std::vector<int>> places_of(3);
  std::vector<std::function<double()>> runs;
  for (int r = 0; r < 3; ++r) {
    runs.emplace_back([&, r] {
      places_of[static_cast<size_t>(r)].push_back(place);
      const double seconds = place == 0 ? 2.0 : 1.0 + 0.1 * r;
      place = (place + 1) % 3;
      return seconds;
    });
  }
  const std::vector<double> least = least_seconds_in_rotating_rounds(runs, 5);
  EXPECT_EQ(least, (std::vector<double>{1.0, 1.1, 1.2}));
  for (const std::vector<int>& places : places_of) {
    ASSERT_EQ(places.size(), 5u);
    for (int p = 0; p < 3; ++p) EXPECT_NE(std::find(places.begin(), places.end(), p), places.end()) << "place " << p;
  }
}

// Fewer rounds asked for than there are runs: as many rounds as runs.
TEST(RotatingRounds, RunsAtLeastOneRoundPerRun) {
  std::vector<int> calls(4, 0);
  std::vector<std::function<double()>> runs;
  for (size_t r = 0; r < calls.size(); ++r) {
    runs.emplace_back([&, r] {
      ++calls[r];
      return static_cast<double>(r);
    });
  }
  EXPECT_EQ(least_seconds_in_rotating_rounds(runs, 1), (std::vector<double>{0, 1, 2, 3}));
  EXPECT_EQ(calls, (std::vector<int>{4, 4, 4, 4}));
}

}  // namespace
}  // namespace reshard::bench
