// The planner over many random source/target pairs, against brute-force answers.
#include <gtest/gtest.h>

#include "reshard/layout/error.h"

#include "plan/support/layouts.h"
#include "plan/support/reference_plan.h"
#include "reshard/plan/planner.h"
#include "support/seed.h"

namespace reshard {
namespace {

constexpr int kCases = 1000;

// Bytes every target slice needs, summed over target devices (replicas each count).
uint64_t bytes_needed(const PlanKey& key) {
  uint64_t elements = 0;
  for (const Box& slice : key.dst.index_domains(key.shape)) elements += static_cast<uint64_t>(slice.volume());
  return dtype_byte_size(key.dtype, elements);
}

// Whether `device` holds all of `box` in the source layout.
bool source_holds(const PlanKey& key, DeviceId device, const Box& box) {
  const std::optional<int64_t> logical = key.src.mesh().logical_index_of(device);
  return logical && key.src.index_domains(key.shape)[static_cast<size_t>(*logical)].contains(box);
}

TEST(PlannerProperty, RandomLayoutsGiveTheReferencePlanWithMinimalCrossProcessBytes) {
  std::mt19937_64 rng = testing::seeded_rng();
  int pieces_that_cross = 0;
  for (int i = 0; i < kCases; ++i) {
    const PlanKey key = testing::random_plan_key(rng);
    SCOPED_TRACE(::testing::Message() << "case " << i << ": " << testing::describe(key));
    const Plan plan = make_plan(key);
    ASSERT_NO_THROW(plan.validate());
    EXPECT_EQ(plan.transfers(), testing::reference_transfers(key));
    EXPECT_EQ(plan.stats().bytes_cross_process, testing::minimum_cross_process_bytes(key));
    EXPECT_EQ(plan.stats().bytes_total, bytes_needed(key));
    for (const Transfer& t : plan.transfers()) {
      if (source_holds(key, t.dst, t.box)) {
        EXPECT_EQ(t.src, t.dst) << t.box.to_string();
      }
    }
    EXPECT_EQ(plan, make_plan(key));
    pieces_that_cross += plan.stats().bytes_cross_process > 0;
  }
  // The generator must exercise the remote rule, not only local copies.
  EXPECT_GT(pieces_that_cross, kCases / 10);
}

// Breaks a correct plan in one random way; nullopt when the chosen way does
// not apply (no transfers, or every source device holds the box).
std::optional<std::vector<Transfer>> broken(const PlanKey& key, std::vector<Transfer> transfers,
                                            std::mt19937_64& rng) {
  if (transfers.empty()) return std::nullopt;
  const size_t victim = std::uniform_int_distribution<size_t>(0, transfers.size() - 1)(rng);
  Transfer& t = transfers[victim];
  switch (std::uniform_int_distribution<int>(0, 4)(rng)) {
    case 0:
      transfers.erase(transfers.begin() + static_cast<std::ptrdiff_t>(victim));
      return transfers;
    case 1:
      transfers.push_back(t);
      return transfers;
    case 2: {
      if (t.box.rank() == 0) return std::nullopt;
      std::vector<int64_t> origin = t.box.origin();
      origin[std::uniform_int_distribution<size_t>(0, origin.size() - 1)(rng)] += rng() % 2 == 0 ? 1 : -1;
      t.box = Box(origin, t.box.shape());
      return transfers;
    }
    case 3:
      for (DeviceId d : key.src.mesh().devices()) {
        if (!source_holds(key, d, t.box)) {
          t.src = d;
          return transfers;
        }
      }
      return std::nullopt;
    default:
      for (DeviceId d : key.dst.mesh().devices()) {
        if (d != t.dst) {
          t.dst = d;
          return transfers;
        }
      }
      return std::nullopt;
  }
}

TEST(PlannerProperty, ValidateCatchesEveryRandomBreakage) {
  std::mt19937_64 rng = testing::seeded_rng();
  int caught = 0;
  for (int i = 0; i < kCases; ++i) {
    const PlanKey key = testing::random_plan_key(rng);
    const auto transfers = broken(key, make_plan(key).transfers(), rng);
    if (!transfers) continue;
    SCOPED_TRACE(::testing::Message() << "case " << i << ": " << testing::describe(key));
    try {
      Plan(key, *transfers).validate();
      ADD_FAILURE() << "a broken plan passed validate()";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidPlan) << e.what();
      ++caught;
    }
  }
  EXPECT_GT(caught, kCases / 2);
}

}  // namespace
}  // namespace reshard
