// Helpers for the export tests: a model saved as a checkpoint by 2 in-process
// ranks, and an output folder read back tensor by tensor or file by file.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pipelines/support/levanter_model.h"
#include "reshard/formats/safetensors_header.h"
#include "reshard/pipelines/peft_adapter.h"

namespace reshard::testing {

// The LoRA config of levanter_model's factors: r 2, lora_alpha 4, base
// "test/llama" (each test adds what it checks).
LoraConfig levanter_lora_config();

// Saves `model` (laid out as levanter_arrays lays it out) at `path`.
void save_levanter_checkpoint(const std::vector<FrameworkTensor>& model, const std::filesystem::path& path,
                              std::optional<safetensors::Metadata> metadata);

// One tensor read from a written folder.
struct WrittenTensor {
  DType dtype = DType::kF32;
  Shape shape;
  std::vector<std::byte> bytes;
};

// Every tensor of a Hugging Face or PEFT folder, by name.
std::map<std::string, WrittenTensor> read_folder_tensors(const std::filesystem::path& folder);

// Every file of a folder, by name, with its bytes.
std::map<std::string, std::string> read_folder_files(const std::filesystem::path& folder);

}  // namespace reshard::testing
