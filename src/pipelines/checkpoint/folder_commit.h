// The commit of a checkpoint folder: staged in a hidden sibling, put in
// place by one rename (an exchange when replacing), the parent fsynced.
#pragma once

#include <filesystem>
#include <string_view>

namespace reshard::pipelines_detail {

// "out/" and "out" name the same folder.
std::filesystem::path normalized_folder(const std::filesystem::path& path);

// ".NAME.tmp-reshard-ckpt" beside `final_path`: the same on every process.
std::filesystem::path staging_folder_for(const std::filesystem::path& final_path);

// Checks `final_path` may be written (absent, an empty folder, or with
// `replace` a checkpoint; never anything else), then makes an empty staging
// folder, removing one a crashed save left. Error(kInvalidArgument) / kIo.
void prepare_staging(const std::filesystem::path& final_path, bool replace);

// Writes the manifest into the staging folder (fsynced), then puts the folder
// at `final_path` in one rename: an atomic exchange with a checkpoint already
// there, whose old folder is then removed. Fsyncs the parent.
void commit_staging(const std::filesystem::path& final_path, std::string_view manifest_bytes);

// Removes the staging folder of `final_path`, ignoring errors.
void abandon_staging(const std::filesystem::path& final_path) noexcept;

}  // namespace reshard::pipelines_detail
