// Writing Hugging Face folders: the split and names as transformers makes them,
// every file byte-identical to a direct write, the index, and atomic output.
#include "formats/hf_folder_writer.h"

#include <fmt/format.h>
#include <gtest/gtest.h>


#include <algorithm>
#include <map>
#include <vector>

#include "formats/hf_folder_plan.h"
#include "formats/support/random_tensors.h"
#include "formats/support/safetensors_files.h"
#include "layout/support/expect_error.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/formats/hf_split.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/storage/open_store.h"
#include "storage/support/object_listing.h"
#include "storage/support/store_servers.h"
#include "support/file_size_limit.h"
#include "support/seed.h"

namespace reshard {

using formats_detail::hf_weight_files_in;
using formats_detail::HfFolderPlan;
using formats_detail::write_hf_folder;

namespace {

using testing::FileSizeLimit;
using testing::objects_under;
using testing::files_under;

namespace fs = std::filesystem;
using safetensors::TensorSpec;
using testing::ScratchDir;
using testing::throws_error;

// Producer over tensors held in memory, by name.
TensorProducer producer_of(const std::vector<testing::RandomTensor>& tensors) {
  return [&tensors](const safetensors::TensorInfo& info, const ByteSink& sink) {
    for (const testing::RandomTensor& tensor : tensors) {
      if (tensor.spec.name == info.name) {
        sink(tensor.bytes);
        return;
      }
    }
    FAIL() << "asked for unknown tensor " << info.name;
  };
}

std::vector<TensorSpec> f32_specs(const std::vector<int64_t>& elements) {
  std::vector<TensorSpec> specs;
  for (size_t i = 0; i < elements.size(); ++i) specs.push_back({fmt::format("t{}", i), DType::kF32, {static_cast<uint64_t>(elements[i])}});
  return specs;
}

std::vector<std::string> file_names(const HfFolderPlan& plan) {
  std::vector<std::string> names;
  for (const HfFolderPlan::File& file : plan.files()) names.push_back(file.name);
  return names;
}

TEST(HfFolderPlan, OneFileWhenEverythingFits) {
  const HfFolderPlan plan = HfFolderPlan::plan(f32_specs({10, 15}), 100);  // 40 + 60 bytes
  EXPECT_EQ(file_names(plan), std::vector<std::string>{"model.safetensors"});
  EXPECT_FALSE(plan.index().has_value());
  EXPECT_EQ(plan.files()[0].layout.header().tensors().size(), 2u);
}

TEST(HfFolderPlan, NoTensorsStillMakesOneFile) {
  const HfFolderPlan plan = HfFolderPlan::plan({}, 100);
  EXPECT_EQ(file_names(plan), std::vector<std::string>{"model.safetensors"});
  EXPECT_FALSE(plan.index().has_value());
}

TEST(HfFolderPlan, SplitsAtTheLimitAndWritesTheIndex) {
  // 40 + 60 = 100 fits a 100-byte limit exactly; the next 4 bytes do not.
  const HfFolderPlan plan = HfFolderPlan::plan(f32_specs({10, 15, 1}), 100);
  EXPECT_EQ(file_names(plan), (std::vector<std::string>{"model-00001-of-00002.safetensors",
                                                        "model-00002-of-00002.safetensors"}));
  ASSERT_TRUE(plan.index().has_value());
  EXPECT_EQ(plan.index()->total_size, 104u);
  EXPECT_EQ(plan.index()->total_parameters, 26u);
  EXPECT_EQ(plan.index()->weight_map, (std::map<std::string, std::string>{
                                          {"t0", "model-00001-of-00002.safetensors"},
                                          {"t1", "model-00001-of-00002.safetensors"},
                                          {"t2", "model-00002-of-00002.safetensors"}}));
}

TEST(HfFolderPlan, OversizedTensorGetsItsOwnFile) {
  const HfFolderPlan plan = HfFolderPlan::plan(f32_specs({1, 100, 1}), 16);
  ASSERT_EQ(plan.files().size(), 2u);
  EXPECT_EQ(plan.index()->weight_map.at("t1"), "model-00001-of-00002.safetensors");
  EXPECT_EQ(plan.index()->weight_map.at("t0"), "model-00002-of-00002.safetensors");
  EXPECT_EQ(plan.index()->weight_map.at("t2"), "model-00002-of-00002.safetensors");
}

TEST(HfFolderPlan, SplitsByTheWrittenDtypesSize) {
  // Cast to BF16 first, the two tensors (2 x 20 bytes) fit one 40-byte file.
  const std::vector<TensorSpec> bf16 = {{"a", DType::kBF16, {10}}, {"b", DType::kBF16, {10}}};
  EXPECT_EQ(HfFolderPlan::plan(bf16, 40).files().size(), 1u);
  EXPECT_EQ(HfFolderPlan::plan(f32_specs({10, 10}), 40).files().size(), 2u);
}

TEST(HfFolderPlan, RefusesADuplicateNameAcrossFiles) {
  const std::vector<TensorSpec> specs = {{"w", DType::kF32, {10}}, {"w", DType::kF32, {10}}};
  EXPECT_TRUE(throws_error([&] { HfFolderPlan::plan(specs, 40); }, ErrorCode::kDuplicateTensor, {"'w'"}));
}

TEST(HfFolderWriter, FilesMatchADirectWriteAndReadBack) {
  auto rng = testing::seeded_rng();
  for (int round = 0; round < 10; ++round) {
    const std::vector<testing::RandomTensor> tensors = testing::random_tensors(rng, 12);
    std::vector<TensorSpec> specs;
    for (const testing::RandomTensor& tensor : tensors) specs.push_back(tensor.spec);
    const uint64_t limit = std::uniform_int_distribution<uint64_t>(0, 200)(rng);
    const HfFolderPlan plan = HfFolderPlan::plan(specs, limit);
    ScratchDir dir;
    write_hf_folder(dir / "out", plan, producer_of(tensors), false);

    for (const HfFolderPlan::File& file : plan.files()) {
      // The same tensors written directly by the safetensors writer give the same bytes.
      std::vector<safetensors::TensorData> data;
      for (const safetensors::TensorInfo& info : file.layout.header().tensors()) {
        for (const testing::RandomTensor& tensor : tensors) {
          if (tensor.spec.name == info.name) data.push_back({tensor.spec, tensor.bytes});
        }
      }
      safetensors::write_file(dir / "direct.safetensors", data);
      EXPECT_EQ(testing::read_file_bytes(dir / "out" / file.name),
                testing::read_file_bytes(dir / "direct.safetensors"))
          << file.name;
    }
    const HfFolder folder = HfFolder::open(dir / "out");
    ASSERT_EQ(folder.catalog.tensors().size(), tensors.size());
    for (const testing::RandomTensor& tensor : tensors) {
      const TensorCatalog::Entry* entry = folder.catalog.find(tensor.spec.name);
      ASSERT_NE(entry, nullptr);
      std::vector<std::byte> back(tensor.bytes.size());
      folder.catalog.file_of(*entry).read(*entry->info, back);
      EXPECT_EQ(back, tensor.bytes);
    }
    if (plan.index()) {
      EXPECT_EQ(testing::read_file_text(dir / "out" / kHfIndexFileName), hf_index_json(*plan.index()));
    }
  }
}

TEST(HfFolderWriter, FailureLeavesNothingBehind) {
  ScratchDir dir;
  const HfFolderPlan plan = HfFolderPlan::plan(f32_specs({4, 4, 4}), 16);
  int produced = 0;
  const TensorProducer failing = [&](const safetensors::TensorInfo& info, const ByteSink& sink) {
    if (++produced == 3) throw Error(ErrorCode::kIo, "disk on fire");
    const std::vector<std::byte> bytes(info.byte_size());
    sink(bytes);
  };
  EXPECT_TRUE(throws_error([&] { write_hf_folder(dir / "out", plan, failing, false); }, ErrorCode::kIo,
                           {"disk on fire", "'t2'"}));
  EXPECT_TRUE(fs::is_empty(dir.path()));  // neither the folder nor its staging sibling
}

TEST(HfFolderWriter, ShortProducerIsAnError) {
  ScratchDir dir;
  const HfFolderPlan plan = HfFolderPlan::plan(f32_specs({4}), 100);
  const TensorProducer short_one = [](const safetensors::TensorInfo&, const ByteSink& sink) {
    const std::vector<std::byte> bytes(3);
    sink(bytes);
  };
  EXPECT_THROW(write_hf_folder(dir / "out", plan, short_one, false), Error);
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(HfFolderWriter, ReplacingKeepsOtherFilesAndDropsStaleShards) {
  ScratchDir dir;
  const fs::path out = dir / "out";
  std::vector<testing::RandomTensor> tensors;
  for (int i = 0; i < 3; ++i) {
    tensors.push_back({{fmt::format("t{}", i), DType::kU8, {8}}, std::vector<std::byte>(8, std::byte{1})});
  }
  const TensorProducer produce = producer_of(tensors);
  std::vector<TensorSpec> specs;
  for (const auto& tensor : tensors) specs.push_back(tensor.spec);
  write_hf_folder(out, HfFolderPlan::plan(specs, 8), produce, false);
  testing::write_file_text(out / "config.json", "{}");
  EXPECT_TRUE(fs::exists(out / "model-00003-of-00003.safetensors"));

  EXPECT_TRUE(throws_error([&] { write_hf_folder(out, HfFolderPlan::plan(specs, 100), produce, false); },
                           ErrorCode::kAlreadyExists, {"already exists"}));
  write_hf_folder(out, HfFolderPlan::plan(specs, 100), produce, true);
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(out)) left.push_back(entry.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"config.json", "model.safetensors"}));
  EXPECT_EQ(HfFolder::open(out).catalog.tensors().size(), 3u);
  // No staging folder is left beside it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(HfFolderWriter, FindsTheWeightFilesASaveReplaces) {
  ScratchDir dir;
  for (const char* name : {"model-00002-of-00003.safetensors", "model-00001-of-00003.safetensors",
                           "model-123456-of-123456.safetensors", "model.safetensors.index.json", "config.json",
                           "model-1-of-2.safetensors", "model-00001-of-00003.safetensors.bak",
                           "model-0000a-of-00003.safetensors", "other-00001-of-00003.safetensors"}) {
    testing::write_file_text(dir / name, "");
  }
  EXPECT_EQ(hf_weight_files_in(dir.path()),
            (std::vector<std::string>{"model.safetensors.index.json", "model-00001-of-00003.safetensors",
                                      "model-00002-of-00003.safetensors", "model-123456-of-123456.safetensors"}));
}

