#include "storage/local/folder_copy.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "storage/local/posix_io.h"

namespace reshard::storage_detail {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void cannot_carry(const fs::path& entry, const std::error_code& ec) {
  throw Error(ErrorCode::kIo, fmt::format("{}: cannot carry it into the new folder: {}", entry.string(), ec.message()));
}

// A copy must be on disk before the folder holding it replaces the old one.
void copy_durably(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  if (!fs::copy_file(from, to, fs::copy_options::none, ec) || ec) cannot_carry(from, ec);
  const UniqueFd fd = open_file(to, O_RDONLY, "opening");
  fsync_file(fd.get(), to);
}

void carry(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  const fs::file_status status = fs::symlink_status(from, ec);
  if (ec) cannot_carry(from, ec);
  switch (status.type()) {
    case fs::file_type::symlink:
      fs::copy_symlink(from, to, ec);
      if (ec) cannot_carry(from, ec);
      return;
    case fs::file_type::directory:
      link_entries_into(from, to, {});
      return;
    case fs::file_type::regular:
      // Another file system, a hard-link limit or a file system without links: copy.
      if (::link(from.c_str(), to.c_str()) != 0) copy_durably(from, to);
      return;
    default:
      cannot_carry(from, std::make_error_code(std::errc::not_supported));
  }
}

}  // namespace

void link_entries_into(const fs::path& from, const fs::path& to, std::span<const std::string> skip) {
  std::error_code ec;
  fs::create_directory(to, ec);  // `to` may be there already (the staging folder itself)
  if (ec) cannot_carry(from, ec);
  for (fs::directory_iterator it(from, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    std::error_code exists_ec;
    if (fs::exists(fs::symlink_status(to / name, exists_ec))) continue;
    carry(it->path(), to / name);
  }
  if (ec) cannot_carry(from, ec);
  fsync_folder(to);
  // Last: a folder made read-only like the old one takes no more entries.
  std::error_code ignored;
  fs::permissions(to, fs::status(from, ignored).permissions(), ignored);  // best effort
}

}  // namespace reshard::storage_detail
