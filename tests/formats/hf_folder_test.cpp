// Opening Hugging Face folders: the kinds, the index checked against its files,
// and one test per refusal, each naming the file and tensor at fault.
#include "reshard/formats/hf_folder.h"

#include <gtest/gtest.h>

#include <vector>

#include "formats/support/safetensors_files.h"
#include "layout/support/expect_error.h"
#include "reshard/formats/file_rules.h"
#include "reshard/formats/safetensors_writer.h"

namespace reshard {
namespace {

using safetensors::ReadMode;
using testing::ScratchDir;
using testing::throws_error;

constexpr ReadMode kModes[] = {ReadMode::kMmap, ReadMode::kPread};

// Writes a file of F32 tensors, each [n] and filled with `fill`.
void write_f32_file(const std::filesystem::path& path, const std::vector<std::pair<std::string, int64_t>>& tensors,
                    float fill = 1.5f) {
  std::vector<std::vector<float>> values;
  std::vector<safetensors::TensorData> data;
  values.reserve(tensors.size());
  for (const auto& [name, n] : tensors) {
    values.emplace_back(static_cast<size_t>(n), fill);
    data.push_back({{name, DType::kF32, {static_cast<uint64_t>(n)}}, std::as_bytes(std::span(values.back()))});
  }
  safetensors::write_file(path, data);
}

// A two-file folder: a, b in the first file, c in the second.
void write_two_file_folder(const ScratchDir& dir, const std::string& index_json) {
  write_f32_file(dir / "model-00001-of-00002.safetensors", {{"a", 2}, {"b", 3}});
  write_f32_file(dir / "model-00002-of-00002.safetensors", {{"c", 4}});
  testing::write_file_text(dir / kHfIndexFileName, index_json);
}

constexpr std::string_view kGoodIndex = R"({"metadata": {"total_size": 36},
  "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
                 "c": "model-00002-of-00002.safetensors"}})";

TEST(HfFolder, OpensAnIndexedFolderInEitherMode) {
  ScratchDir dir;
  write_two_file_folder(dir, std::string(kGoodIndex));
  for (const ReadMode mode : kModes) {
    const HfFolder folder = HfFolder::open(dir.path(), mode);
    EXPECT_EQ(folder.kind, HfFolderKind::kIndexed);
    ASSERT_TRUE(folder.index.has_value());
    EXPECT_EQ(folder.index->total_size, 36u);
    ASSERT_EQ(folder.catalog.tensors().size(), 3u);
    const TensorCatalog::Entry* c = folder.catalog.find("c");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(folder.catalog.file_name(c->file), "model-00002-of-00002.safetensors");
    std::vector<float> values(4);
    folder.catalog.file_of(*c).read(*c->info, std::as_writable_bytes(std::span(values)));
    EXPECT_EQ(values, std::vector<float>(4, 1.5f));
    EXPECT_EQ(folder.catalog.total_bytes(), 36u);
    EXPECT_EQ(folder.catalog.total_elements(), 9u);
  }
}

TEST(HfFolder, SourceOrderIsFileByFileThenDataOrder) {
  ScratchDir dir;
  write_two_file_folder(dir, std::string(kGoodIndex));
  const HfFolder folder = HfFolder::open(dir.path());
  std::vector<std::string> names;
  for (const TensorCatalog::Entry& entry : folder.catalog.tensors()) names.push_back(entry.info->name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c"}));
}

TEST(HfFolder, SingleFileWinsOverAnIndexAsInTransformers) {
  ScratchDir dir;
  write_two_file_folder(dir, std::string(kGoodIndex));
  write_f32_file(dir / kHfSingleFileName, {{"only", 1}});
  const HfFolder folder = HfFolder::open(dir.path());
  EXPECT_EQ(folder.kind, HfFolderKind::kSingleFile);
  EXPECT_FALSE(folder.index.has_value());
  ASSERT_EQ(folder.catalog.tensors().size(), 1u);
  EXPECT_EQ(folder.catalog.file_name(0), kHfSingleFileName);
}

TEST(HfFolder, DetectsPeftAdapters) {
  ScratchDir dir;
  write_f32_file(dir / kPeftAdapterFileName, {{"base_model.model.x.lora_A.weight", 8}});
  testing::write_file_text(dir / kPeftConfigFileName, R"({"peft_type": "LORA"})");
  EXPECT_EQ(HfFolder::detect(dir.path()), HfFolderKind::kPeftAdapter);
  EXPECT_EQ(HfFolder::open(dir.path()).catalog.tensors().size(), 1u);
}

TEST(HfFolder, RefusesAFolderOfNothingKnown) {
  ScratchDir dir;
  testing::write_file_text(dir / "config.json", "{}");
  EXPECT_FALSE(HfFolder::detect(dir.path()).has_value());
  EXPECT_TRUE(throws_error([&] { HfFolder::open(dir.path()); }, ErrorCode::kUnsupported,
                           {dir.path().string(), "not supported yet"}));
}

TEST(HfFolder, TensorListedButMissingFromItsFile) {
  ScratchDir dir;
  write_two_file_folder(dir, R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
      "b": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors",
      "ghost": "model-00002-of-00002.safetensors"}})");
  EXPECT_TRUE(throws_error([&] { HfFolder::open(dir.path()); }, ErrorCode::kMissingTensor,
                           {"model-00002-of-00002.safetensors", "'ghost'"}));
}

