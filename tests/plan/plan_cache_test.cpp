// PlanCache: one plan per distinct key, shared across threads.
#include "reshard/plan/plan_cache.h"

#include <thread>

#include <gtest/gtest.h>

#include "plan/support/layouts.h"
#include "reshard/layout/error.h"
#include "reshard/plan/planner.h"

namespace reshard {
namespace {

using testing::sharding;

PlanKey seed_key() {
  return PlanKey{{32, 8, 64},
                 DType::kF32,
                 sharding("data=4,model=4", {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}, "data,None,model"),
                 sharding("data=4,model=4", {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15}, "data,None,model"),
                 Topology::uniform(16, 4)};
}

TEST(PlanCache, ReusesThePlanForAnEqualKey) {
  PlanCache cache;
  const auto first = cache.get(seed_key());
  const auto second = cache.get(seed_key());
  EXPECT_EQ(first.get(), second.get());
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(*first, make_plan(seed_key()));
}

TEST(PlanCache, KeysThatDifferAnywhereGetTheirOwnPlan) {
  PlanCache cache;
  const auto base = cache.get(seed_key());
  std::vector<PlanKey> variants(6, seed_key());
  variants[0].shape = {32, 8, 128};
  variants[1].dtype = DType::kBF16;
  variants[2].src = variants[2].src.with_memory_kind(MemoryKind::kPinnedHost);
  variants[3].dst = sharding("data=4,model=4", {}, "data,None,model");
  variants[4].topology = Topology::uniform(16, 2);
  variants[5].src = sharding("data=4,model=4", {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}, "data,model");
  for (const PlanKey& key : variants) {
    const auto plan = cache.get(key);
    EXPECT_NE(plan.get(), base.get());
    EXPECT_EQ(plan->key(), key);
  }
  EXPECT_EQ(cache.size(), 1 + variants.size());
}

TEST(PlanCache, SpecsEqualUpToTrailingNonesShareAPlan) {
  PlanCache cache;
  PlanKey key = seed_key();
  key.dst = sharding("data=4,model=4", {}, "data");
  PlanKey padded = key;
  padded.dst = sharding("data=4,model=4", {}, "data,None,None");
  ASSERT_EQ(key, padded);
  EXPECT_EQ(PlanKeyHash{}(key), PlanKeyHash{}(padded));
  EXPECT_EQ(cache.get(key).get(), cache.get(padded).get());
}

TEST(PlanCache, PlanningErrorsPropagateAndStoreNothing) {
  PlanCache cache;
  PlanKey bad = seed_key();
  bad.shape = {30, 8, 64};
  EXPECT_THROW(cache.get(bad), Error);
  EXPECT_EQ(cache.size(), 0u);
}

TEST(PlanCache, ThreadsAskingTogetherAllGetTheStoredPlan) {
  PlanCache cache;
  std::vector<std::shared_ptr<const Plan>> got(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] { got[i] = cache.get(seed_key()); });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& plan : got) EXPECT_EQ(plan.get(), got[0].get());
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.get(seed_key()).get(), got[0].get());
}

TEST(PlanCache, ClearForgetsButHandedOutPlansStayValid) {
  PlanCache cache;
  const auto plan = cache.get(seed_key());
  cache.clear();
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(plan->transfers().size(), 16u);
  EXPECT_NE(cache.get(seed_key()).get(), plan.get());
}

// Keys that differ only in the shape's last extent.
PlanKey key_number(int64_t i) {
  PlanKey key = seed_key();
  key.shape = {32, 8, 64 * (i + 1)};
  return key;
}

TEST(PlanCache, DropsTheLeastRecentlyUsedBeyondItsBound) {
  PlanCache cache(3);
  EXPECT_EQ(cache.max_entries(), 3u);
  const auto zero = cache.get(key_number(0));
  const auto one = cache.get(key_number(1));
  cache.get(key_number(2));
  EXPECT_EQ(cache.get(key_number(0)).get(), zero.get());  // 0 is now the most recently used
  cache.get(key_number(3));                                // so 1 goes
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.get(key_number(0)).get(), zero.get());
  EXPECT_NE(cache.get(key_number(1)).get(), one.get());    // planned again; 2 goes
  EXPECT_EQ(*one, *cache.get(key_number(1)));              // the dropped plan is still valid
  EXPECT_EQ(cache.size(), 3u);
  for (int64_t i = 4; i < 20; ++i) cache.get(key_number(i));
  EXPECT_EQ(cache.size(), 3u);
}

TEST(PlanCache, ABoundOfZeroStoresNothing) {
  PlanCache cache(0);
  const auto first = cache.get(seed_key());
  EXPECT_EQ(*first, make_plan(seed_key()));
  EXPECT_NE(cache.get(seed_key()).get(), first.get());
  EXPECT_EQ(cache.size(), 0u);
}

TEST(PlanCache, BatchesAreOneEntryKeyedByTheWholeList) {
  PlanCache cache;
  const std::vector<PlanKey> keys = {key_number(0), key_number(1)};
  const auto batch = cache.get_batch(keys);
  ASSERT_EQ(batch->size(), 2u);
  EXPECT_EQ(*batch, make_plans(keys));
  EXPECT_EQ(cache.get_batch(keys).get(), batch.get());
  EXPECT_EQ(cache.size(), 1u);
  const std::vector<PlanKey> reversed = {key_number(1), key_number(0)};
  EXPECT_NE(cache.get_batch(reversed).get(), batch.get());
  EXPECT_NE(cache.get_batch(std::span(keys).first(1)).get(), batch.get());
  EXPECT_EQ(cache.size(), 3u);
  // A single key is the batch of one.
  EXPECT_EQ(&cache.get(key_number(0))->key(), &cache.get_batch(std::span(keys).first(1))->front().key());
  EXPECT_EQ(cache.size(), 3u);
}

TEST(PlanCache, AHandedOutPlanOutlivesItsEviction) {
  PlanCache cache(1);
  const auto plan = cache.get(seed_key());
  cache.get(key_number(5));
  cache.clear();
  EXPECT_EQ(plan->key(), seed_key());
  EXPECT_NO_THROW(plan->validate());
}

// The default cache is shared by the whole process (every thread sees what
// another stored) and bounded.
TEST(PlanCache, TheDefaultCacheIsSharedAcrossThreadsAndBounded) {
  PlanKey key = seed_key();
  key.shape = {32, 8, 4 * 64};  // a key no other test of this binary uses
  std::shared_ptr<const Plan> stored;
  std::thread([&] { stored = default_plan_cache().get(key); }).join();
  std::shared_ptr<const Plan> seen;
  std::thread([&] { seen = default_plan_cache().get(key); }).join();
  EXPECT_EQ(seen.get(), stored.get());
  EXPECT_EQ(default_plan_cache().get(key).get(), stored.get());
  EXPECT_EQ(default_plan_cache().max_entries(), 1024u);
  EXPECT_GE(default_plan_cache().size(), 1u);
}

}  // namespace
}  // namespace reshard
