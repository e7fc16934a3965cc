#include "reshard/pipelines/peft_adapter.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "formats/hf_folder_writer.h"
#include "formats/output_folder.h"
#include "pipelines/lora/peft_keys.h"
#include "reshard/formats/hf_folder.h"
#include "reshard/layout/error.h"

namespace reshard {

using formats_detail::OutputFolder;
using formats_detail::write_produced_file;

namespace {

constexpr std::string_view kASuffix = ".lora_A.weight";
constexpr std::string_view kBSuffix = ".lora_B.weight";

// Module paths that differ from `module` by one leading part, which the base may have.
std::vector<std::string> near_misses(std::string_view module) {
  std::vector<std::string> candidates = {"model." + std::string(module)};
  if (const size_t dot = module.find('.'); dot != std::string_view::npos) {
    candidates.emplace_back(module.substr(dot + 1));
  }
  return candidates;
}

}  // namespace

std::optional<AdapterKey> parse_adapter_key(std::string_view key) {
  if (!key.starts_with(kPeftKeyPrefix)) return std::nullopt;
  key.remove_prefix(kPeftKeyPrefix.size());
  for (const auto& [suffix, factor] : {std::pair{kASuffix, AdapterKey::Factor::kA}, std::pair{kBSuffix, AdapterKey::Factor::kB}}) {
    if (key.size() > suffix.size() && key.ends_with(suffix)) {
      return AdapterKey{std::string(key.substr(0, key.size() - suffix.size())), factor};
    }
  }
  return std::nullopt;
}

std::string adapter_key(std::string_view module, AdapterKey::Factor factor) {
  return fmt::format("{}{}{}", kPeftKeyPrefix, module, factor == AdapterKey::Factor::kA ? kASuffix : kBSuffix);
}

void check_adapter_keys(std::span<const std::string> keys, const std::function<bool(std::string_view)>& base_has,
                        std::string_view base_label) {
  for (const std::string& key : keys) {
    const std::optional<AdapterKey> parsed = parse_adapter_key(key);
    if (!parsed) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("adapter key '{}' is not a LoRA key ('{}<module>.lora_A.weight' or '.lora_B.weight')",
                              key, kPeftKeyPrefix));
    }
    check_adapter_module(key, parsed->module, base_has, base_label);
  }
}

void check_adapter_module(std::string_view key, std::string_view module,
                          const std::function<bool(std::string_view)>& base_has, std::string_view base_label) {
  if (base_has(std::string(module) + ".weight")) return;
  std::string hint;
  for (const std::string& candidate : near_misses(module)) {
    if (base_has(candidate + ".weight")) {
      hint = fmt::format(" (the base has '{}': is the key's module path prefix wrong?)", candidate);
      break;
    }
  }
  throw Error(ErrorCode::kMissingTensor,
              fmt::format("adapter key '{}' names module '{}', which {} does not have (no tensor '{}.weight'); "
                          "PEFT would silently ignore it{}",
                          key, module, base_label, module, hint));
}

std::vector<std::string> target_modules_of(std::span<const std::string> keys) {
  std::set<std::string> names;
  for (const std::string& key : keys) {
    const std::optional<pipelines_detail::PeftKey> parsed = pipelines_detail::parse_peft_key(key);
    if (parsed && (parsed->kind == pipelines_detail::PeftKey::Kind::kA ||
                   parsed->kind == pipelines_detail::PeftKey::Kind::kB)) {
      const size_t dot = parsed->module.rfind('.');
      names.insert(dot == std::string::npos ? parsed->module : parsed->module.substr(dot + 1));
    }
  }
  return {names.begin(), names.end()};
}

WritePeftAdapterResult write_peft_adapter(const LoraConfig& config,
                                          const std::vector<safetensors::TensorSpec>& tensors,
                                          const TensorProducer& produce, const storage::Location& folder,
                                          const WritePeftAdapterOptions& options) {
  const safetensors::FileLayout layout = safetensors::FileLayout::plan(tensors);
  OutputFolder out(folder, options.replace);
  // Weights first, the config last: an adapter with a config is complete.
  const std::vector<std::string> files = {std::string(kPeftAdapterFileName), std::string(kPeftConfigFileName)};
  std::vector<std::string> stale;
  for (const std::string& name : files) {
    if (std::find(out.files_before().begin(), out.files_before().end(), name) != out.files_before().end()) {
      stale.push_back(name);
    }
  }
  write_produced_file(out.file(kPeftAdapterFileName), layout, produce, options.upload);
  out.write_small(kPeftConfigFileName, lora_config_json(config));
  out.commit(stale, files);
  return {.files = files.size(),
          .tensors = tensors.size(),
          .bytes = layout.file_size() - layout.header().data_start()};
}

}  // namespace reshard
