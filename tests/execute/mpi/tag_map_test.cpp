#include "execute/mpi/tag_map.h"

#include <climits>
#include <set>
#include <utility>

#include <gtest/gtest.h>

#include "reshard/layout/error.h"

namespace reshard::mpi_detail {
namespace {

constexpr Tag kOp = Transport::kTagsPerOperation;

// Every tag of `operations` consecutive operations, sampled at the edges and
// throughout, maps to a distinct slot with a tag MPI accepts.
void expect_distinct_slots(const TagMap& map, int tag_ub, uint64_t first_operation, uint64_t operations) {
  std::set<std::pair<size_t, int>> seen;
  size_t samples = 0;
  for (uint64_t op = first_operation; op < first_operation + operations; ++op) {
    for (Tag offset : {Tag{0}, Tag{1}, Tag{4095}, Tag{32767}, Tag{32768}, Tag{65535}, kOp / 2, kOp - 2, kOp - 1}) {
      const MpiTagSlot slot = map.map(op * kOp + offset);
      ASSERT_GE(slot.tag, 0);
      ASSERT_LE(slot.tag, tag_ub);
      ASSERT_LT(slot.communicator, map.num_communicators());
      seen.emplace(slot.communicator, slot.tag);
      ++samples;
    }
  }
  EXPECT_EQ(seen.size(), samples) << "two tags share an MPI slot";
}

TEST(TagMap, LargeTagUbPacksManyOperationsIntoOneCommunicator) {
  const TagMap map(INT_MAX, 16);  // Open MPI's MPI_TAG_UB
  EXPECT_EQ(map.num_communicators(), 1u);
  EXPECT_EQ(map.concurrent_operations(), 2048u);
  expect_distinct_slots(map, INT_MAX, 0, 2048);
  expect_distinct_slots(map, INT_MAX, 5000, 2048);
}

TEST(TagMap, SmallestLegalTagUbSpreadsAnOperationOverCommunicators) {
  const TagMap map(32767, 4);
  EXPECT_EQ(map.concurrent_operations(), 4u);
  EXPECT_EQ(map.num_communicators(), 4u * 32u);  // 2^20 tags / 2^15 per communicator
  expect_distinct_slots(map, 32767, 0, 4);
  expect_distinct_slots(map, 32767, 1'000'003, 4);
}

TEST(TagMap, TagUbOfExactlyOneOperationGivesEachItsCommunicator) {
  const TagMap map((1 << 20) - 1, 8);  // tags 0..2^20-1: one operation's worth
  EXPECT_EQ(map.num_communicators(), 8u);
  expect_distinct_slots(map, (1 << 20) - 1, 3, 8);
}

TEST(TagMap, TagUbJustBelowAnOperationNeedsTwoCommunicatorsPerOperation) {
  const TagMap map((1 << 20) - 2, 8);  // 19 whole bits usable
  EXPECT_EQ(map.num_communicators(), 16u);
  expect_distinct_slots(map, (1 << 20) - 2, 3, 8);
}

TEST(TagMap, RingWrapsAroundAfterItsOperations) {
  const TagMap map(INT_MAX, 16);
  const uint64_t ring = map.concurrent_operations();
  EXPECT_EQ(map.map(7 * kOp + 3), map.map((7 + ring) * kOp + 3));
  EXPECT_NE(map.map(7 * kOp + 3), map.map((7 + ring - 1) * kOp + 3));
  const Tag last = ~Tag{0};  // the very top of the 64-bit space still maps into range
  EXPECT_LT(map.map(last).communicator, map.num_communicators());
}

TEST(TagMap, RejectsATagUbBelowTheStandardsMinimum) {
  try {
    TagMap(1000, 4);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("1000"), std::string::npos) << e.what();
  }
  EXPECT_THROW(TagMap(INT_MAX, 0), Error);
}

}  // namespace
}  // namespace reshard::mpi_detail
