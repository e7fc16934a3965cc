// `reshard import`: a Hugging Face folder of a small Llama into a checkpoint
// on a permuted mesh, checked element by element after converting it back
// to a file; errors naming the file, tensor and rule; --force; --help.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/support/run_reshard.h"
#include "pipelines/support/hf_llama_folder.h"
#include "reshard/formats/safetensors_reader.h"
#include "support/seed.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;
using safetensors::TensorSpec;
using testing::run_reshard;
using testing::TempFolder;

constexpr std::string_view kRules = R"(embeddings.*                  model,data
*.q_proj.weight               None,model,data
*.o_proj.weight               None,data,model
*.mlp.*_proj.weight           P(None, ('data', 'model'))
*.q_proj.lora.lora_B.weight   None,model
)";

struct Folder {
  testing::LlamaDims dims;
  std::vector<TensorSpec> specs;
  testing::TensorBytes bytes;
  std::map<std::string, TensorSpec> by_name;
};

// The small Llama with a LoRA adapter beside its weights, and config.json.
Folder write_folder(const fs::path& path, std::mt19937_64& rng) {
  Folder folder;
  const auto model = testing::hf_llama_specs(folder.dims), lora = testing::hf_lora_specs(folder.dims);
  for (const auto* list : {&model, &lora}) {
    for (const TensorSpec& spec : *list) {
      folder.bytes[spec.name] = testing::random_values(spec, rng);
      folder.specs.push_back(spec);
      folder.by_name[spec.name] = spec;
    }
  }
  testing::write_hf_model_folder(path, model, folder.bytes, 5000, testing::hf_llama_config_json(folder.dims));
  testing::write_peft_files(path, lora, folder.bytes, testing::hf_adapter_config_json(folder.dims));
  return folder;
}

void expect_ok(const testing::CommandResult& result) { EXPECT_EQ(result.exit_code, 0) << result.out << result.err; }

// Every framework tensor of `file` (a checkpoint converted back) against the folder.
void expect_framework_tensors(const fs::path& file, const Folder& folder, std::optional<DType> cast) {
  const safetensors::File out = safetensors::File::open(file);
  const auto expected = testing::levanter_llama_specs(folder.dims, true);
  ASSERT_EQ(out.tensors().size(), expected.size());
  for (const TensorSpec& spec : expected) {
    const safetensors::TensorInfo* info = out.find(spec.name);
    ASSERT_NE(info, nullptr) << spec.name;
    EXPECT_EQ(info->shape, spec.shape) << spec.name;
    const DType dtype = cast.value_or(spec.dtype);
    EXPECT_EQ(info->dtype, dtype) << spec.name;
    EXPECT_EQ(testing::mismatch_with_hf(spec.name, Box::whole(safetensors::layout_shape(spec)), out.view(*info), dtype,
                                        folder.bytes, folder.by_name, folder.dims),
              "");
  }
}

