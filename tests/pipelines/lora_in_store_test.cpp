// merge-lora and write_peft_adapter from and to an object store (the
// in-memory store): every object equals the file the same call writes
// locally; an existing folder is refused, replaced only when asked (its stale
// weight files removed, its other files kept); a failure leaves nothing at the
// destination and no upload pending; and replacing a local folder is atomic:
// a failure leaves the old folder as it was, with no staging beside it.
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "pipelines/support/export_files.h"
#include "pipelines/support/hf_llama_folder.h"
#include "pipelines/support/store_folders.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/formats/hf_index.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/merge_lora.h"
#include "reshard/pipelines/peft_adapter.h"
#include "reshard/storage/open_store.h"
#include "storage/support/object_listing.h"
#include "support/error_of.h"
#include "support/seed.h"
#include "support/temp_dir.h"

namespace reshard {
namespace {

using testing::error_of;

namespace fs = std::filesystem;
using storage::Location;

size_t entries_in(const fs::path& folder) {
  return static_cast<size_t>(std::distance(fs::directory_iterator(folder), fs::directory_iterator()));
}

// Small parts, two at a time: an adapter of a few KiB still goes up in several.
WritePeftAdapterOptions in_parts(bool replace = false) {
  WritePeftAdapterOptions options;
  options.replace = replace;
  options.upload = {1024, 2};
  return options;
}

class LoraInStore : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng = testing::seeded_rng();
    const std::vector<safetensors::TensorSpec> model = testing::hf_llama_specs(dims_);
    lora_ = testing::hf_lora_specs(dims_);
    for (const auto& spec : model) bytes_[spec.name] = testing::random_values(spec, rng);
    for (const auto& spec : lora_) bytes_[spec.name] = testing::random_values(spec, rng);
    testing::write_hf_model_folder(dir_ / "base", model, bytes_, 6000, testing::hf_llama_config_json(dims_));
    std::ofstream(dir_ / "base" / "tokenizer.json") << R"({"version": "1.0"})";
    testing::write_peft_files(dir_ / "adapter", lora_, bytes_, testing::hf_adapter_config_json(dims_));
    objects_ = testing::fresh_memory_folder("lora");
    testing::upload_folder(dir_ / "base", objects_.child("base"));
    testing::upload_folder(dir_ / "adapter", objects_.child("adapter"));
  }

  static MergeLoraOptions merge_options(uint64_t max_shard_size = 8000) {
    MergeLoraOptions options;
    options.max_shard_size = max_shard_size;  // several files and an index
    options.block_bytes = 256;                // several blocks a weight
    options.upload = {1024, 2};               // several parts a file
    return options;
  }

  TensorProducer lora_producer() const {
    return [this](const safetensors::TensorInfo& tensor, const ByteSink& sink) { sink(bytes_.at(tensor.name)); };
  }

  LoraConfig lora_config() const { return parse_lora_config(testing::hf_adapter_config_json(dims_), "config"); }

  testing::LlamaDims dims_;
  std::vector<safetensors::TensorSpec> lora_;
  testing::TensorBytes bytes_;
  testing::TempDir dir_;
  Location objects_;
};

TEST_F(LoraInStore, MergedObjectsEqualTheLocalMergeFromEitherSource) {
  const MergeLoraResult local = merge_lora_folder(dir_ / "base", dir_ / "adapter", dir_ / "merged", merge_options());
  const auto expected = testing::read_folder_files(dir_ / "merged");
  ASSERT_TRUE(expected.contains(std::string(kHfIndexFileName)));
  ASSERT_TRUE(expected.contains("tokenizer.json"));
  const Location out = objects_.child("from-objects");
  const MergeLoraResult remote =
      merge_lora_folder(objects_.child("base"), objects_.child("adapter"), out, merge_options());
  EXPECT_EQ(testing::objects_under(out), expected);
  EXPECT_EQ(remote.carried, local.carried);
  EXPECT_EQ(remote.merged, local.merged);
  merge_lora_folder(dir_ / "base", dir_ / "adapter", objects_.child("from-local"), merge_options());
  EXPECT_EQ(testing::objects_under(objects_.child("from-local")), expected);
  merge_lora_folder(objects_.child("base"), objects_.child("adapter"), dir_ / "back", merge_options());
  EXPECT_EQ(testing::read_folder_files(dir_ / "back"), expected);
}

TEST_F(LoraInStore, AnExistingMergedFolderIsRefusedUnlessReplacedAndThenLosesItsOldWeightFiles) {
  const Location out = objects_.child("merged");
  merge_lora_folder(objects_.child("base"), objects_.child("adapter"), out, merge_options());
  storage::open_store(out)->write_all(out.child("notes.txt"), "mine", storage::IfExists::kFail);
  const auto before = testing::objects_under(out);
  MergeLoraOptions one_file = merge_options(kDefaultMaxShardSize);
  const auto refused = error_of([&] { merge_lora_folder(objects_.child("base"), objects_.child("adapter"), out, one_file); });
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code(), ErrorCode::kAlreadyExists);
  EXPECT_EQ(testing::objects_under(out), before);

  one_file.replace = true;
  merge_lora_folder(objects_.child("base"), objects_.child("adapter"), out, one_file);
  one_file.replace = false;
  merge_lora_folder(dir_ / "base", dir_ / "adapter", dir_ / "one-file", one_file);
  auto expected = testing::read_folder_files(dir_ / "one-file");
  expected["notes.txt"] = "mine";
  EXPECT_EQ(testing::objects_under(out), expected);
}

