#include "pipelines/common/carried_files.h"

#include <algorithm>
#include <system_error>

#include <fmt/format.h>

#include "formats/atomic_file.h"
#include "pipelines/common/hf_config_dtype.h"
#include "pipelines/common/small_file.h"
#include "reshard/layout/error.h"

namespace reshard::pipelines_detail {
namespace {

namespace fs = std::filesystem;

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

std::vector<std::string> carry_model_files(const fs::path& folder, const fs::path& staging, std::optional<DType> dtype) {
  std::vector<std::string> carried;
  std::error_code ec;
  if (!fs::is_directory(folder, ec)) return carried;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, ec)) {
    const std::string name = entry.path().filename().string();
    std::error_code entry_ec;
    if (!entry.is_regular_file(entry_ec) || !is_carried_file_name(name)) continue;
    const uintmax_t size = entry.file_size(entry_ec);
    if (entry_ec || size > kMaxCarriedFileBytes) continue;
    if (name == kConfigFileName && dtype) {
      write_file_atomically(staging / name, with_config_dtype(read_small_file(entry.path()), *dtype, entry.path().string()));
    } else if (!fs::copy_file(entry.path(), staging / name, fs::copy_options::overwrite_existing, entry_ec) ||
               entry_ec) {
      throw Error(ErrorCode::kIo,
                  fmt::format("copying {} into the output: {}", entry.path().string(), entry_ec.message()));
    }
    carried.push_back(name);
  }
  if (ec) throw Error(ErrorCode::kIo, fmt::format("listing {}: {}", folder.string(), ec.message()));
  std::sort(carried.begin(), carried.end());
  return carried;
}

}  // namespace reshard::pipelines_detail
