// safetensors files and Hugging Face folders read from objects (the memory
// store here; the S3 and GCS drivers pass the same store conformance suite):
// the same header, tensors and boxes as the local file, read by byte ranges.
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "reshard/formats/hf_folder.h"
#include "reshard/formats/model_files.h"
#include "reshard/formats/safetensors_reader.h"
#include "reshard/formats/safetensors_writer.h"
#include "reshard/storage/open_store.h"
#include "reshard/storage/storage_error.h"
#include "storage/support/store_servers.h"
#include "support/seed.h"
#include "support/temp_dir.h"

namespace reshard {
namespace {

using storage::Location;
using testing::TempDir;

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return std::move(out).str();
}

class SafetensorsFromStore : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng(testing::test_seed());
    for (auto& value : weights_) value = static_cast<float>(rng() % 1000) / 7.0f;
    for (auto& value : bias_) value = static_cast<uint16_t>(rng());
    const safetensors::TensorData tensors[] = {
        {{"w", DType::kF32, {24, 40}}, std::as_bytes(std::span(weights_))},
        {{"b", DType::kBF16, {40}}, std::as_bytes(std::span(bias_))},
    };
    safetensors::write_file(temp_ / "model.safetensors", tensors);
    root_ = Location::parse("memory://formats/" + testing::unique_prefix());
    store_ = storage::open_store(root_);
    store_->write_all(root_.child("model/model.safetensors"), file_bytes(temp_ / "model.safetensors"),
                      storage::IfExists::kFail);
  }

  std::array<float, 24 * 40> weights_{};
  std::array<uint16_t, 40> bias_{};
  TempDir temp_;
  Location root_;
  std::shared_ptr<storage::Store> store_;
};

TEST_F(SafetensorsFromStore, AnObjectReadsAsTheLocalFileDoesTensorsAndBoxes) {
  const auto local = safetensors::File::open(temp_ / "model.safetensors");
  const auto remote = safetensors::File::open(root_.child("model/model.safetensors"));
  EXPECT_EQ(remote.mode(), safetensors::ReadMode::kPread);
  EXPECT_EQ(remote.path().string(), root_.child("model/model.safetensors").str());
  ASSERT_EQ(remote.tensors().size(), local.tensors().size());
  for (size_t i = 0; i < local.tensors().size(); ++i) {
    EXPECT_EQ(remote.tensors()[i].name, local.tensors()[i].name);
    EXPECT_EQ(remote.tensors()[i].shape, local.tensors()[i].shape);
  }
  std::vector<std::byte> whole(remote.tensor("b").byte_size());
  remote.read(remote.tensor("b"), whole);
  EXPECT_EQ(0, std::memcmp(whole.data(), bias_.data(), whole.size()));

  std::mt19937_64 rng(testing::test_seed());
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t r0 = static_cast<int64_t>(rng() % 24), c0 = static_cast<int64_t>(rng() % 40);
    const int64_t rows = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(24 - r0));
    const int64_t cols = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(40 - c0));
    const Box box({r0, c0}, {rows, cols});
    std::vector<std::byte> want(safetensors::File::box_bytes(DType::kF32, box));
    std::vector<std::byte> got(want.size());
    local.read_box(local.tensor("w"), box, want);
    remote.read_box(remote.tensor("w"), box, got);
    ASSERT_EQ(got, want) << "box " << box.to_string();
  }
  EXPECT_THROW((void)remote.view(remote.tensor("w")), Error);
}

TEST_F(SafetensorsFromStore, APrefixOfObjectsOpensAsAModelFolder) {
  const ModelFiles model = open_model_files(root_.child("model"));
  EXPECT_EQ(model.format, ModelFormat::kHf);
  EXPECT_EQ(model.path, root_.child("model"));
  EXPECT_EQ(model.catalog.tensors().size(), 2u);
  const ModelFiles lone = open_model_files(root_.child("model/model.safetensors"));
  EXPECT_EQ(lone.format, ModelFormat::kSafetensors);
  EXPECT_EQ(HfFolder::detect(root_.child("model")), HfFolderKind::kSingleFile);
}

TEST_F(SafetensorsFromStore, MissingObjectsAndFoldersAreNamed) {
  try {
    (void)safetensors::File::open(root_.child("model"));
    FAIL() << "a prefix opened as a file";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), storage::kObjectNotFound);
    EXPECT_THAT(e.what(), ::testing::HasSubstr("a folder, not a file"));
  }
  try {
    (void)open_model_files(root_.child("nothing"));
    FAIL() << "nothing opened as a model";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), storage::kObjectNotFound);
    EXPECT_THAT(e.what(), ::testing::HasSubstr(root_.child("nothing").str()));
  }
}

TEST_F(SafetensorsFromStore, ATruncatedObjectIsRefusedAsATruncatedFileIs) {
  std::string bytes = file_bytes(temp_ / "model.safetensors");
  bytes.resize(bytes.size() - 10);
  store_->write_all(root_.child("short.safetensors"), bytes, storage::IfExists::kFail);
  try {
    (void)safetensors::File::open(root_.child("short.safetensors"));
    FAIL() << "a truncated object opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidFile) << e.what();
  }
}

}  // namespace
}  // namespace reshard
