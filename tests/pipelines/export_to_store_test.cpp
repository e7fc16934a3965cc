// `export` into an object store (the in-memory store, which keeps the object
// stores' rules: no rename, whole objects, parts of a minimum size; the S3 and
// GCS drivers pass the same store conformance suite): every object equals the
// file of the same export to a local folder, byte for byte, at any process
// count; each process uploads its own parts and none uploads the whole file;
// an existing folder is refused, replaced only when asked, and a failed export
// leaves nothing behind.
#include <atomic>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "execute/support/rank_threads.h"
#include "pipelines/support/export_files.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/export_model.h"
#include "reshard/storage/open_store.h"
#include "storage/support/object_listing.h"
#include "storage/support/store_servers.h"
#include "support/seed.h"
#include "support/temp_dir.h"

namespace reshard {
namespace {

using testing::objects_under;

namespace fs = std::filesystem;
using storage::Location;

constexpr const char* kHfConfig = R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "torch_dtype": "float32"})";

class ExportToStore : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng = testing::seeded_rng();
    model_ = testing::levanter_model(testing::LevanterDims{}, DType::kF32, rng);
    const safetensors::Metadata metadata = {{std::string(kHfConfigMetadataKey), kHfConfig},
                                            {std::string(kLoraConfigMetadataKey), lora_config_json(testing::levanter_lora_config())}};
    testing::save_levanter_checkpoint(model_, dir_ / "ckpt", metadata);
    root_ = Location::parse("memory://exports/" + testing::unique_prefix());
  }

  // Exports at `ranks` processes; returns the tensor bytes each process wrote.
  std::vector<uint64_t> export_with(int ranks, const Location& out, const ExportOptions& options) {
    const TensorMap map = *tensor_map_preset("levanter-llama");
    std::vector<uint64_t> written(static_cast<size_t>(ranks));
    testing::run_ranks(ranks, [&](Transport& transport) {
      written[static_cast<size_t>(transport.rank())] =
          export_checkpoint(dir_ / "ckpt", out, map, transport, options).bytes_written;
    });
    return written;
  }

  static ExportOptions small_parts(ExportKind kind) {
    ExportOptions options;
    options.kind = kind;
    options.block_bytes = 100;      // several blocks a tensor
    options.max_shard_size = 2000;  // several files and an index
    options.part_bytes = 1024;      // several parts a file (the memory store's smallest)
    return options;
  }

  std::vector<testing::FrameworkTensor> model_;
  testing::TempDir dir_;
  Location root_;
};

TEST_F(ExportToStore, ObjectsEqualTheLocalExportsFilesAtAnyProcessCount) {
  for (const ExportKind kind : {ExportKind::kModel, ExportKind::kMergedModel, ExportKind::kAdapterOnly}) {
    ExportOptions options = small_parts(kind);
    if (kind == ExportKind::kAdapterOnly) options.max_shard_size = kDefaultMaxShardSize;
    const fs::path local = dir_ / fmt::format("local-{}", static_cast<int>(kind));
    export_with(1, local, options);
    const auto expected = testing::read_folder_files(local);
    ASSERT_GE(expected.size(), 2u);
    for (const int ranks : {1, 2, 3}) {
      const Location out = root_.child(fmt::format("kind{}-np{}", static_cast<int>(kind), ranks));
      const std::vector<uint64_t> written = export_with(ranks, out, options);
      EXPECT_EQ(objects_under(out), expected) << "kind " << static_cast<int>(kind) << " at " << ranks << " ranks";
      uint64_t total = 0;
      for (const uint64_t bytes : written) total += bytes;
      EXPECT_GT(total, 0u);
      if (ranks > 1 && kind != ExportKind::kAdapterOnly) {
        for (int r = 0; r < ranks; ++r) {
          EXPECT_GT(written[static_cast<size_t>(r)], 0u) << "rank " << r << " uploaded nothing";
          EXPECT_LT(written[static_cast<size_t>(r)], total) << "rank " << r << " uploaded everything";
        }
      }
    }
  }
}

TEST_F(ExportToStore, ArraysExportMovesEachPartsBytesToItsOwner) {
  const TensorMap map = *tensor_map_preset("levanter-llama");
  ExportOptions options = small_parts(ExportKind::kModel);
  options.hf_config_json = kHfConfig;
  export_with(1, dir_ / "local", options);
  const Location out = root_.child("from-arrays");
  testing::run_ranks(2, [&](Transport& transport) {
    const std::vector<NamedArray> arrays = testing::levanter_arrays(model_, transport.rank());
    export_arrays(arrays, out, map, transport, options);
  });
  EXPECT_EQ(objects_under(out), testing::read_folder_files(dir_ / "local"));
}

TEST_F(ExportToStore, AnExistingFolderIsRefusedUnlessReplacedAndThenLosesItsOldWeightFiles) {
  const Location out = root_.child("hf");
  export_with(2, out, small_parts(ExportKind::kModel));
  const auto before = objects_under(out);
  ASSERT_TRUE(before.contains(std::string(kHfIndexFileName)));
  ExportOptions one_file = small_parts(ExportKind::kModel);
  one_file.max_shard_size = kDefaultMaxShardSize;
  try {
    export_with(2, out, one_file);
    FAIL() << "an existing folder was written over";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kAlreadyExists) << e.what();
  }
  EXPECT_EQ(objects_under(out), before);

  one_file.replace = true;
  export_with(2, out, one_file);
  export_with(1, dir_ / "one-file", [&] {
    ExportOptions local = one_file;
    local.replace = false;
    return local;
  }());
  EXPECT_EQ(objects_under(out), testing::read_folder_files(dir_ / "one-file"));
}

TEST_F(ExportToStore, APartSizeTheStoreRefusesFailsBeforeAnythingIsWritten) {
  ExportOptions options = small_parts(ExportKind::kModel);
  options.part_bytes = 10;  // below the store's minimum
  EXPECT_THROW(export_with(2, root_.child("bad"), options), Error);
  EXPECT_TRUE(objects_under(root_.child("bad")).empty());
}

}  // namespace
}  // namespace reshard
