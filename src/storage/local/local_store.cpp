#include "storage/local/local_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/storage/storage_error.h"
#include "storage/local/local_upload.h"
#include "storage/local/posix_io.h"
#include "storage/local/staging_name.h"

namespace reshard::storage_detail {
namespace {

namespace fs = std::filesystem;
using storage::Location;

[[noreturn]] void not_found(const fs::path& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    throw Error(storage::kObjectNotFound, fmt::format("{}: is a folder, not a file", path.string()));
  }
  throw Error(storage::kObjectNotFound, fmt::format("{}: no such file", path.string()));
}

UniqueFd open_for_reading(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) not_found(path);
  if (fd < 0) fail_io("opening", path, errno);
  struct stat info {};
  if (::fstat(fd, &info) == 0 && S_ISDIR(info.st_mode)) {
    ::close(fd);
    not_found(path);
  }
  return UniqueFd(fd);
}

class LocalStore final : public storage::Store {
 public:
  std::string_view name() const override { return "local"; }

  std::optional<storage::ObjectInfo> stat(const Location& object) override {
    const fs::path path = object.local_path();
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
      fail_io("inspecting", path, errno);
    }
    if (!S_ISREG(info.st_mode)) return std::nullopt;
    return storage::ObjectInfo{static_cast<uint64_t>(info.st_size),
                               fmt::format("{}:{}:{}", info.st_ino, info.st_mtim.tv_sec, info.st_mtim.tv_nsec)};
  }

  void read(const Location& object, uint64_t offset, std::span<std::byte> out) override {
    const fs::path path = object.local_path();
    const UniqueFd fd = open_for_reading(path);
    pread_exactly(fd.get(), offset, out, path);
  }

  void read_ranges(const Location& object, std::span<const storage::RangeRead> ranges) override {
    const fs::path path = object.local_path();
    const UniqueFd fd = open_for_reading(path);
    for (const storage::RangeRead& range : ranges) pread_exactly(fd.get(), range.offset, range.out, path);
  }

  std::string read_all(const Location& object, uint64_t limit) override {
    const fs::path path = object.local_path();
    const UniqueFd fd = open_for_reading(path);
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0) fail_io("inspecting", path, errno);
    const auto size = static_cast<uint64_t>(info.st_size);
    if (size > limit) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: is {} bytes, more than the {} a file of this kind may have", path.string(), size,
                              limit));
    }
    std::string text(size, '\0');
    pread_exactly(fd.get(), 0, std::as_writable_bytes(std::span(text.data(), text.size())), path);
    return text;
  }

  void write_all(const Location& object, std::string_view bytes, storage::IfExists if_exists) override {
    const auto upload = LocalUpload::start(object, storage::PartLayout::single(bytes.size()), if_exists);
    upload->write_at(0, std::as_bytes(std::span(bytes.data(), bytes.size())));
    upload->complete({storage::PartReceipt{0, ""}});
  }

  std::vector<storage::ListEntry> list(const Location& prefix) override {
    const fs::path root = prefix.local_path();
    std::vector<storage::ListEntry> entries;
    std::error_code ec;
    if (!fs::is_directory(root, ec)) return entries;
    for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      entries.push_back({fs::relative(it->path(), root).generic_string(), static_cast<uint64_t>(it->file_size(ec))});
    }
    if (ec) fail_io("listing", root, ec.value());
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    return entries;
  }

  void remove(const Location& object) override {
    const fs::path path = object.local_path();
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail_io("removing", path, errno);
  }

  storage::PartRules part_rules() const override { return storage::PartRules{}; }

  std::unique_ptr<storage::ParallelUpload> start_upload(const Location& object, const storage::PartLayout& layout,
                                                        storage::IfExists if_exists) override {
    return LocalUpload::start(object, layout, if_exists);
  }

  std::unique_ptr<storage::ParallelUpload> join_upload(const Location& object, const storage::PartLayout& layout,
                                                       std::string_view handle) override {
    return LocalUpload::join(object, layout, handle);
  }

  size_t abort_stale_uploads(const Location& object) override {
    return remove_dead_stagings(object.local_path());
  }

  std::vector<std::string> unfinished_uploads(const Location& where) override {
    const std::filesystem::path path = where.local_path();
    std::vector<std::filesystem::path> found = dead_stagings(path);
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      for (std::filesystem::path& inside : dead_stagings_in(path)) found.push_back(std::move(inside));
    }
    std::vector<std::string> names;
    for (const std::filesystem::path& staging : found) names.push_back(staging.lexically_normal().string());
    return names;
  }
};

}  // namespace

std::shared_ptr<storage::Store> local_store() {
  static const std::shared_ptr<storage::Store> store = std::make_shared<LocalStore>();
  return store;
}

}  // namespace reshard::storage_detail
