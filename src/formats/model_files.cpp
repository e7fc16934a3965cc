#include "reshard/formats/model_files.h"

#include <system_error>

#include <fmt/format.h>

#include "reshard/formats/hf_folder.h"
#include "reshard/layout/error.h"

namespace reshard {

std::string_view model_format_name(ModelFormat format) {
  switch (format) {
    case ModelFormat::kSafetensors:
      return "safetensors";
    case ModelFormat::kHf:
      return "hf";
    case ModelFormat::kPeft:
      return "peft";
  }
  return "unknown";
}

ModelFiles open_model_files(const std::filesystem::path& path, safetensors::ReadMode mode) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (status.type() == std::filesystem::file_type::not_found) {
    throw Error(ErrorCode::kIo, fmt::format("{}: no such file or folder", path.string()));
  }
  ModelFiles model;
  model.path = path;
  if (status.type() != std::filesystem::file_type::directory) {
    std::vector<safetensors::File> files{safetensors::File::open(path, mode)};
    model.catalog = TensorCatalog(std::move(files), {path.filename().string()});
    return model;
  }
  HfFolder folder = HfFolder::open(path, mode);
  model.format = folder.kind == HfFolderKind::kPeftAdapter ? ModelFormat::kPeft : ModelFormat::kHf;
  model.index = std::move(folder.index);
  model.catalog = std::move(folder.catalog);
  return model;
}

}  // namespace reshard
