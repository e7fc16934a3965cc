#include "support/seed.h"

#include <cstdlib>
#include <iostream>
#include <string>

#include <gtest/gtest.h>

namespace reshard::testing {

uint64_t test_seed() {
  uint64_t seed = 0;
  if (const char* env = std::getenv("RESHARD_SEED"); env != nullptr && *env != '\0') {
    seed = std::stoull(env);
  } else {
    seed = std::random_device{}();
    seed = (seed << 32) ^ std::random_device{}();
  }
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::cout << "[ seed     ] " << (info ? std::string(info->test_suite_name()) + "." + info->name() : "")
            << " RESHARD_SEED=" << seed << std::endl;
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

std::mt19937_64 seeded_rng() { return std::mt19937_64(test_seed()); }

}  // namespace reshard::testing
