#include "reshard/formats/hf_split.h"

#include <vector>

#include <gtest/gtest.h>

namespace reshard {
namespace {

using Files = std::vector<std::vector<size_t>>;

Files split(std::vector<uint64_t> bytes, uint64_t limit) { return split_into_shards(bytes, limit); }

TEST(HfSplit, EverythingFitsInOneFile) {
  EXPECT_EQ(split({1, 2, 3}, 100), (Files{{0, 1, 2}}));
  EXPECT_EQ(split({}, 100), Files{});
}

TEST(HfSplit, ExactlyAtTheLimitStaysInTheFile) {
  EXPECT_EQ(split({4, 6, 1}, 10), (Files{{0, 1}, {2}}));
  EXPECT_EQ(split({10, 1}, 10), (Files{{0}, {1}}));
}

TEST(HfSplit, OneByteOverStartsANewFile) {
  EXPECT_EQ(split({4, 7, 3}, 10), (Files{{0}, {1, 2}}));
}

TEST(HfSplit, GreedyInOrderWithoutRepacking) {
  // The reference's own example: 6, 6, 2, 6, 2, 2 with a limit of 10.
  EXPECT_EQ(split({6, 6, 2, 6, 2, 2}, 10), (Files{{0}, {1, 2}, {3, 4, 5}}));
}

TEST(HfSplit, OversizedTensorGetsItsOwnFileAheadOfTheOpenOne) {
  // huggingface_hub appends the big tensor's file at once, while the file being
  // filled continues after it.
  EXPECT_EQ(split({2, 50, 3, 6}, 10), (Files{{1}, {0, 2}, {3}}));
  EXPECT_EQ(split({50, 60}, 10), (Files{{0}, {1}}));
}

TEST(HfSplit, ZeroSizeTensorsAndZeroLimit) {
  EXPECT_EQ(split({0, 0, 5}, 5), (Files{{0, 1, 2}}));
  EXPECT_EQ(split({0, 1, 0}, 0), (Files{{1}, {0, 2}}));
}

TEST(HfSplit, HugeSizesDoNotOverflow) {
  const uint64_t max = UINT64_MAX;
  EXPECT_EQ(split({max - 1, max - 1, 1}, max), (Files{{0}, {1, 2}}));
}

TEST(HfSplit, FileNamesAsTransformers) {
  EXPECT_EQ(hf_shard_file_name(0, 4), "model-00001-of-00004.safetensors");
  EXPECT_EQ(hf_shard_file_name(11, 12), "model-00012-of-00012.safetensors");
  EXPECT_EQ(hf_shard_file_name(0, 123456), "model-00001-of-123456.safetensors");
}

}  // namespace
}  // namespace reshard
