// Making a staging folder a full copy of the folder it will replace, without
// copying bytes where the file system can help: the old folder's entries that
// stay are hard-linked into it.
#pragma once

#include <filesystem>
#include <span>
#include <string>

namespace reshard::storage_detail {

// Puts into `to` every entry of `from` that is not named in `skip` (top-level
// names) and that `to` does not have already (what a writer put there wins):
// files hard-linked (copied and fsynced where the file system cannot link),
// folders recreated with their entries, symbolic links copied as links. The
// folders it creates are fsynced. Error(kIo) naming the entry that cannot be
// carried (a socket, a device, an unreadable file).
void link_entries_into(const std::filesystem::path& from, const std::filesystem::path& to,
                       std::span<const std::string> skip);

}  // namespace reshard::storage_detail
