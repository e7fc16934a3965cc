// Import by real processes: each reads its devices' slices of a Hugging Face
// folder of a small Llama, checked element by element, whatever the number
// of ranks; a folder that does not fit the map fails on every rank.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "pipelines/mpi/shared_folder_test.h"
#include "pipelines/support/hf_llama_folder.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/import_model.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
using safetensors::TensorSpec;

using ImportMpi = testing::SharedFolderMpiTest;

// Eight devices over however many ranks run, in an order the ranks do not own them in.
CheckpointLayout layout_for(int processes) {
  const char* rules = "embeddings.*  model\n*.q_proj.weight  None,data,None,model\n*.mlp.*_proj.weight  None,(data,model)\n";
  return {Mesh({{"data", 2}, {"model", 4}}, {0, 4, 1, 5, 2, 6, 3, 7}), Topology::uniform(8, processes),
          parse_layout_rules(rules, "rules"), std::nullopt};
}

TEST_F(ImportMpi, EveryRankBuildsItsSlicesFromTheFolder) {
  Transport& world = testing::world_transport();
  std::mt19937_64 rng(testing::shared_test_seed());
  const testing::LlamaDims dims;
  const std::vector<TensorSpec> specs = testing::hf_llama_specs(dims);
  testing::TensorBytes bytes;
  std::map<std::string, TensorSpec> by_name;
  for (const TensorSpec& spec : specs) {
    bytes[spec.name] = testing::random_values(spec, rng);
    by_name[spec.name] = spec;
  }
  const fs::path dir = shared_folder([&](const fs::path& path) {
    testing::write_hf_model_folder(path / "hf", specs, bytes, 4000, testing::hf_llama_config_json(dims));
  });
  const ImportResult result = import_arrays(dir / "hf", *tensor_map_preset("levanter-llama"), layout_for(world.size()), world);
  const std::vector<NamedArray>& arrays = result.arrays;
  EXPECT_EQ(arrays.size(), testing::levanter_llama_specs(dims, false).size());
  for (const NamedArray& array : arrays) {
    for (const Shard& shard : array.array.shards()) {
      EXPECT_EQ(testing::mismatch_with_hf(array.name, shard.box, shard.buffer.bytes(), array.array.dtype(), bytes, by_name,
                                          dims),
                "")
          << "rank " << world.rank();
    }
  }
  EXPECT_GT(result.bytes_read, 0u);
}

TEST_F(ImportMpi, AFolderThatDoesNotFitFailsOnEveryRank) {
  Transport& world = testing::world_transport();
  std::mt19937_64 rng(testing::shared_test_seed());
  const testing::LlamaDims dims;
  std::vector<TensorSpec> specs = testing::hf_llama_specs(dims);
  testing::TensorBytes bytes;
  for (const TensorSpec& spec : specs) bytes[spec.name] = testing::random_values(spec, rng);
  specs.push_back({"unexpected.weight", DType::kF32, {2}});
  bytes["unexpected.weight"] = testing::Bytes(8);
  const fs::path dir = shared_folder([&](const fs::path& path) {
    testing::write_hf_model_folder(path / "hf", specs, bytes, 4000, testing::hf_llama_config_json(dims));
  });
  try {
    import_checkpoint(dir / "hf", dir / "ck", *tensor_map_preset("levanter-llama"), layout_for(world.size()), world);
    ADD_FAILURE() << "the import succeeded on rank " << world.rank();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    EXPECT_NE(std::string(e.what()).find("unexpected.weight"), std::string::npos) << e.what();
  }
  world.barrier();
  EXPECT_FALSE(fs::exists(dir / "ck"));
}

}  // namespace
}  // namespace reshard
