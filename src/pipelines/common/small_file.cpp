#include "pipelines/common/small_file.h"

#include <cstdint>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"
#include "reshard/storage/storage_error.h"

namespace reshard::pipelines_detail {

namespace {
constexpr uint64_t kMaxConfigBytes = 10'000'000;  // real configs are kilobytes
}  // namespace

std::string read_small_file(const storage::Location& where) {
  const std::shared_ptr<storage::Store> store = storage::open_store(where);
  const std::optional<storage::ObjectInfo> info = store->stat(where);
  if (!info) throw Error(storage::kObjectNotFound, fmt::format("{}: cannot read: no such file", where.str()));
  if (info->size > kMaxConfigBytes) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: {} bytes is too large for a config", where.str(), info->size));
  }
  return store->read_all(where, kMaxConfigBytes);
}

bool file_exists(const storage::Location& where) { return storage::open_store(where)->stat(where).has_value(); }

}  // namespace reshard::pipelines_detail
