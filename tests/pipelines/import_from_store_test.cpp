// import from a Hugging Face folder in an object store (the in-memory store,
// read by byte ranges, no mapping): every process's arrays equal those of the
// same import from the local folder, byte for byte, at 1 and 2 processes, and
// the checkpoint it saves equals the local import's, file for file, in a store
// or on disk; an existing checkpoint is refused before anything is read.
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "execute/support/rank_threads.h"
#include "pipelines/support/export_files.h"
#include "pipelines/support/hf_llama_folder.h"
#include "pipelines/support/store_folders.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/import_model.h"
#include "storage/support/object_listing.h"
#include "support/seed.h"
#include "support/temp_dir.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
using storage::Location;

// Every shard's bytes of `arrays`, by tensor name and device.
using ShardBytes = std::map<std::pair<std::string, int>, std::vector<std::byte>>;

ShardBytes shard_bytes(const std::vector<NamedArray>& arrays) {
  ShardBytes out;
  for (const NamedArray& array : arrays) {
    for (const Shard& shard : array.array.shards()) {
      const auto bytes = shard.buffer.bytes();
      out[{array.name, shard.device}] = std::vector<std::byte>(bytes.begin(), bytes.end());
    }
  }
  return out;
}

class ImportFromStore : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 rng = testing::seeded_rng();
    const std::vector<safetensors::TensorSpec> model = testing::hf_llama_specs(dims_);
    const std::vector<safetensors::TensorSpec> lora = testing::hf_lora_specs(dims_);
    testing::TensorBytes bytes;
    for (const auto& spec : model) bytes[spec.name] = testing::random_values(spec, rng);
    for (const auto& spec : lora) bytes[spec.name] = testing::random_values(spec, rng);
    testing::write_hf_model_folder(dir_ / "hf", model, bytes, 6000, testing::hf_llama_config_json(dims_));
    testing::write_peft_files(dir_ / "hf", lora, bytes, testing::hf_adapter_config_json(dims_));
    objects_ = testing::fresh_memory_folder("import");
    testing::upload_folder(dir_ / "hf", objects_.child("hf"));
  }

  // The import at `ranks` processes: every process's shards together.
  ShardBytes import_with(int ranks, const Location& source, const ImportOptions& options) {
    const CheckpointLayout layout{Mesh({{"model", 2}}, {1, 0}), Topology::uniform(2, ranks), {}, "model"};
    ShardBytes all;
    std::mutex mutex;
    testing::run_ranks(ranks, [&](Transport& transport) {
      const ImportResult result = import_arrays(source, *tensor_map_preset("levanter-llama"), layout, transport, options);
      EXPECT_EQ(result.metadata.size(), 2u);  // config.json and adapter_config.json, from either source
      const ShardBytes mine = shard_bytes(result.arrays);
      const std::lock_guard lock(mutex);
      all.insert(mine.begin(), mine.end());
    });
    return all;
  }

  void import_checkpoint_with(int ranks, const Location& source, const Location& checkpoint, bool replace = false) {
    const CheckpointLayout layout{Mesh({{"model", 2}}, {1, 0}), Topology::uniform(2, ranks), {}, "model"};
    ImportOptions options;
    options.replace = replace;
    options.upload = {1024, 2};
    testing::run_ranks(ranks, [&](Transport& transport) {
      import_checkpoint(source, checkpoint, *tensor_map_preset("levanter-llama"), layout, transport, options);
    });
  }

  testing::LlamaDims dims_;
  testing::TempDir dir_;
  Location objects_;
};

TEST_F(ImportFromStore, ArraysEqualTheLocalImportsAtAnyProcessCount) {
  for (const bool cast : {false, true}) {
    ImportOptions options;
    if (cast) options.dtype = DType::kBF16;
    const ShardBytes expected = import_with(1, dir_ / "hf", options);
    ASSERT_FALSE(expected.empty());
    for (const int ranks : {1, 2}) {
      EXPECT_EQ(import_with(ranks, objects_.child("hf"), options), expected) << ranks << " ranks, cast " << cast;
    }
  }
}

TEST_F(ImportFromStore, TheCheckpointEqualsTheLocalImportsInAStoreOrOnDisk) {
  import_checkpoint_with(2, dir_ / "hf", dir_ / "ckpt");
  const auto expected = testing::read_folder_files(dir_ / "ckpt");
  import_checkpoint_with(2, objects_.child("hf"), dir_ / "ckpt-from-objects");
  EXPECT_EQ(testing::read_folder_files(dir_ / "ckpt-from-objects"), expected);
  const Location checkpoint = objects_.child("ckpt");
  import_checkpoint_with(2, objects_.child("hf"), checkpoint);
  EXPECT_EQ(testing::objects_under(checkpoint), expected);

  try {
    import_checkpoint_with(2, objects_.child("hf"), checkpoint);
    FAIL() << "an existing checkpoint was written over";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kAlreadyExists) << e.what();
  }
  import_checkpoint_with(2, objects_.child("hf"), checkpoint, true);
  EXPECT_EQ(testing::objects_under(checkpoint), expected);
}

// Objects are fetched several tensors at once: progress is still reported one
// call at a time and adds up to the bytes made, and a failure in one tensor's
// fill ends the import with that error, on every process, leaving nothing running.
TEST_F(ImportFromStore, TensorsFetchedAtOnceReportProgressOneAtATimeAndFailTogether) {
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  std::atomic<uint64_t> reported{0};
  ImportOptions options;
  options.progress = [&](uint64_t bytes) {
    if (inside.fetch_add(1) != 0) overlapped = true;
    std::this_thread::yield();
    reported += bytes;
    inside.fetch_sub(1);
  };
  const ShardBytes all = import_with(1, objects_.child("hf"), options);
  EXPECT_FALSE(overlapped);
  uint64_t distinct = 0;
  std::set<std::pair<std::string, std::string>> slices;  // (tensor, bytes): a replica counts once
  for (const auto& [where, bytes] : all) {
    const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (slices.emplace(where.first, text).second) distinct += bytes.size();
  }
  EXPECT_EQ(reported.load(), distinct);

  std::atomic<int> calls{0};
  options.progress = [&calls](uint64_t) {
    if (++calls == 3) throw Error(ErrorCode::kIo, "the third slice fails");
  };
  for (const int ranks : {1, 2}) {
    calls = 0;
    try {
      import_with(ranks, objects_.child("hf"), options);
      FAIL() << "the failing slice was not reported at " << ranks << " ranks";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("the third slice fails"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace reshard
