// A folder one process writes whole (a merged model, a PEFT adapter, a
// Hugging Face folder), local or in an object store, with the commit rules
// of each:
// - local: a StagedFolder (storage/local/staged_folder.h): the files are
//   written into a staging folder that appears, or replaces the old folder,
//   in one step; a failure leaves what was there.
// - a store, which has no rename: each file is written at its final name and
//   appears whole. The writer puts the weights first, the configs next and
//   the index (or a lone weight file) last, so that the folder looks complete
//   only once it is; the old folder's stale files go after. A failure takes
//   back the files written into a folder that was empty (a replaced folder's
//   overwritten files cannot be restored).
// An existing folder with files is refused before anything is written,
// unless replacing.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "reshard/storage/location.h"
#include "storage/local/staged_folder.h"

namespace reshard::formats_detail {

class OutputFolder {
 public:
  // Error(kAlreadyExists) for a folder with files unless `replace`;
  // Error(kInvalidArgument) when `folder` is a file (an object).
  OutputFolder(const storage::Location& folder, bool replace);
  OutputFolder(const OutputFolder&) = delete;
  OutputFolder& operator=(const OutputFolder&) = delete;
  // Unless committed: removes the staging folder, or the objects written into
  // a store's folder that was empty.
  ~OutputFolder();

  const storage::Location& folder() const { return folder_; }
  // Where the files are written now: the staging folder, or the folder itself.
  storage::Location files_at() const;
  // Where file `name` is written now: files_at().child(name).
  storage::Location file(std::string_view name) const { return files_at().child(name); }
  // The names of the files at the top of the folder before anything was written.
  const std::vector<std::string>& files_before() const { return files_before_; }
  // Writes a small file (a config, the index) whole.
  void write_small(std::string_view name, std::string_view text) const;

  // Puts the folder in place. `stale`: files of the old folder that go unless
  // written anew; `written`: the files written, the one that makes the folder
  // look complete last.
  void commit(std::span<const std::string> stale, std::span<const std::string> written);

 private:
  storage::Location folder_;
  std::vector<std::string> files_before_;
  std::optional<storage_detail::StagedFolder> staged_;  // local folders
  bool was_empty_ = false;  // a store's folder: whether it held nothing at first
  bool committed_ = false;
};

// The top-level file names of `folder` (a local folder or a prefix), sorted;
// none when there is no such folder.
std::vector<std::string> top_level_files(const storage::Location& folder);

}  // namespace reshard::formats_detail
