#include "pipelines/common/carried_files.h"

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "pipelines/common/hf_config_dtype.h"
#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"

namespace reshard::pipelines_detail {
namespace {

constexpr std::string_view kWeightSuffixes[] = {".safetensors", ".bin",  ".pt",   ".pth",       ".ckpt",
                                                ".h5",          ".msgpack", ".gguf", ".onnx", ".index.json"};
constexpr std::string_view kAdapterFiles[] = {"adapter_config.json", "adapter_model.safetensors",
                                              "adapter_model.bin"};

}  // namespace

bool is_carried_file_name(const std::string& name) {
  if (name.empty() || name.front() == '.') return false;
  if (std::find(std::begin(kAdapterFiles), std::end(kAdapterFiles), name) != std::end(kAdapterFiles)) return false;
  return std::none_of(std::begin(kWeightSuffixes), std::end(kWeightSuffixes),
                      [&](std::string_view suffix) { return name.ends_with(suffix); });
}

std::vector<std::string> carry_model_files(const storage::Location& folder, const storage::Location& into,
                                           std::optional<DType> dtype) {
  const std::shared_ptr<storage::Store> from_store = storage::open_store(folder);
  const std::shared_ptr<storage::Store> into_store = storage::open_store(into);
  std::vector<std::string> carried;
  for (const storage::ListEntry& entry : from_store->list(folder)) {
    // Files at the top only (list() gives the whole subtree), and small ones.
    if (entry.name.find('/') != std::string::npos || !is_carried_file_name(entry.name)) continue;
    if (entry.size > kMaxCarriedFileBytes) continue;
    const storage::Location source = folder.child(entry.name);
    std::string text = from_store->read_all(source, kMaxCarriedFileBytes);
    if (entry.name == kConfigFileName && dtype) text = with_config_dtype(text, *dtype, source.str());
    try {
      into_store->write_all(into.child(entry.name), text, storage::IfExists::kReplace);
    } catch (const Error& e) {
      throw e.with_context(fmt::format("copying {} into the output", source.str()));
    }
    carried.push_back(entry.name);
  }
  return carried;  // list() sorts
}

}  // namespace reshard::pipelines_detail
