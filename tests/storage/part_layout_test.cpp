#include "reshard/storage/part_layout.h"

#include <gtest/gtest.h>

#include "layout/support/expect_error.h"
#include "reshard/layout/error.h"
#include "reshard/storage/parallel_upload.h"
#include "reshard/storage/storage_error.h"

namespace reshard::storage {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

TEST(PartLayout, PartsCoverTheObjectExactlyWithOnlyTheLastShorter) {
  const PartLayout layout = PartLayout::plan(17 * kMiB + 3, 5 * kMiB, s3_part_rules());
  ASSERT_EQ(layout.count(), 4u);
  uint64_t covered = 0;
  for (uint32_t i = 0; i < layout.count(); ++i) {
    EXPECT_EQ(layout.offset(i), covered);
    covered += layout.size(i);
    if (i + 1 < layout.count()) {
      EXPECT_EQ(layout.size(i), 5 * kMiB);
    }
  }
  EXPECT_EQ(covered, layout.object_bytes());
  EXPECT_EQ(layout.size(3), 2 * kMiB + 3);
  EXPECT_EQ(layout.part_of(5 * kMiB - 1), 0u);
  EXPECT_EQ(layout.part_of(5 * kMiB), 1u);
  EXPECT_THROW((void)layout.offset(4), Error);
  EXPECT_THROW((void)layout.part_of(layout.object_bytes()), Error);
}

TEST(PartLayout, S3LimitsGrowPartsToTenThousandAndRefuseWhatCannotFit) {
  const uint64_t huge = 100 * (uint64_t{1} << 30);  // 100 GiB at the 64 MiB default: 1600 parts
  EXPECT_EQ(PartLayout::plan(huge, 0, s3_part_rules()).count(), 1600u);
  const PartLayout grown = PartLayout::plan(huge, 5 * kMiB, s3_part_rules());
  EXPECT_LE(grown.count(), 10000u);
  EXPECT_GE(grown.part_bytes() * grown.count(), huge);
  // A part size asked for outside the limits has a kind of its own (front ends name their argument by it).
  EXPECT_TRUE(testing::throws_error([] { (void)PartLayout::plan(10 * kMiB, 4 * kMiB, s3_part_rules()); },
                                    kPartSizeOutOfRange, {"a part size of 4.0 MiB"}));  // below 5 MiB
  EXPECT_TRUE(testing::throws_error(
      [] { (void)PartLayout::plan(10 * kMiB, 6 * (uint64_t{1} << 30), s3_part_rules()); }, kPartSizeOutOfRange));
  EXPECT_THROW((void)PartLayout::plan(uint64_t{60} << 40, 0, s3_part_rules()), Error);  // past 10,000 x 5 GiB
}

TEST(PartLayout, SmallAndEmptyObjectsAreOnePart) {
  EXPECT_EQ(PartLayout::plan(1000, 0, s3_part_rules()).count(), 1u);
  EXPECT_EQ(PartLayout::plan(1000, 0, s3_part_rules()).size(0), 1000u);
  const PartLayout empty = PartLayout::plan(0, 0, s3_part_rules());
  EXPECT_EQ(empty.count(), 1u);
  EXPECT_EQ(empty.size(0), 0u);
  EXPECT_EQ(PartLayout::single(0).count(), 1u);
}

TEST(PartReceipt, CrossesProcessesAsTextAndRefusesOtherText) {
  const PartReceipt receipt{41, "\"9b2cf535f27731c974343645a3985328\""};
  EXPECT_EQ(PartReceipt::parse(receipt.serialize()), receipt);
  EXPECT_EQ(PartReceipt::parse("0:").tag, "");
  EXPECT_THROW((void)PartReceipt::parse("x:1"), Error);
  EXPECT_THROW((void)PartReceipt::parse("12"), Error);
  EXPECT_THROW((void)PartReceipt::parse(":tag"), Error);
}

}  // namespace
}  // namespace reshard::storage
