// The planner over many random source/target pairs, against brute-force answers.
#include <algorithm>
#include <map>

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

constexpr PlanOptions kPerDevice{false, false};

TEST(PlannerProperty, PerDevicePlansFollowTheReferenceRule) {
  std::mt19937_64 rng = testing::seeded_rng();
  int pieces_that_cross = 0;
  for (int i = 0; i < kCases; ++i) {
    const PlanKey key = testing::random_plan_key(rng);
    SCOPED_TRACE(::testing::Message() << "case " << i << ": " << testing::describe(key));
    const Plan plan = make_plan(key, kPerDevice);
    ASSERT_NO_THROW(plan.validate());
    EXPECT_EQ(plan.transfers(), testing::reference_transfers(key));
    EXPECT_EQ(plan.stats().bytes_cross_process, testing::minimum_cross_process_bytes(key));
    EXPECT_EQ(plan.stats().bytes_total, bytes_needed(key));
    EXPECT_EQ(plan.stats().bytes_fan_out, 0u);
    pieces_that_cross += plan.stats().bytes_cross_process > 0;
  }
  // The generator must exercise the remote rule, not only local copies.
  EXPECT_GT(pieces_that_cross, kCases / 10);
}

// Stage-0 bytes that cross into each process, from the plan.
std::vector<uint64_t> bytes_into_each_process(const Plan& plan) {
  const PlanKey& key = plan.key();
  std::vector<uint64_t> bytes(static_cast<size_t>(key.topology.num_processes()), 0);
  for (const Transfer& t : plan.transfers()) {
    const int home = key.topology.process_of(t.dst);
    if (t.stage == 0 && key.topology.process_of(t.src) != home) {
      bytes[static_cast<size_t>(home)] += dtype_byte_size(key.dtype, static_cast<uint64_t>(t.box.volume()));
    }
  }
  return bytes;
}

// A stage-0 piece its target device holds comes from itself; one its process
// holds comes from inside the process.
void expect_local_preference(const Plan& plan) {
  const PlanKey& key = plan.key();
  for (const Transfer& t : plan.transfers()) {
    if (t.stage != 0) continue;
    if (source_holds(key, t.dst, t.box)) {
      EXPECT_EQ(t.src, t.dst) << t.box.to_string();
      continue;
    }
    for (DeviceId d : key.src.mesh().devices()) {
      if (key.topology.process_of(d) == key.topology.process_of(t.dst) && source_holds(key, d, t.box)) {
        EXPECT_EQ(key.topology.process_of(t.src), key.topology.process_of(t.dst)) << t.box.to_string();
      }
    }
  }
}

void expect_balanced_senders(std::span<const PlanKey> keys, uint64_t max_send) {
  const testing::SendBound bound = testing::sender_bound(keys);
  if (!bound.known) return;
  EXPECT_GE(max_send, bound.least_max_send);
  EXPECT_LE(max_send, bound.least_max_send + bound.rounding);
}

// Everything the default plan promises, checked against brute force.
void expect_minimal_balanced_plan(const PlanKey& key) {
  const Plan plan = make_plan(key);
  ASSERT_NO_THROW(plan.validate());
  EXPECT_EQ(bytes_into_each_process(plan), testing::minimum_bytes_into_each_process(key));
  EXPECT_EQ(plan.stats().bytes_total, bytes_needed(key));
  testing::expect_exact_cover_by_elements(plan);
  expect_local_preference(plan);
  expect_balanced_senders(std::span(&key, 1), plan.stats().max_process_send_bytes);
  EXPECT_EQ(plan, make_plan(key));
}

