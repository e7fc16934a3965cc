// Names of the temporary siblings local writers stage into:
// ".NAME.tmp-reshard-HOST-PID.START-NONCE". The host, process id and the
// process's start time say whose it is, so that a later writer can tell a dead
// writer's leftover from a live one's, even once the id is reused.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace reshard::storage_detail {

// This host's name (as gethostname gives it; "localhost" if it cannot).
const std::string& this_host();

// A fresh staging name for `final_name` owned by this process.
std::string new_staging_name(std::string_view final_name);

struct StagingOwner {
  std::string host;
  long pid = 0;
  // When the process started (clock ticks after boot); absent in names
  // written before it was part of them.
  std::optional<unsigned long long> start;
};

// When process `pid` of this host started (clock ticks after boot, as
// /proc/PID/stat says); none if it does not run or cannot be read.
std::optional<unsigned long long> process_start(long pid);

// Whose staging `entry` is, when it is a staging name for `final_name`.
std::optional<StagingOwner> staging_owner(std::string_view entry, std::string_view final_name);

// Whether the owner is known to be gone: a process of this host that no
// longer runs, or whose id now belongs to a process started at another time. Another host's staging is never taken for dead.
bool owner_is_dead(const StagingOwner& owner);

// The staging siblings of `final_path` (files or folders) whose owner is
// dead, by path, sorted.
std::vector<std::filesystem::path> dead_stagings(const std::filesystem::path& final_path);

// Those of anything in `folder`: the staging names in it whose owner is dead.
std::vector<std::filesystem::path> dead_stagings_in(const std::filesystem::path& folder);

// Removes the staging siblings of `final_path` (files or folders) whose owner
// is dead: what killed writers of the same file or folder left. Returns how
// many. Best effort: what cannot be removed stays, for the next writer.
size_t remove_dead_stagings(const std::filesystem::path& final_path);

}  // namespace reshard::storage_detail
