#include "reshard/formats/model_files.h"

#include <system_error>

#include <fmt/format.h>

#include "reshard/formats/hf_folder.h"
#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"
#include "reshard/storage/storage_error.h"

namespace reshard {
namespace {

ModelFiles open_lone_file(const storage::Location& path, safetensors::ReadMode mode) {
  ModelFiles model;
  model.path = path;
  std::vector<safetensors::File> files{safetensors::File::open(path, mode)};
  model.catalog = TensorCatalog(std::move(files), {path.name()});
  return model;
}

}  // namespace

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

ModelFiles open_model_files(const storage::Location& path, safetensors::ReadMode mode) {
  ModelFiles model;
  model.path = path;
  if (path.is_local()) {
    std::error_code ec;
    const std::filesystem::file_status status = std::filesystem::status(path.local_path(), ec);
    if (status.type() == std::filesystem::file_type::not_found) {
      throw Error(ErrorCode::kIo, fmt::format("{}: no such file or folder", path.str()));
    }
    if (status.type() != std::filesystem::file_type::directory) return open_lone_file(path, mode);
  } else {
    // An object is a file; a prefix with objects under it, a folder.
    const std::shared_ptr<storage::Store> store = storage::open_store(path);
    if (store->stat(path)) return open_lone_file(path, mode);
    if (store->list(path).empty()) {
      throw Error(storage::kObjectNotFound, fmt::format("{}: no such object, and no objects under it", path.str()));
    }
  }
  HfFolder folder = HfFolder::open(path, mode);
  model.format = folder.kind == HfFolderKind::kPeftAdapter ? ModelFormat::kPeft : ModelFormat::kHf;
  model.index = std::move(folder.index);
  model.catalog = std::move(folder.catalog);
  return model;
}

}  // namespace reshard