TEST(PlannerProperty, EachElementCrossesIntoAProcessOnceFromBalancedSenders) {
  std::mt19937_64 rng = testing::seeded_rng();
  int fanned_out = 0, shared = 0, disjoint = 0, uneven = 0, scalars = 0, empty = 0;
  for (int i = 0; i < kCases; ++i) {
    const PlanKey key = testing::random_plan_key(rng);
    SCOPED_TRACE(::testing::Message() << "case " << i << ": " << testing::describe(key));
    expect_minimal_balanced_plan(key);
    fanned_out += make_plan(key).stats().bytes_fan_out > 0;
    shared += testing::sender_bound(std::span(&key, 1)).shared_bytes > 0;
    const std::vector<DeviceId>& from = key.src.mesh().devices();
    disjoint += std::none_of(from.begin(), from.end(), [&](DeviceId d) { return key.dst.mesh().logical_index_of(d).has_value(); });
    uneven += key.src.uneven();
    scalars += key.shape.empty();
    empty += std::find(key.shape.begin(), key.shape.end(), 0) != key.shape.end();
    if (HasFailure()) break;
  }
  // The generator must exercise fan-out, sender balancing and the odd layouts.
  EXPECT_GT(fanned_out, kCases / 50);
  EXPECT_GT(shared, kCases / 20);
  EXPECT_GT(disjoint, kCases / 20);
  EXPECT_GT(uneven, kCases / 5);
  EXPECT_GT(scalars, kCases / 50);
  EXPECT_GT(empty, kCases / 200);
}

TEST(PlannerProperty, ReplicatedTargetsOverDevicesOfAProcessFanOut) {
  std::mt19937_64 rng = testing::seeded_rng();
  int fanned_out = 0;
  for (int i = 0; i < kCases / 2; ++i) {
    const PlanKey key = testing::random_fan_out_key(rng);
    SCOPED_TRACE(::testing::Message() << "case " << i << ": " << testing::describe(key));
    expect_minimal_balanced_plan(key);
    fanned_out += make_plan(key).stats().bytes_fan_out > 0;
    if (HasFailure()) break;
  }
  EXPECT_GT(fanned_out, kCases / 8);
}

TEST(PlannerProperty, ReplicatedSourcesShareTheSendingEvenly) {
  std::mt19937_64 rng = testing::seeded_rng();
  for (int i = 0; i < kCases / 2; ++i) {
    const PlanKey key = testing::random_shared_source_key(rng);
    SCOPED_TRACE(::testing::Message() << "case " << i << ": " << testing::describe(key));
    expect_minimal_balanced_plan(key);
    // Every holder process holds everything and no taker holds anything: the
    // even share of what crosses is the best any plan can do.
    const Plan plan = make_plan(key);
    const testing::SendBound bound = testing::sender_bound(std::span(&key, 1));
    const uint64_t holders = static_cast<uint64_t>(key.src.mesh().axes()[0].size);
    const uint64_t even = (plan.stats().bytes_cross_process + holders - 1) / holders;
    EXPECT_EQ(bound.shared_bytes, plan.stats().bytes_cross_process);
    EXPECT_GE(plan.stats().max_process_send_bytes, even);
    EXPECT_LE(plan.stats().max_process_send_bytes, even + bound.rounding);
    if (HasFailure()) break;
  }
}

TEST(PlannerProperty, BatchesBalanceSendersOverAllTheirArrays) {
  std::mt19937_64 rng = testing::seeded_rng();
  for (int i = 0; i < kCases / 10; ++i) {
    // Arrays of one job: the same topology for all.
    std::vector<PlanKey> keys;
    const PlanKey first = testing::random_plan_key(rng);
    keys.push_back(first);
    while (keys.size() < 4) {
      PlanKey key = testing::random_plan_key(rng);
      if (key.topology == first.topology) keys.push_back(std::move(key));
    }
    SCOPED_TRACE(::testing::Message() << "batch " << i << ": " << testing::describe(keys[0]));
    const std::vector<Plan> plans = make_plans(keys);
    ASSERT_EQ(plans.size(), keys.size());
    std::vector<uint64_t> sent(static_cast<size_t>(first.topology.num_processes()), 0);
    for (size_t k = 0; k < keys.size(); ++k) {
      ASSERT_EQ(plans[k].key(), keys[k]);
      ASSERT_NO_THROW(plans[k].validate());
      EXPECT_EQ(bytes_into_each_process(plans[k]), testing::minimum_bytes_into_each_process(keys[k]));
      for (const Transfer& t : plans[k].transfers()) {
        const int from = first.topology.process_of(t.src);
        if (t.stage == 0 && from != first.topology.process_of(t.dst)) {
          sent[static_cast<size_t>(from)] += dtype_byte_size(keys[k].dtype, static_cast<uint64_t>(t.box.volume()));
        }
      }
    }
    expect_balanced_senders(keys, *std::max_element(sent.begin(), sent.end()));
    EXPECT_EQ(plans, make_plans(keys));
    if (HasFailure()) break;
  }
}