std::vector<testing::RandomTensor> small_tensors(int count) {
  std::vector<testing::RandomTensor> tensors;
  for (int i = 0; i < count; ++i) {
    tensors.push_back({{fmt::format("t{}", i), DType::kU8, {3000}},
                       std::vector<std::byte>(3000, static_cast<std::byte>(i + 1))});
  }
  return tensors;
}

std::vector<TensorSpec> specs_of(const std::vector<testing::RandomTensor>& tensors) {
  std::vector<TensorSpec> specs;
  for (const auto& tensor : tensors) specs.push_back(tensor.spec);
  return specs;
}

TEST(HfFolderWriter, AFolderInAStoreHasTheLocalFilesAndReplacingDropsStaleOnes) {
  ScratchDir dir;
  const std::vector<testing::RandomTensor> tensors = small_tensors(3);
  const HfFolderPlan split = HfFolderPlan::plan(specs_of(tensors), 4000);  // three files and an index
  const storage::Location out = storage::Location::parse("memory://hf-writer/" + testing::unique_prefix());
  const storage::UploadOptions parts{1024, 2};  // several parts a file, the memory store's smallest
  write_hf_folder(dir / "local", split, producer_of(tensors), false);
  write_hf_folder(out, split, producer_of(tensors), false, parts);
  EXPECT_EQ(objects_under(out), files_under(dir / "local"));

  EXPECT_TRUE(throws_error([&] { write_hf_folder(out, split, producer_of(tensors), false, parts); },
                           ErrorCode::kAlreadyExists, {out.str()}));
  storage::open_store(out)->write_all(out.child("config.json"), "{}", storage::IfExists::kFail);
  const HfFolderPlan one_file = HfFolderPlan::plan(specs_of(tensors), kDefaultMaxShardSize);
  write_hf_folder(out, one_file, producer_of(tensors), true, parts);
  write_hf_folder(dir / "one", one_file, producer_of(tensors), false);
  std::map<std::string, std::string> expected = files_under(dir / "one");
  expected["config.json"] = "{}";  // not a weight file: it stays
  EXPECT_EQ(objects_under(out), expected);
}

