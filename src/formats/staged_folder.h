// Output folders that appear complete or not at all: files are written into a
// hidden sibling folder, which is moved into place once everything is there.
#pragma once

#include <filesystem>
#include <span>
#include <string>

namespace reshard {

class StagedFolder {
 public:
  // Prepares to write `final_path`. It may be absent or an empty folder; a
  // folder with files in it is refused (Error kInvalidArgument) unless
  // `replace`, and so is anything that is not a folder. Missing parent folders
  // are created. The staging folder is created at once.
  StagedFolder(std::filesystem::path final_path, bool replace);
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;
  // Removes the staging folder and all in it unless commit() ran.
  ~StagedFolder();

  // Where to write the files.
  const std::filesystem::path& staging_path() const { return staging_; }
  const std::filesystem::path& final_path() const { return final_; }

  // Puts the staged files in place. A new (or empty) final folder is replaced
  // by the staging folder in one rename. An existing one (with `replace`) first
  // loses the files named in `stale` that exist there, then receives the
  // staged files one rename each in `move_order` (put the file that makes the
  // folder look complete, such as an index, last); its other files stay.
  void commit(std::span<const std::string> stale, std::span<const std::string> move_order);

 private:
  std::filesystem::path final_;
  std::filesystem::path staging_;
  bool merge_into_existing_ = false;
  bool committed_ = false;
};

}  // namespace reshard
