// Import: a Hugging Face folder of a small Llama (random values) onto a
// framework layout over processes, every shard byte checked against the
// element the test itself says it comes from; round trips from a forward
// copy for the preset and random maps; map errors before anything is
// written; bytes read bounded by each process's slices; checkpoints.
#include "reshard/pipelines/import_model.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "execute/support/rank_threads.h"
#include "pipelines/support/axis_groups.h"
#include "pipelines/support/hf_llama_folder.h"
#include "pipelines/support/sub_box.h"
#include "pipelines/tensor_map/tensor_map_copy.h"
#include "reshard/formats/checkpoint_reader.h"
#include "reshard/layout/error.h"
#include "reshard/pipelines/checkpoint_restore.h"
#include "reshard/pipelines/checkpoint_save.h"
#include "support/seed.h"
#include "support/temp_dir.h"

namespace reshard {

using pipelines_detail::copy_output_box;
using pipelines_detail::resolve_tensor_map;
using pipelines_detail::ResolvedMap;
using pipelines_detail::ResolvedTensor;

namespace {

namespace fs = std::filesystem;
using safetensors::TensorSpec;
using testing::Bytes;
using testing::groups_shape;
using testing::random_groups;
using testing::rearrange_side;
using testing::sub_box;
using testing::LlamaDims;
using testing::TensorBytes;

constexpr std::string_view kRules = R"(# framework tensor      spec
embeddings.*                  model,data
*.q_proj.weight               None,model,data
*.k_proj.weight               None,None,model
*.o_proj.weight               None,data,model
*.mlp.*_proj.weight           P(None, ('data', 'model'))
*.q_proj.lora.lora_B.weight   None,model
*.o_proj.lora.lora_A.weight   None,None,model,data
lm_head.weight                P(('model', 'data'))
)";

size_t width(DType dtype) { return element_bytes(dtype); }

// data=2, model=2 over devices in another order than the processes own them
// (process 0 has devices 0 and 1, process 1 has 2 and 3).
CheckpointLayout llama_layout() {
  return {Mesh({{"data", 2}, {"model", 2}}, {2, 0, 3, 1}), Topology::uniform(4, 2), parse_layout_rules(kRules, "rules"),
          std::nullopt};
}

std::map<std::string, TensorSpec> by_name(const std::vector<TensorSpec>& specs) {
  std::map<std::string, TensorSpec> out;
  for (const TensorSpec& spec : specs) out[spec.name] = spec;
  return out;
}

// A Hugging Face folder of the small Llama: an index over several files,
// config.json, and (when `adapter`) a PEFT adapter beside the weights.
struct LlamaFolder {
  LlamaDims dims;
  std::vector<TensorSpec> specs;  // model and adapter tensors
  TensorBytes bytes;
};

LlamaFolder write_llama_folder(const fs::path& folder, bool adapter, std::mt19937_64& rng) {
  LlamaFolder out;
  const std::vector<TensorSpec> model = testing::hf_llama_specs(out.dims), lora = testing::hf_lora_specs(out.dims);
  for (const TensorSpec& spec : model) out.bytes[spec.name] = testing::random_values(spec, rng);
  testing::write_hf_model_folder(folder, model, out.bytes, 6000, testing::hf_llama_config_json(out.dims));
  out.specs = model;
  if (adapter) {
    for (const TensorSpec& spec : lora) out.bytes[spec.name] = testing::random_values(spec, rng);
    testing::write_peft_files(folder, lora, out.bytes, testing::hf_adapter_config_json(out.dims));
    out.specs.insert(out.specs.end(), lora.begin(), lora.end());
  }
  return out;
}

std::string mismatch(const NamedArray& array, const LlamaFolder& folder) {
  const auto specs = by_name(folder.specs);
  for (const Shard& shard : array.array.shards()) {
    std::string why = testing::mismatch_with_hf(array.name, shard.box, shard.buffer.bytes(), array.array.dtype(),
                                                folder.bytes, specs, folder.dims);
    if (!why.empty()) return fmt::format("device {}: {}", shard.device, why);
  }
  return "";
}

// The source bytes `arrays`' distinct slices need in `dtypes` (by name):
// what one process's import may read at most.
uint64_t distinct_slice_bytes(const std::vector<NamedArray>& arrays, const std::map<std::string, TensorSpec>& sources) {
  uint64_t total = 0;
  for (const NamedArray& array : arrays) {
    std::set<std::pair<std::vector<int64_t>, Shape>> boxes;
    for (const Shard& shard : array.array.shards()) {
      if (boxes.insert({shard.box.origin(), shard.box.shape()}).second) {
        total += static_cast<uint64_t>(shard.box.volume()) * width(sources.at(array.name).dtype);
      }
    }
  }
  return total;
}

TEST(ImportModel, EveryShardIsTheHuggingFaceElementTheMapSays) {
  auto rng = testing::seeded_rng();
  testing::TempDir dir;
  const LlamaFolder folder = write_llama_folder(dir / "hf", true, rng);
  ASSERT_TRUE(fs::exists(dir / "hf" / "model.safetensors.index.json"));  // several files
  const CheckpointLayout layout = llama_layout();
  const auto expected = testing::levanter_llama_specs(folder.dims, true);
  const auto framework = by_name(expected);
  uint64_t folder_bytes = 0;
  for (const auto& [name, bytes] : folder.bytes) folder_bytes += bytes.size();
  std::mutex mutex;
  testing::run_ranks(2, [&](Transport& transport) {
    const ImportResult result = import_arrays(dir / "hf", *tensor_map_preset("levanter-llama"), layout, transport);
    const std::vector<NamedArray>& arrays = result.arrays;
    ASSERT_EQ(arrays.size(), expected.size());
    EXPECT_EQ(result.tensors, expected.size());
    for (const NamedArray& array : arrays) {
      SCOPED_TRACE(fmt::format("rank {}: {}", transport.rank(), array.name));
      ASSERT_TRUE(framework.count(array.name));
      const TensorSpec& spec = framework.at(array.name);
      EXPECT_EQ(array.array.shape(), safetensors::layout_shape(spec));
      EXPECT_EQ(array.array.dtype(), spec.dtype);
      EXPECT_EQ(array.array.sharding(), layout.sharding_for(array.name, array.array.shape()));
      EXPECT_EQ(array.array.shards().size(), 2u);  // this process's devices only
      for (const Shard& shard : array.array.shards()) EXPECT_EQ(layout.topology.process_of(shard.device), transport.rank());
      EXPECT_EQ(mismatch(array, folder), "");
    }
    const uint64_t bound = distinct_slice_bytes(arrays, framework);
    EXPECT_LE(result.bytes_read, bound);
    EXPECT_GT(result.bytes_read, 0u);
    EXPECT_LT(result.bytes_read, folder_bytes);  // a process reads its part, not the model
    const std::lock_guard lock(mutex);
    std::cout << fmt::format("rank {}: read {} of {} folder bytes (its distinct slices: {})\n", transport.rank(),
                             result.bytes_read, folder_bytes, bound);
    ASSERT_EQ(result.metadata.size(), 2u);
    EXPECT_EQ(result.metadata[0].first, kHfConfigMetadataKey);
    EXPECT_EQ(result.metadata[0].second, testing::hf_llama_config_json(folder.dims));
    EXPECT_EQ(result.metadata[1].first, kLoraConfigMetadataKey);
    EXPECT_EQ(result.metadata[1].second, testing::hf_adapter_config_json(folder.dims));
  });
}

TEST(ImportModel, CastsFloatsToTheImportDtype) {
  auto rng = testing::seeded_rng();
  testing::TempDir dir;
  const LlamaFolder folder = write_llama_folder(dir / "hf", false, rng);
  const CheckpointLayout layout{Mesh({{"model", 2}}, {1, 0}), Topology::uniform(2, 1), {}, "model"};
  ImportOptions options;
  options.dtype = DType::kBF16;
  testing::run_ranks(1, [&](Transport& transport) {
    const auto arrays = import_arrays(dir / "hf", *tensor_map_preset("levanter-llama"), layout, transport, options).arrays;
    ASSERT_EQ(arrays.size(), testing::levanter_llama_specs(folder.dims, false).size());
    for (const NamedArray& array : arrays) {
      EXPECT_EQ(array.array.dtype(), DType::kBF16) << array.name;
      EXPECT_EQ(mismatch(array, folder), "");
    }
  });
}

// ---- round trips from a forward copy ----

// The map applied forwards with copy_output_box over whole tensors: what an
// export of `tensors` writes.
TensorBytes forward_copy(const TensorMap& map, const std::vector<TensorSpec>& specs, const TensorBytes& tensors,
                         std::vector<TensorSpec>& out_specs) {
  const ResolvedMap resolved = resolve_tensor_map(map, specs);
  TensorBytes out;
  for (const ResolvedTensor& tensor : resolved.outputs) {
    Bytes bytes(static_cast<size_t>(safetensors::element_count(tensor.out.shape, tensor.out.name)) * width(tensor.out.dtype));
    copy_output_box(resolved, tensor, Box::whole(safetensors::layout_shape(tensor.out)),
                    [&](size_t s) { return std::span<const std::byte>(tensors.at(specs[s].name)); }, bytes);
    out[tensor.out.name] = std::move(bytes);
  }
  out_specs = resolved.output_specs();
  return out;
}

// Every shard of `arrays` against the original tensors; "" when all equal.
std::string mismatch_with_original(const std::vector<NamedArray>& arrays, const std::vector<TensorSpec>& specs,
                                   const TensorBytes& original) {
  if (arrays.size() != specs.size()) return fmt::format("{} arrays for {} tensors", arrays.size(), specs.size());
  for (const NamedArray& array : arrays) {
    const auto spec = std::find_if(specs.begin(), specs.end(), [&](const TensorSpec& s) { return s.name == array.name; });
    if (spec == specs.end()) return "unexpected tensor " + array.name;
    if (array.array.shape() != safetensors::layout_shape(*spec) || array.array.dtype() != spec->dtype) {
      return array.name + ": shape or dtype differs";
    }
    for (const Shard& shard : array.array.shards()) {
      const Bytes expected = sub_box(original.at(array.name), array.array.shape(), shard.box, width(spec->dtype));
      if (!std::equal(expected.begin(), expected.end(), shard.buffer.bytes().begin(), shard.buffer.bytes().end())) {
        return fmt::format("{}: device {} slice {} differs", array.name, shard.device, shard.box.to_string());
      }
    }
  }
  return "";
}

TEST(ImportModel, PresetRoundTripsFromAForwardCopy) {
  auto rng = testing::seeded_rng();
  testing::TempDir dir;
  const LlamaDims dims;
  const std::vector<TensorSpec> framework = testing::levanter_llama_specs(dims, true);
  TensorBytes original;
  for (const TensorSpec& spec : framework) original[spec.name] = testing::random_values(spec, rng);
  const TensorMap map = *tensor_map_preset("levanter-llama");
  std::vector<TensorSpec> hf_specs;
  const TensorBytes hf = forward_copy(map, framework, original, hf_specs);
  testing::write_hf_model_folder(dir / "hf", hf_specs, hf, uint64_t{1} << 30, testing::hf_llama_config_json(dims));
  testing::run_ranks(2, [&](Transport& transport) {
    EXPECT_EQ(mismatch_with_original(import_arrays(dir / "hf", map, llama_layout(), transport).arrays, framework, original),
              "");
  });
}

// A random rule: axes a0..an-1 grouped into the framework's dimensions,
// permuted and regrouped for Hugging Face, maybe one unstacked.
struct RandomRule {
  AxisSizes sizes;
  AxisGroups from, to;
  bool unstacks = false;
};

RandomRule random_rule(std::mt19937_64& rng) {
  RandomRule rule;
  std::vector<std::string> names;
  for (int i = 0, n = 1 + static_cast<int>(rng() % 5); i < n; ++i) {
    names.push_back(fmt::format("a{}", i));
    rule.sizes[names.back()] = 1 + static_cast<int64_t>(rng() % 4);
  }
  rule.from = random_groups(names, rng);
  std::vector<std::string> kept = names;
  if (rng() % 2 == 0 && rule.from.front().size() == 1) {
    rule.unstacks = true;
    kept.erase(std::find(kept.begin(), kept.end(), rule.from.front()[0]));
  }
  rule.to = random_groups(kept, rng);
  return rule;
}

// A random spec over data=2, model=2 that divides `shape`.
PartitionSpec random_spec(const Shape& shape, std::mt19937_64& rng) {
  std::vector<SpecEntry> entries;
  std::set<std::string> used;
  for (const int64_t n : shape) {
    const std::vector<SpecEntry> choices = {{}, {"data"}, {"model"}, {"data", "model"}, {"model", "data"}};
    SpecEntry entry = choices[rng() % choices.size()];
    int64_t ways = 1;
    bool free = true;
    for (const std::string& axis : entry) {
      ways *= 2;
      free = free && !used.count(axis);
    }
    if (!free || n % ways != 0) entry.clear();
    used.insert(entry.begin(), entry.end());
    entries.push_back(entry);
  }
  return PartitionSpec(entries);
}

TEST(ImportModel, RandomMapsRoundTripFromAForwardCopy) {
  auto rng = testing::seeded_rng();
  const DType kDtypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kI32, DType::kU8, DType::kI64};
  for (int trial = 0; trial < 25; ++trial) {
    testing::TempDir dir;
    std::string json = "{\"rules\": [";
    std::vector<RandomRule> rules;
    std::vector<TensorSpec> framework;
    TensorBytes original;
    std::vector<DeviceId> devices = {0, 1, 2, 3};
    std::shuffle(devices.begin(), devices.end(), rng);
    CheckpointLayout layout{Mesh({{"data", 2}, {"model", 2}}, devices), Topology::uniform(4, 2), {}, std::nullopt};
    for (int r = 0, n = 1 + static_cast<int>(rng() % 3); r < n; ++r) {
      rules.push_back(random_rule(rng));
      const RandomRule& rule = rules.back();
      const std::string to = rule.unstacks ? fmt::format("out{}.{{{}}}", r, rule.from.front()[0]) : fmt::format("out{}", r);
      json += fmt::format("{}{{\"from\": \"src{}\", \"to\": \"{}\", \"rearrange\": \"{} -> {}\"}}", r ? ", " : "", r, to,
                          rearrange_side(rule.from), rearrange_side(rule.to));
      const Shape shape = groups_shape(rule.from, rule.sizes);
      framework.push_back({fmt::format("src{}", r), kDtypes[rng() % std::size(kDtypes)], safetensors::dims_of(shape)});
      original[framework.back().name] = testing::random_values(framework.back(), rng);
      layout.rules.push_back({framework.back().name, random_spec(shape, rng)});
    }
    json += "]}";
    TensorMap map = parse_tensor_map(json, "random");
    for (size_t r = 0; r < rules.size(); ++r) map.rules[r].sizes = rules[r].sizes;  // axes of rules share names
    SCOPED_TRACE(fmt::format("trial {}: {} on {}", trial, json, layout.mesh.to_string()));
    std::vector<TensorSpec> hf_specs;
    const TensorBytes hf = forward_copy(map, framework, original, hf_specs);
    testing::write_hf_model_folder(dir / "hf", hf_specs, hf, 200, std::nullopt);
    testing::run_ranks(2, [&](Transport& transport) {
      EXPECT_EQ(mismatch_with_original(import_arrays(dir / "hf", map, layout, transport).arrays, framework, original), "");
    });
  }
}