TEST_F(LoraInStore, AFailedMergeLeavesNothingAndNoUpload) {
  merge_lora_folder(dir_ / "base", dir_ / "adapter", dir_ / "names", merge_options());
  std::vector<std::string> names;
  for (const auto& [name, bytes] : testing::read_folder_files(dir_ / "names")) names.push_back(name);
  // Midway: the second weight file is being uploaded when the failure comes.
  const Location out = objects_.child("failed");
  MergeLoraOptions failing = merge_options();
  uint64_t produced = 0;
  failing.progress = [&produced](uint64_t bytes) {
    produced += bytes;
    if (produced > 12000) throw Error(ErrorCode::kIo, "injected: the network went away");
  };
  const auto midway = error_of([&] { merge_lora_folder(objects_.child("base"), objects_.child("adapter"), out, failing); });
  ASSERT_TRUE(midway.has_value());
  EXPECT_NE(std::string(midway->what()).find("injected"), std::string::npos) << midway->what();
  EXPECT_TRUE(testing::objects_under(out).empty());
  EXPECT_EQ(testing::pending_uploads(out, names), 0u);

  // Before anything: an adapter whose keys name a layer the base does not have.
  const Location adapter = objects_.child("bad-adapter");
  const std::string module = "base_model.model.model.layers.9.self_attn.q_proj";
  const std::vector<safetensors::TensorSpec> stray = {
      {module + ".lora_A.weight", DType::kF32, {static_cast<uint64_t>(dims_.r), static_cast<uint64_t>(dims_.embed)}},
      {module + ".lora_B.weight", DType::kF32, {static_cast<uint64_t>(dims_.embed), static_cast<uint64_t>(dims_.r)}}};
  testing::TensorBytes stray_bytes;
  for (const auto& spec : stray) stray_bytes[spec.name] = testing::Bytes(static_cast<size_t>(dims_.r * dims_.embed * 4));
  testing::write_peft_files(dir_ / "bad-adapter", stray, stray_bytes, testing::hf_adapter_config_json(dims_));
  testing::upload_folder(dir_ / "bad-adapter", adapter);
  const auto early = error_of([&] { merge_lora_folder(objects_.child("base"), adapter, out, merge_options()); });
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(early->code(), ErrorCode::kMissingTensor) << early->what();
  EXPECT_TRUE(testing::objects_under(out).empty());
}

TEST_F(LoraInStore, ReplacingALocalFolderIsAtomic) {
  const fs::path out = dir_ / "out" / "merged";
  merge_lora_folder(dir_ / "base", dir_ / "adapter", out, merge_options());
  std::ofstream(out / "notes.txt") << "mine";
  const auto before = testing::read_folder_files(out);
  MergeLoraOptions failing = merge_options(kDefaultMaxShardSize);
  failing.replace = true;
  uint64_t produced = 0;
  failing.progress = [&](uint64_t bytes) {
    // While the new files are written, the old folder is all there.
    EXPECT_EQ(testing::read_folder_files(out), before);
    produced += bytes;
    if (produced > 12000) throw Error(ErrorCode::kIo, "injected: the disk went away");
  };
  EXPECT_TRUE(error_of([&] { merge_lora_folder(dir_ / "base", dir_ / "adapter", out, failing); }).has_value());
  EXPECT_EQ(testing::read_folder_files(out), before);
  EXPECT_EQ(entries_in(dir_ / "out"), 1u);  // no staging folder left beside it

  failing.progress = nullptr;
  merge_lora_folder(dir_ / "base", dir_ / "adapter", out, failing);
  merge_lora_folder(dir_ / "base", dir_ / "adapter", dir_ / "one-file", merge_options(kDefaultMaxShardSize));
  auto expected = testing::read_folder_files(dir_ / "one-file");
  expected["notes.txt"] = "mine";
  EXPECT_EQ(testing::read_folder_files(out), expected);
  EXPECT_EQ(entries_in(dir_ / "out"), 1u);
}

TEST_F(LoraInStore, AnAdapterWrittenToAStoreEqualsTheLocalOne) {
  const LoraConfig config = lora_config();
  write_peft_adapter(config, lora_, lora_producer(), dir_ / "local-adapter");
  const auto expected = testing::read_folder_files(dir_ / "local-adapter");
  ASSERT_EQ(expected.size(), 2u);
  const Location out = objects_.child("written-adapter");
  write_peft_adapter(config, lora_, lora_producer(), out, in_parts());
  EXPECT_EQ(testing::objects_under(out), expected);
  EXPECT_EQ(HfFolder::open(out).kind, HfFolderKind::kPeftAdapter);

  const auto refused = error_of([&] { write_peft_adapter(config, lora_, lora_producer(), out, in_parts()); });
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code(), ErrorCode::kAlreadyExists);
  storage::open_store(out)->write_all(out.child("README.md"), "mine", storage::IfExists::kFail);
  write_peft_adapter(config, lora_, lora_producer(), out, in_parts(true));
  auto with_readme = expected;
  with_readme["README.md"] = "mine";
  EXPECT_EQ(testing::objects_under(out), with_readme);
}

TEST_F(LoraInStore, AFailedAdapterWriteLeavesNothingAndNoUpload) {
  const Location out = objects_.child("failed-adapter");
  size_t produced = 0;
  const TensorProducer failing = [&](const safetensors::TensorInfo& tensor, const ByteSink& sink) {
    if (++produced == 3) throw Error(ErrorCode::kIo, "injected: the network went away");
    sink(bytes_.at(tensor.name));
  };
  const auto error = error_of([&] { write_peft_adapter(lora_config(), lora_, failing, out, in_parts()); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->code(), ErrorCode::kIo);
  EXPECT_TRUE(testing::objects_under(out).empty());
  const std::vector<std::string> names = {std::string(kPeftAdapterFileName)};
  EXPECT_EQ(testing::pending_uploads(out, names), 0u);
}

}  // namespace
}  // namespace reshard