TEST(HfFolder, TensorInAFileButNotListed) {
  ScratchDir dir;
  write_two_file_folder(dir, R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
      "c": "model-00002-of-00002.safetensors"}})");
  EXPECT_TRUE(throws_error([&] { HfFolder::open(dir.path()); }, file_rule::kInvalidIndex,
                           {"model-00001-of-00002.safetensors", "'b'", "not listed"}));
}

TEST(HfFolder, TensorListedForAnotherFile) {
  ScratchDir dir;
  write_f32_file(dir / "model-00001-of-00002.safetensors", {{"a", 2}, {"c", 1}});
  write_f32_file(dir / "model-00002-of-00002.safetensors", {{"c", 4}});
  testing::write_file_text(dir / kHfIndexFileName, R"({"weight_map": {
      "a": "model-00001-of-00002.safetensors", "c": "model-00002-of-00002.safetensors"}})");
  EXPECT_TRUE(throws_error([&] { HfFolder::open(dir.path()); }, file_rule::kInvalidIndex,
                           {"model-00001-of-00002.safetensors", "'c'", "model-00002-of-00002.safetensors"}));
}

TEST(HfFolder, IndexNamingAFileOutsideTheFolder) {
  ScratchDir dir;
  write_two_file_folder(dir, R"({"weight_map": {"a": "../model-00001-of-00002.safetensors"}})");
  EXPECT_TRUE(throws_error([&] { HfFolder::open(dir.path()); }, file_rule::kInvalidIndex,
                           {"'a'", "../model-00001-of-00002.safetensors"}));
}

TEST(HfFolder, IndexNamingAMissingFile) {
  ScratchDir dir;
  write_two_file_folder(dir, R"({"weight_map": {"a": "model-00009-of-00009.safetensors"}})");
  EXPECT_TRUE(throws_error([&] { HfFolder::open(dir.path()); }, ErrorCode::kIo,
                           {"model-00009-of-00009.safetensors"}));
}

TEST(HfFolder, CorruptShardNamesTheFile) {
  ScratchDir dir;
  write_two_file_folder(dir, std::string(kGoodIndex));
  testing::write_file_text(dir / "model-00002-of-00002.safetensors", "\x03");
  EXPECT_TRUE(throws_error([&] { HfFolder::open(dir.path()); }, file_rule::kHeaderTooSmall,
                           {"model-00002-of-00002.safetensors"}));
}

TEST(HfFolder, MalformedIndexNamesTheIndex) {
  ScratchDir dir;
  write_two_file_folder(dir, "{\"weight_map\": ");
  EXPECT_TRUE(throws_error([&] { HfFolder::open(dir.path()); }, file_rule::kInvalidIndex,
                           {std::string(kHfIndexFileName)}));
}

TEST(TensorCatalog, RefusesATensorInTwoFilesNamingBoth) {
  ScratchDir dir;
  write_f32_file(dir / "one.safetensors", {{"w", 1}});
  write_f32_file(dir / "two.safetensors", {{"w", 1}});
  std::vector<safetensors::File> files{safetensors::File::open(dir / "one.safetensors"),
                                       safetensors::File::open(dir / "two.safetensors")};
  EXPECT_TRUE(throws_error([&] { TensorCatalog(files, {"one.safetensors", "two.safetensors"}); },
                           ErrorCode::kDuplicateTensor, {"'w'", "one.safetensors", "two.safetensors"}));
}

TEST(TensorCatalog, MergesMetadataFirstValueWins) {
  ScratchDir dir;
  std::vector<float> value{1.0f};
  const safetensors::TensorData x{{"x", DType::kF32, {1}}, std::as_bytes(std::span(value))};
  const safetensors::TensorData y{{"y", DType::kF32, {1}}, std::as_bytes(std::span(value))};
  safetensors::write_file(dir / "one.safetensors", std::span(&x, 1), safetensors::Metadata{{"format", "pt"}});
  safetensors::write_file(dir / "two.safetensors", std::span(&y, 1),
                          safetensors::Metadata{{"format", "tf"}, {"extra", "1"}});
  const TensorCatalog catalog({safetensors::File::open(dir / "one.safetensors"),
                               safetensors::File::open(dir / "two.safetensors")},
                              {"one.safetensors", "two.safetensors"});
  EXPECT_EQ(catalog.metadata(), (safetensors::Metadata{{"format", "pt"}, {"extra", "1"}}));
}

}  // namespace
}  // namespace reshard