// The n-th repeat of a key made distinct without changing its plan: the
// planner ignores memory kinds, but keys that differ in them are not equal.
PlanKey distinct_repeat(PlanKey key, int n) {
  static constexpr MemoryKind kKinds[] = {MemoryKind::kDevice, MemoryKind::kPinnedHost, MemoryKind::kUnpinnedHost};
  const auto kind_index = [](MemoryKind kind) {
    return static_cast<int>(std::find(std::begin(kKinds), std::end(kKinds), kind) - std::begin(kKinds));
  };
  const int src = (kind_index(key.src.memory_kind()) + n % 3) % 3;
  const int dst = (kind_index(key.dst.memory_kind()) + n / 3) % 3;
  key.src = key.src.with_memory_kind(kKinds[src]);
  key.dst = key.dst.with_memory_kind(kKinds[dst]);
  return key;
}

// A batch of one job drawn from a few keys with repeats (at most 9 of each).
std::vector<PlanKey> batch_with_repeats(std::mt19937_64& rng) {
  const auto any_key = [&] {
    switch (rng() % 3) {
      case 0: return testing::random_plan_key(rng);
      case 1: return testing::random_fan_out_key(rng);
      default: return testing::random_shared_source_key(rng);
    }
  };
  std::vector<PlanKey> pool = {any_key()};
  const size_t kinds = 1 + rng() % 3;
  for (int tries = 0; pool.size() < kinds && tries < 100; ++tries) {
    PlanKey key = any_key();
    if (key.topology == pool[0].topology) pool.push_back(std::move(key));
  }
  std::vector<PlanKey> batch;
  for (size_t n = 2 + rng() % 8; batch.size() < n;) batch.push_back(pool[rng() % pool.size()]);
  return batch;
}

// make_plans plans a repeated key once and copies its plan: the plans must be
// those of a batch where every key is new (senders balanced the same way).
TEST(PlannerProperty, RepeatedKeysPlanAsIfEachWereNew) {
  std::mt19937_64 rng = testing::seeded_rng();
  int shared = 0, fanned_out = 0;
  for (int i = 0; i < kCases / 5; ++i) {
    const std::vector<PlanKey> batch = batch_with_repeats(rng);
    std::vector<PlanKey> all_new;
    for (size_t k = 0; k < batch.size(); ++k) {
      const auto n = std::count(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(k), batch[k]);
      all_new.push_back(distinct_repeat(batch[k], static_cast<int>(n)));
    }
    SCOPED_TRACE(::testing::Message() << "batch " << i << ": " << testing::describe(batch[0]));
    for (const PlanOptions options : {PlanOptions{}, kPerDevice, PlanOptions{true, false}, PlanOptions{false, true}}) {
      const std::vector<Plan> plans = make_plans(batch, options);
      const std::vector<Plan> fresh = make_plans(all_new, options);
      for (size_t k = 0; k < batch.size(); ++k) {
        ASSERT_EQ(plans[k].key(), batch[k]);
        EXPECT_EQ(plans[k].transfers(), fresh[k].transfers()) << "array " << k;
        EXPECT_EQ(plans[k].stats(), fresh[k].stats()) << "array " << k;
        shared += plans[k].stats().bytes_cross_process > 0 && options.balance_senders;
        fanned_out += plans[k].stats().bytes_fan_out > 0;
      }
    }
    if (HasFailure()) break;
  }
  // Repeats must carry pending (balanced) pieces and fan-out, not only local copies.
  EXPECT_GT(shared, kCases / 10);
  EXPECT_GT(fanned_out, kCases / 20);
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
      if (t.stage == 1) {  // another target device may hold the box too: only itself surely does not
        t.src = t.dst;
        return transfers;
      }
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
