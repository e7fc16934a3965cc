// A merged export from a source of LoRA factors alone (a LoRA run's
// checkpoint) with the weights from a Hugging Face base folder: the same
// bytes as the merged export of a checkpoint that holds both, from a
// checkpoint, a tensor source and arrays, on one process and several; and the
// refusals (base weights in the source too, an adapter folder as the base).
#include <algorithm>
#include <atomic>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "execute/support/rank_threads.h"
#include "layout/support/expect_error.h"
#include "pipelines/support/export_files.h"
#include "pipelines/support/sub_box.h"
#include "reshard/pipelines/export_model.h"
#include "support/seed.h"
#include "support/temp_dir.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;

bool is_lora(const testing::FrameworkTensor& tensor) { return tensor.name.find(".lora.") != std::string::npos; }

class ExportMergeBaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng = testing::seeded_rng();
    model_ = testing::levanter_model(dims_, DType::kBF16, rng);
    const safetensors::Metadata metadata{{std::string(kLoraConfigMetadataKey), lora_config_json(testing::levanter_lora_config())}};
    testing::save_levanter_checkpoint(model_, dir_ / "full", metadata);
    std::copy_if(model_.begin(), model_.end(), std::back_inserter(factors_), is_lora);
    ASSERT_FALSE(factors_.empty());
    ASSERT_LT(factors_.size(), model_.size());
    testing::save_levanter_checkpoint(factors_, dir_ / "factors", metadata);
    testing::run_ranks(1, [&](Transport& transport) {
      // The base folder: the full checkpoint's weights in Hugging Face's names; the expected folder: them merged.
      export_checkpoint(dir_ / "full", dir_ / "base", map_, transport);
      ExportOptions merged;
      merged.kind = ExportKind::kMergedModel;
      export_checkpoint(dir_ / "full", dir_ / "expected", map_, transport, merged);
    });
  }

  ExportOptions merge_into_base() const {
    ExportOptions options;
    options.kind = ExportKind::kMergedModel;
    options.base = storage::Location(dir_ / "base");
    options.block_bytes = 64;  // several blocks per tensor, spread over the processes
    return options;
  }

  TensorMap map_ = *tensor_map_preset("levanter-llama");
  testing::LevanterDims dims_;
  std::vector<testing::FrameworkTensor> model_, factors_;
  testing::TempDir dir_;
};

TEST_F(ExportMergeBaseTest, FromACheckpointOfFactorsEqualsTheMergeOfAFullOne) {
  for (const int ranks : {1, 3}) {
    SCOPED_TRACE(::testing::Message() << ranks << " processes");
    const fs::path got = dir_ / fmt::format("got-{}", ranks);
    std::atomic<size_t> merged = 0;
    testing::run_ranks(ranks, [&](Transport& transport) {
      merged = export_checkpoint(dir_ / "factors", got, map_, transport, merge_into_base()).merged;
    });
    EXPECT_EQ(merged.load(), 4u * static_cast<size_t>(dims_.layers));  // q, v, o and down in every layer
    EXPECT_EQ(testing::read_folder_files(got), testing::read_folder_files(dir_ / "expected"));
  }
}

TEST_F(ExportMergeBaseTest, FromATensorSourceAndFromArraysToo) {
  TensorSource source;
  std::vector<std::vector<std::byte>> bytes;
  for (const testing::FrameworkTensor& tensor : factors_) {
    source.specs.push_back({tensor.name, tensor.dtype, std::vector<uint64_t>(tensor.shape.begin(), tensor.shape.end())});
    bytes.push_back(tensor.bytes());
  }
  source.read = [&](size_t index, const Box& box, std::span<std::byte> out) {
    const testing::FrameworkTensor& tensor = factors_.at(index);
    const std::vector<std::byte> part =
        testing::sub_box(bytes[index], tensor.shape, box, static_cast<size_t>(dtype_byte_size(tensor.dtype, 1)));
    std::copy(part.begin(), part.end(), out.begin());
  };
  ExportOptions options = merge_into_base();
  options.lora_config = testing::levanter_lora_config();  // a source and arrays carry no metadata
  testing::run_ranks(2, [&](Transport& transport) { export_source(source, dir_ / "source", map_, transport, options); });
  EXPECT_EQ(testing::read_folder_files(dir_ / "source"), testing::read_folder_files(dir_ / "expected"));

  testing::run_ranks(2, [&](Transport& transport) {
    std::vector<NamedArray> arrays;
    for (NamedArray& array : testing::levanter_arrays(model_, transport.rank())) {
      if (array.name.find(".lora.") != std::string::npos) arrays.push_back(std::move(array));
    }
    export_arrays(arrays, dir_ / "arrays", map_, transport, options);
  });
  EXPECT_EQ(testing::read_folder_files(dir_ / "arrays"), testing::read_folder_files(dir_ / "expected"));
}

TEST_F(ExportMergeBaseTest, ASourceWithWeightsOfItsOwnIsRefusedByName) {
  EXPECT_TRUE(testing::throws_error(
      [&] {
        testing::run_ranks(1, [&](Transport& t) { export_checkpoint(dir_ / "full", dir_ / "out", map_, t, merge_into_base()); });
      },
      ErrorCode::kInvalidArgument, {"holds base weights itself", "without a base model"}));
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

TEST_F(ExportMergeBaseTest, AnAdapterFolderIsNoBase) {
  testing::run_ranks(1, [&](Transport& t) {
    ExportOptions adapter;
    adapter.kind = ExportKind::kAdapterOnly;
    export_checkpoint(dir_ / "full", dir_ / "adapter", map_, t, adapter);
  });
  ExportOptions options = merge_into_base();
  options.base = storage::Location(dir_ / "adapter");
  EXPECT_TRUE(testing::throws_error(
      [&] { testing::run_ranks(1, [&](Transport& t) { export_checkpoint(dir_ / "factors", dir_ / "out", map_, t, options); }); },
      ErrorCode::kInvalidArgument, {"PEFT adapter folder", "adapter"}));
  EXPECT_FALSE(fs::exists(dir_ / "out"));
}

}  // namespace
}  // namespace reshard