TEST(HfFolderWriter, AFailureInAStoreLeavesNothingAndNoUpload) {
  const std::vector<testing::RandomTensor> tensors = small_tensors(3);
  const HfFolderPlan split = HfFolderPlan::plan(specs_of(tensors), 4000);
  const storage::Location out = storage::Location::parse("memory://hf-writer/" + testing::unique_prefix());
  int produced = 0;
  const TensorProducer failing = [&](const safetensors::TensorInfo& info, const ByteSink& sink) {
    if (++produced == 3) throw Error(ErrorCode::kIo, "network on fire");
    sink(std::vector<std::byte>(info.byte_size()));
  };
  EXPECT_TRUE(throws_error([&] { write_hf_folder(out, split, failing, false, {1024, 2}); }, ErrorCode::kIo,
                           {"network on fire", "'t2'"}));
  EXPECT_TRUE(objects_under(out).empty());  // the two files that had appeared were taken back
  for (const HfFolderPlan::File& file : split.files()) {
    EXPECT_EQ(storage::open_store(out)->abort_stale_uploads(out.child(file.name)), 0u) << file.name;
  }
}

TEST(HfFolderWriter, AReplaceThatFailsWritingLeavesTheOldFolderWhole) {
  ScratchDir dir;
  const fs::path out = dir / "out";
  const std::vector<testing::RandomTensor> tensors = small_tensors(3);
  write_hf_folder(out, HfFolderPlan::plan(specs_of(tensors), 4000), producer_of(tensors), false);
  testing::write_file_text(out / "config.json", "{}");
  const std::map<std::string, std::string> before = files_under(out);
  std::vector<testing::RandomTensor> big = small_tensors(3);
  big[2].spec.shape = {1 << 20};
  big[2].bytes.resize(1 << 20);
  {
    FileSizeLimit limit(64 << 10);  // the third file cannot be written
    EXPECT_TRUE(throws_error([&] { write_hf_folder(out, HfFolderPlan::plan(specs_of(big), 4000), producer_of(big), true); },
                             ErrorCode::kIo, {}));
  }
  EXPECT_EQ(files_under(out), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);  // no staging left
}

}  // namespace
}  // namespace reshard
