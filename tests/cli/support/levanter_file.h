// A small Levanter-style Llama (framework names, stacked layers, LoRA on q
// and v) as one .safetensors file with random values, whose metadata holds
// the configs an export reads, ready for `reshard convert` to a checkpoint.
#pragma once

#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace reshard::testing {

// Writes the file; returns each tensor's bytes by name. `with_configs` puts
// config.json and adapter_config.json texts in the metadata; `factors_only`
// writes only the LoRA factors (a LoRA run's state), with the values a whole
// file from the same `rng` state holds.
std::map<std::string, std::vector<std::byte>> write_levanter_file(const std::filesystem::path& path,
                                                                  std::mt19937_64& rng, bool with_configs,
                                                                  bool factors_only = false);

}  // namespace reshard::testing
