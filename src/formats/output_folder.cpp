#include "formats/output_folder.h"

#include <algorithm>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"

namespace reshard::formats_detail {

std::vector<std::string> top_level_files(const storage::Location& folder) {
  std::vector<std::string> names;
  for (const storage::ListEntry& entry : storage::open_store(folder)->list(folder)) {
    if (entry.name.find('/') == std::string::npos) names.push_back(entry.name);
  }
  return names;  // list() sorts
}

OutputFolder::OutputFolder(const storage::Location& folder, bool replace) : folder_(folder) {
  if (folder_.is_local()) {
    staged_.emplace(folder_.local_path(), replace);
    if (staged_->replaces_files()) files_before_ = top_level_files(folder_);
    return;
  }
  const std::shared_ptr<storage::Store> store = storage::open_store(folder_);
  if (!folder_.key().empty() && store->stat(folder_)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: exists and is not a folder", folder_.str()));
  }
  const std::vector<storage::ListEntry> entries = store->list(folder_);
  if (!entries.empty() && !replace) {
    throw Error(ErrorCode::kAlreadyExists,
                fmt::format("{}: already exists and is not empty (replacing it rewrites only its weight files)",
                            folder_.str()));
  }
  files_before_ = top_level_files(folder_);
  was_empty_ = entries.empty();
}

OutputFolder::~OutputFolder() {
  if (committed_ || staged_ || !was_empty_) return;  // a staging folder removes itself
  try {
    const std::shared_ptr<storage::Store> store = storage::open_store(folder_);
    for (const storage::ListEntry& entry : store->list(folder_)) store->remove(folder_.child(entry.name));
  } catch (...) {
    // The store may be the failure: what stays is whole files, never a part.
  }
}

storage::Location OutputFolder::files_at() const {
  return staged_ ? storage::Location(staged_->staging_path()) : folder_;
}

void OutputFolder::write_small(std::string_view name, std::string_view text) const {
  const storage::Location where = file(name);
  storage::open_store(where)->write_all(where, text, storage::IfExists::kReplace);
}

void OutputFolder::commit(std::span<const std::string> stale, std::span<const std::string> written) {
  if (staged_) {
    staged_->commit(stale, written);
    committed_ = true;
    return;
  }
  committed_ = true;  // every new file is in place: a failure below leaves a complete folder
  const std::shared_ptr<storage::Store> store = storage::open_store(folder_);
  for (const std::string& name : stale) {
    if (std::find(written.begin(), written.end(), name) == written.end()) store->remove(folder_.child(name));
  }
}

}  // namespace reshard::formats_detail
