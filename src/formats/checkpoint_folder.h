// Where a checkpoint's files are, a local folder or a prefix of objects: its
// manifest's text and its data files' sizes, with the same checks and
// messages either way, so that the reader above it never asks which.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "reshard/storage/location.h"
#include "reshard/storage/store.h"

namespace reshard::formats_detail {

class CheckpointFolder {
 public:
  // An object folder is listed once here: one request gives every data
  // file's size, where a stat per file would cost one each.
  explicit CheckpointFolder(storage::Location folder);

  const storage::Location& location() const { return folder_; }

  // The manifest's whole text. Error(kIo) naming the folder when it is not
  // there ("no such checkpoint folder") or has no manifest (not a checkpoint,
  // or a save that did not finish).
  std::string read_manifest() const;

  // The size of data file `name`; Error(kIo) "data file missing" naming it,
  // with `lost` (what the file holds) appended.
  uint64_t data_file_size(std::string_view name, std::string_view lost) const;

 private:
  storage::Location folder_;
  std::shared_ptr<storage::Store> store_;  // objects only
  std::map<std::string, uint64_t, std::less<>> listed_;  // objects only: name -> size
};

}  // namespace reshard::formats_detail