// ---- errors, before anything is written ----

// Imports `folder` into `checkpoint` on two processes; both must fail with
// `kind` and a message containing each of `words`.
void expect_import_fails(const fs::path& folder, const fs::path& checkpoint, const CheckpointLayout& layout,
                         const ImportOptions& options, ErrorKind kind, const std::vector<std::string>& words) {
  SCOPED_TRACE(fmt::format("importing {} into {}", folder.string(), checkpoint.string()));
  testing::run_ranks(2, [&](Transport& transport) {
    try {
      import_checkpoint(folder, checkpoint, *tensor_map_preset("levanter-llama"), layout, transport, options);
      ADD_FAILURE() << "importing " << folder << " into " << checkpoint << " succeeded on rank " << transport.rank();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      for (const std::string& word : words) EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  });
}

TEST(ImportModel, MapMismatchesFailBeforeAnythingIsWritten) {
  auto rng = testing::seeded_rng();
  testing::TempDir dir;
  const LlamaFolder folder = write_llama_folder(dir / "hf", false, rng);
  const CheckpointLayout layout = llama_layout();
  ImportOptions options;
  options.replace = true;  // the errors below come before the existing checkpoint would be replaced
  // A checkpoint already at the path stays as it was.
  testing::run_ranks(2, [&](Transport& transport) {
    import_checkpoint(dir / "hf", dir / "ck", *tensor_map_preset("levanter-llama"), layout, transport);
  });
  const std::string manifest_before = checkpoint::Reader::open(dir / "ck").manifest().tensors.front().name;
  const auto files_before = std::distance(fs::directory_iterator(dir / "ck"), fs::directory_iterator());

  // A head_dim that does not divide q_proj's rows.
  fs::copy(dir / "hf", dir / "bad-dims", fs::copy_options::recursive);
  LlamaDims wrong = folder.dims;
  wrong.head_dim = 3;
  {
    std::ofstream(dir / "bad-dims" / "config.json") << testing::hf_llama_config_json(wrong);
  }
  expect_import_fails(dir / "bad-dims", dir / "ck", layout, options, ErrorCode::kIndivisible,
                      {"model.layers.0.self_attn.q_proj.weight", "rule 1"});
  // The caller's sizes win over config.json's: the same error from good files.
  ImportOptions bad_sizes = options;
  bad_sizes.sizes["head_dim"] = 3;
  expect_import_fails(dir / "hf", dir / "new", layout, bad_sizes, ErrorCode::kIndivisible, {"q_proj", "rule 1"});

  // A tensor no rule matches, and a layer missing from a stack.
  std::vector<TensorSpec> specs = folder.specs;
  TensorBytes bytes = folder.bytes;
  specs.push_back({"model.extra.weight", DType::kF32, {3}});
  bytes["model.extra.weight"] = Bytes(12);
  testing::write_hf_model_folder(dir / "extra", specs, bytes, 6000, testing::hf_llama_config_json(folder.dims));
  expect_import_fails(dir / "extra", dir / "ck", layout, options, ErrorCode::kInvalidArgument, {"model.extra.weight"});
  specs = folder.specs;
  specs.erase(std::find_if(specs.begin(), specs.end(),
                           [](const TensorSpec& s) { return s.name == "model.layers.1.mlp.up_proj.weight"; }));
  testing::write_hf_model_folder(dir / "gap", specs, bytes, 6000, testing::hf_llama_config_json(folder.dims));
  expect_import_fails(dir / "gap", dir / "ck", layout, options, ErrorCode::kMissingTensor, {"up_proj", "rule 6"});

  // A layout rule that does not fit the framework tensor it matches, when strictness is asked for.
  CheckpointLayout bad_layout = layout;
  bad_layout.rules.insert(bad_layout.rules.begin(), {"transformer.norm.weight", PartitionSpec::parse("data,model")});
  bad_layout.strict = true;
  expect_import_fails(dir / "hf", dir / "ck", bad_layout, options, ErrorCode::kRank, {"transformer.norm.weight"});
  // A layout for another job, or over devices the job does not have.
  const CheckpointLayout one_process{layout.mesh, Topology::uniform(4, 1), {}, "model"};
  expect_import_fails(dir / "hf", dir / "ck", one_process, options, ErrorCode::kInvalidArgument, {"1 processes", "the job 2"});
  const CheckpointLayout far_device{Mesh({{"model", 4}}, {0, 1, 2, 5}), Topology::uniform(4, 2), {}, "model"};
  expect_import_fails(dir / "hf", dir / "ck", far_device, options, ErrorCode::kUnknownDevice, {"device 5"});
  // Without --force an existing checkpoint is refused before any reading.
  ImportOptions keep = options;
  keep.replace = false;
  expect_import_fails(dir / "hf", dir / "ck", layout, keep, ErrorCode::kAlreadyExists, {"already exists"});

  EXPECT_FALSE(fs::exists(dir / "new"));
  EXPECT_EQ(checkpoint::Reader::open(dir / "ck").manifest().tensors.front().name, manifest_before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "ck"), fs::directory_iterator()), files_before);
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();  // nothing left half-made
  }
}

