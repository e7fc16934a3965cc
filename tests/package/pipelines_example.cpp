// Every pipeline called through <reshard/reshard.h> alone, as a program
// outside reshard would: a model saved as a checkpoint and restored on another
// layout, exported through a tensor map to a Hugging Face folder, converted,
// imported back, exported as a PEFT adapter and merged, and an adapter written
// from memory. Two processes that are threads of this one. Exit 0 and "every
// pipeline ran" when every result holds.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "reshard/reshard.h"

using namespace reshard;
namespace fs = std::filesystem;

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("failed: " + what);
}

// A [rows, cols] f32 array over Mesh('x': 2), element (i, j) = seed + i * cols + j.
ShardedArray make_array(int64_t rows, int64_t cols, float seed, const char* spec, Transport& transport) {
  const Topology topology = Topology::uniform(2, 2);
  const NamedSharding sharding(Mesh({{"x", 2}}, {0, 1}), PartitionSpec::parse(spec));
  return ShardedArray::from_function({rows, cols}, DType::kF32, sharding, topology, transport.rank(),
                                     [&](std::span<const int64_t> index, std::span<std::byte> out) {
                                       const float v = seed + static_cast<float>(index[0] * cols + index[1]);
                                       std::memcpy(out.data(), &v, sizeof v);
                                     });
}

void run_pipelines(const fs::path& dir, Transport& transport) {
  std::vector<NamedArray> model;
  model.push_back({"stacked.w", make_array(4, 6, 0, "x", transport)});
  model.push_back({"w.lora_a", make_array(2, 6, 100, "", transport)});
  model.push_back({"w.lora_b", make_array(4, 2, 200, "x", transport)});
  save_checkpoint(model, dir / "ckpt", transport);

  const Topology topology = Topology::uniform(2, 2);
  const NamedSharding columns(Mesh({{"x", 2}}, {1, 0}), PartitionSpec::parse("None,x"));
  const std::vector<RestoreTarget> targets = {{"stacked.w", columns, topology}};
  const std::vector<NamedArray> restored = restore_checkpoint(dir / "ckpt", targets, transport).arrays;
  require(restored.size() == 1 && restored[0].array.sharding() == columns, "restore_checkpoint");

  const TensorMap map = parse_tensor_map(R"({"rules": [
      {"from": "stacked.w", "to": "model.w.weight"},
      {"from": "w.lora_a", "to": "base_model.model.model.w.lora_A.weight", "optional": true},
      {"from": "w.lora_b", "to": "base_model.model.model.w.lora_B.weight", "optional": true}]})",
                                         "map");
  ExportOptions to_model;
  to_model.hf_config_json = R"({"model_type": "llama"})";
  require(export_arrays(model, dir / "hf", map, transport, to_model).tensors == 1, "export_arrays");

  ConvertOptions convert;
  convert.output = ConvertOutput::kHfFolder;
  require(convert_model(dir / "hf", dir / "hf-copy", transport, convert).tensors == 1, "convert_model");

  const CheckpointLayout framework{Mesh({{"x", 2}}, {0, 1}), topology, {}, std::string("x"), false};
  const std::vector<NamedArray> imported = import_arrays(dir / "hf", map, framework, transport).arrays;
  require(imported.size() == 1 && imported[0].name == "stacked.w", "import_arrays");

  ExportOptions to_adapter;
  to_adapter.kind = ExportKind::kAdapterOnly;
  to_adapter.lora_config = parse_lora_config(R"({"peft_type": "LORA", "r": 2, "lora_alpha": 4})", "config");
  require(export_checkpoint(dir / "ckpt", dir / "adapter", map, transport, to_adapter).tensors == 2,
          "export_checkpoint");

  if (transport.rank() == 0) {
    require(merge_lora_folder(dir / "hf", dir / "adapter", dir / "merged").merged == 1, "merge_lora_folder");
    const std::vector<safetensors::TensorSpec> factors = {
        {"base_model.model.model.w.lora_A.weight", DType::kF32, {2, 6}},
        {"base_model.model.model.w.lora_B.weight", DType::kF32, {4, 2}}};
    const std::vector<float> zeros(12, 0.0F);
    const WritePeftAdapterResult written = write_peft_adapter(
        to_adapter.lora_config.value(), factors,
        [&](const safetensors::TensorInfo& tensor, const ByteSink& sink) {
          sink(std::as_bytes(std::span(zeros)).first(static_cast<size_t>(tensor.byte_size())));
        },
        dir / "written-adapter");
    require(written.files == 2 && written.tensors == 2 && written.bytes == 80, "write_peft_adapter");
  }
}

}  // namespace

int main() {
  const fs::path dir = fs::temp_directory_path() / ("reshard-consumer-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  try {
    InProcessGroup group(2);
    group.run([&](Transport& transport) { run_pipelines(dir, transport); });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    fs::remove_all(dir);
    return 1;
  }
  fs::remove_all(dir);
  std::printf("every pipeline ran\n");
  return 0;
}
