// Config texts beside the weights: read whole, bounded, errors naming the
// file; an import refuses an empty config.json where merge-lora copies it.
#include "pipelines/common/small_file.h"

#include <string>

#include <gtest/gtest.h>

#include "layout/support/expect_error.h"
#include "pipelines/import/import_source.h"
#include "pipelines/support/hf_llama_folder.h"
#include "pipelines/support/lora_test_files.h"
#include "reshard/storage/storage_error.h"
#include "support/temp_dir.h"

namespace reshard::pipelines_detail {
namespace {

TEST(ReadSmallFile, ReadsTheWholeTextAnEmptyOneIncluded) {
  testing::TempDir dir;
  testing::write_text(dir / "config.json", "{\"a\": 1}\n");
  testing::write_text(dir / "empty.json", "");
  EXPECT_EQ(read_small_file(dir / "config.json"), "{\"a\": 1}\n");
  EXPECT_EQ(read_small_file(dir / "empty.json"), "");
}

TEST(ReadSmallFile, MissingOrHugeFilesAreErrorsNamingThem) {
  testing::TempDir dir;
  // The storage layer's kind for it: an I/O error (ErrorCode::kIo) that says the file is not there.
  EXPECT_TRUE(testing::throws_error([&] { read_small_file(dir / "missing.json"); }, storage::kObjectNotFound,
                                    {"missing.json", "cannot read"}));
  testing::write_text(dir / "huge.json", "");
  std::filesystem::resize_file(dir / "huge.json", 10'000'001);  // sparse: no 10 MB written
  EXPECT_TRUE(testing::throws_error([&] { read_small_file(dir / "huge.json"); }, ErrorCode::kInvalidArgument,
                                    {"huge.json", "10000001 bytes", "too large"}));
}

TEST(ImportSourceConfig, AnEmptyConfigBesideTheWeightsIsRefusedNamingIt) {
  testing::TempDir dir;
  const testing::TensorBytes bytes = {{"w", testing::Bytes(8)}};
  testing::write_hf_model_folder(dir.path(), {{"w", DType::kF32, {2}}}, bytes, 1 << 20, "{}");
  EXPECT_EQ(ImportSource::open(dir.path()).config_json(), "{}");
  testing::write_text(dir / "config.json", "");
  EXPECT_TRUE(testing::throws_error([&] { ImportSource::open(dir.path()); }, ErrorCode::kIo,
                                    {"config.json", "cannot read"}));
}

}  // namespace
}  // namespace reshard::pipelines_detail