// ---- checkpoints ----

TEST(ImportModel, CheckpointRestoresToTheImportedArrays) {
  auto rng = testing::seeded_rng();
  testing::TempDir dir;
  const LlamaFolder folder = write_llama_folder(dir / "hf", true, rng);
  const CheckpointLayout layout = llama_layout();
  const TensorMap map = *tensor_map_preset("levanter-llama");
  testing::run_ranks(2, [&](Transport& transport) {
    const ImportResult result = import_checkpoint(dir / "hf", dir / "ck", map, layout, transport);
    EXPECT_EQ(result.tensors, testing::levanter_llama_specs(folder.dims, true).size());
    EXPECT_TRUE(result.arrays.empty());  // saved, not kept
    const std::vector<NamedArray> imported = import_arrays(dir / "hf", map, layout, transport).arrays;
    std::vector<RestoreTarget> targets;
    for (const NamedArray& array : imported) targets.push_back({array.name, array.array.sharding(), layout.topology});
    const std::vector<NamedArray> restored = restore_checkpoint(dir / "ck", targets, transport).arrays;
    ASSERT_EQ(restored.size(), imported.size());
    for (size_t t = 0; t < restored.size(); ++t) {
      ASSERT_EQ(restored[t].name, imported[t].name);
      ASSERT_EQ(restored[t].array.shards().size(), imported[t].array.shards().size());
      for (size_t s = 0; s < restored[t].array.shards().size(); ++s) {
        const auto a = restored[t].array.shards()[s].buffer.bytes(), b = imported[t].array.shards()[s].buffer.bytes();
        EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end())) << restored[t].name;
      }
    }
  });
  const checkpoint::Reader reader = checkpoint::Reader::open(dir / "ck");
  const auto& manifest = reader.manifest();
  ASSERT_TRUE(manifest.metadata.has_value());
  const safetensors::Metadata expected = {{std::string(kHfConfigMetadataKey), testing::hf_llama_config_json(folder.dims)},
                                          {std::string(kLoraConfigMetadataKey), testing::hf_adapter_config_json(folder.dims)}};
  EXPECT_EQ(*manifest.metadata, expected);
  // Onto another layout and process count, the elements the map says.
  testing::run_ranks(1, [&](Transport& transport) {
    const Mesh mesh({{"m", 4}}, {3, 1, 0, 2});
    std::vector<RestoreTarget> targets;
    for (const TensorSpec& spec : testing::levanter_llama_specs(folder.dims, true)) {
      const NamedSharding sharding(mesh, PartitionSpec::parse(spec.shape.size() > 1 && spec.shape[1] % 4 == 0 ? "None,m" : ""));
      targets.push_back({spec.name, sharding, Topology::uniform(4, 1)});
    }
    for (const NamedArray& array : restore_checkpoint(dir / "ck", targets, transport).arrays) EXPECT_EQ(mismatch(array, folder), "");
  });
}

