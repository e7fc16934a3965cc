// The one commit protocol of local output folders: the files are written into
// a hidden sibling (".NAME.tmp-reshard-HOST-PID.START-NONCE", staging_name.h), which
// then takes the folder's place, so that the folder appears complete or not
// at all and a failure leaves what was there before.
//
// - An absent or empty folder: the staging folder is renamed into place.
// - A folder with files (only with `replace`): the staging folder is first
//   made a full copy of the result, the old folder's files that stay (all but
//   the stale ones and those written anew) hard-linked into it (copied where
//   the file system cannot link); then the two are swapped in one step
//   (renameat2 RENAME_EXCHANGE) and the old folder, now at the staging name,
//   is removed. Until the swap the old folder is untouched.
// - Only where the file system lacks RENAME_EXCHANGE (some network and FUSE
//   file systems, kernels before 3.15): the old way, file by file — the
//   stale files are removed, then each staged file renamed into place in the
//   order given. Each file is then atomic, the folder not: a crash midway
//   leaves old and new files side by side.
//
// Several processes may write into one staging folder (its path passed
// around); one commits. A new writer of a folder first removes the staging
// folders that dead writers of it left (same host, process gone).
#pragma once

#include <filesystem>
#include <span>
#include <string>

namespace reshard::storage_detail {

class StagedFolder {
 public:
  // Prepares to write `final_path`: absent, an empty folder, or (only with
  // `replace`) a folder with files — else Error(kAlreadyExists); anything
  // that is not a folder is Error(kInvalidArgument). Missing parent folders
  // are created, and the staging folder.
  StagedFolder(std::filesystem::path final_path, bool replace);
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;
  // Removes the staging folder and all in it unless commit() ran.
  ~StagedFolder();

  // Where to write the files.
  const std::filesystem::path& staging_path() const { return staging_; }
  const std::filesystem::path& final_path() const { return final_; }
  // Whether a folder with files is being replaced.
  bool replaces_files() const { return replace_existing_; }

  // Puts the staged files in place. Of an old folder's files, those named in
  // `stale` go, the rest stay (files staged under the same names replace
  // them). `move_order` names the staged files, the one that makes the
  // folder look complete (an index) last: only the file-by-file fallback uses it.
  void commit(std::span<const std::string> stale, std::span<const std::string> move_order);

 private:
  void commit_file_by_file(std::span<const std::string> stale, std::span<const std::string> move_order);

  std::filesystem::path final_;
  std::filesystem::path staging_;
  bool replace_existing_ = false;
  bool committed_ = false;
};

}  // namespace reshard::storage_detail