TEST(ImportCommand, ImportsOntoAPermutedMeshAndConvertsBackToTheFrameworkTensors) {
  auto rng = testing::seeded_rng();
  TempFolder dir;
  const Folder folder = write_folder(dir / "hf", rng);
  testing::write_bytes(dir / "rules.txt", kRules);
  const auto result = run_reshard({"import", (dir / "hf").string(), (dir / "ck").string(), "--map", "levanter-llama",
                                   "--mesh", "data=2,model=2", "--devices", "2,0,3,1", "--rules",
                                   (dir / "rules.txt").string()});
  expect_ok(result);
  EXPECT_NE(result.out.find("wrote"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("16 tensors"), std::string::npos) << result.out;
  expect_ok(run_reshard({"verify", (dir / "ck").string()}));
  expect_ok(run_reshard({"convert", (dir / "ck").string(), (dir / "back.safetensors").string()}));
  expect_framework_tensors(dir / "back.safetensors", folder, std::nullopt);
  // The configs travel in the checkpoint's metadata.
  const auto inspect = run_reshard({"inspect", (dir / "ck").string(), "--json"});
  expect_ok(inspect);
  EXPECT_NE(inspect.out.find("reshard.hf_config"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("reshard.lora_config"), std::string::npos) << inspect.out;

  // Cast, on another mesh, best effort, over an existing checkpoint with --force.
  expect_ok(run_reshard({"import", (dir / "hf").string(), (dir / "ck").string(), "--map", "levanter-llama", "--mesh",
                         "m=4", "--devices", "3,1,0,2", "--best-effort", "m", "--dtype", "bf16", "--force"}));
  expect_ok(run_reshard({"convert", (dir / "ck").string(), (dir / "bf16.safetensors").string()}));
  expect_framework_tensors(dir / "bf16.safetensors", folder, DType::kBF16);
}

TEST(ImportCommand, ErrorsNameTheFileTensorAndRule) {
  auto rng = testing::seeded_rng();
  TempFolder dir;
  Folder folder = write_folder(dir / "hf", rng);
  const std::string hf = (dir / "hf").string(), ck = (dir / "ck").string();
  const auto fails = [](const testing::CommandResult& result, int code, const std::vector<std::string>& words) {
    EXPECT_EQ(result.exit_code, code) << result.err;
    EXPECT_EQ(result.err.rfind("error: ", 0), 0u) << result.err;
    for (const std::string& word : words) EXPECT_NE(result.err.find(word), std::string::npos) << result.err;
  };
  const std::vector<std::string> mesh = {"--mesh", "x=2", "--best-effort", "x"};
  const auto import = [&](std::vector<std::string> args) {
    std::vector<std::string> all = {"import"};
    all.insert(all.end(), args.begin(), args.end());
    return run_reshard(all);
  };
  fails(import({hf, ck, "--map", (dir / "nosuch.json").string(), "--mesh", "x=2", "--best-effort", "x"}), 1,
        {"nosuch.json"});
  testing::write_bytes(dir / "bad.json", "{\"rules\": [{\"from\": \"a\"}]}");
  // A malformed map file, or config.json, is bad input (1), not a usage error (2).
  fails(import({hf, ck, "--map", (dir / "bad.json").string(), "--mesh", "x=2", "--best-effort", "x"}), 1, {"bad.json"});
  const std::string config = testing::read_bytes(dir / "hf" / "config.json");
  testing::write_bytes(dir / "hf" / "config.json", R"({"num_hidden_layers": "two"})");
  fails(import({hf, ck, "--map", "levanter-llama", "--mesh", "x=2", "--best-effort", "x"}), 1,
        {"config.json", "num_hidden_layers"});
  testing::write_bytes(dir / "hf" / "config.json", config);
  EXPECT_FALSE(fs::exists(dir / "ck"));
  fails(import({hf, ck, "--map", "levanter-llama"}), 2, {"--mesh"});
  fails(import({hf, ck, "--map", "levanter-llama", "--mesh", "x=2"}), 2, {"--rules", "--best-effort"});
  fails(import({hf, ck, "--map", "levanter-llama", "--mesh", "x=2", "--best-effort", "y"}), 2, {"y"});
  fails(import({hf, ck, "--map", "levanter-llama", "--mesh", "x=2", "--rules", (dir / "none.txt").string()}), 1,
        {"none.txt"});
  // A layer missing from the folder: the tensor and the rule, and nothing written.
  std::vector<TensorSpec> gap;
  for (const TensorSpec& spec : testing::hf_llama_specs(folder.dims)) {
    if (spec.name != "model.layers.1.self_attn.k_proj.weight") gap.push_back(spec);
  }
  testing::write_hf_model_folder(dir / "gap", gap, folder.bytes, 5000, testing::hf_llama_config_json(folder.dims));
  fails(import({(dir / "gap").string(), ck, "--map", "levanter-llama", "--mesh", "x=2", "--best-effort", "x"}), 1,
        {"model.layers.{layer}.self_attn.k_proj.weight", "rule 2", "index 1"});
  EXPECT_FALSE(fs::exists(dir / "ck"));
  // A layout rule that does not fit the rank of the tensor it matches: an error with --strict-rules, else the
  // tensor falls through to replication.
  testing::write_bytes(dir / "rules.txt", "transformer.norm.weight  x,None\n");
  fails(import({hf, ck, "--map", "levanter-llama", "--mesh", "x=2", "--rules", (dir / "rules.txt").string(),
                "--strict-rules"}),
        1, {"transformer.norm.weight", "rank 1"});
  EXPECT_FALSE(fs::exists(dir / "ck"));
  expect_ok(import({hf, (dir / "loose").string(), "--map", "levanter-llama", "--mesh", "x=2", "--rules",
                    (dir / "rules.txt").string()}));
  // A mistyped preset lists the presets.
  fails(import({hf, ck, "--map", "levanter-lama", "--mesh", "x=2", "--best-effort", "x"}), 1,
        {"unknown preset 'levanter-lama'", "levanter-llama"});
  // An existing checkpoint is refused without --force.
  std::vector<std::string> good = {hf, ck, "--map", "levanter-llama"};
  good.insert(good.end(), mesh.begin(), mesh.end());
  expect_ok(import(good));
  fails(import(good), 1, {"already exists", "--force"});
  good.push_back("--force");
  expect_ok(import(good));
}

TEST(ImportCommand, HelpShowsExamplesAndTheMapFormat) {
  const auto result = run_reshard({"import", "--help"});
  expect_ok(result);
  for (const char* word : {"Examples:", "reshard import", "mpirun -np 4", "levanter-llama", "--rules", "--best-effort",
                           "--dtype", "--force", "--timeout", "rearrange"}) {
    EXPECT_NE(result.out.find(word), std::string::npos) << word;
  }
  const auto top = run_reshard({"--help"});
  EXPECT_NE(top.out.find("import"), std::string::npos) << top.out;
}

}  // namespace
}  // namespace reshard