TEST(ImportModel, PeftAdapterFolderImportsItsFactors) {
  auto rng = testing::seeded_rng();
  testing::TempDir dir;
  const LlamaDims dims;
  const std::vector<TensorSpec> lora = testing::hf_lora_specs(dims);
  LlamaFolder folder;
  folder.specs = lora;
  for (const TensorSpec& spec : lora) folder.bytes[spec.name] = testing::random_values(spec, rng);
  testing::write_peft_files(dir / "adapter", lora, folder.bytes, testing::hf_adapter_config_json(dims));
  const CheckpointLayout layout = llama_layout();
  ImportOptions options;
  // No config.json in an adapter folder: o_proj's A splits (heads head_dim) only with the sizes given.
  expect_import_fails(dir / "adapter", dir / "ck", layout, options, ErrorCode::kInvalidArgument, {"lora_B", "rule 13", "sizes"});
  options.sizes = {{"heads", dims.heads}, {"head_dim", dims.head_dim}, {"kv_heads", dims.kv_heads},
                   {"q_per_group", dims.q_per_group()}};
  testing::run_ranks(2, [&](Transport& transport) {
    const ImportResult result = import_arrays(dir / "adapter", *tensor_map_preset("levanter-llama"), layout, transport, options);
    const std::vector<NamedArray>& arrays = result.arrays;
    ASSERT_EQ(arrays.size(), 4u);
    for (const NamedArray& array : arrays) {
      EXPECT_NE(array.name.find(".lora.lora_"), std::string::npos) << array.name;
      EXPECT_EQ(mismatch(array, folder), "");
    }
    ASSERT_EQ(result.metadata.size(), 1u);
    EXPECT_EQ(result.metadata[0].first, kLoraConfigMetadataKey);
  });
}

}  // namespace
}  // namespace reshard
