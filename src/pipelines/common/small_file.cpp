#include "pipelines/common/small_file.h"

#include <cstdint>

#include <fmt/format.h>

#include "reshard/layout/error.h"
#include "reshard/storage/open_store.h"

namespace reshard::pipelines_detail {

namespace {
constexpr uint64_t kMaxConfigBytes = 10'000'000;  // real configs are kilobytes
}  // namespace

std::string read_small_file(const storage::Location& where) {
  const std::shared_ptr<storage::Store> store = storage::open_store(where);
  try {
    return store->read_all(where, kMaxConfigBytes);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidArgument) throw;
    throw Error(ErrorCode::kInvalidArgument, fmt::format("{}: too large for a config (more than {} bytes)",
                                                         where.str(), kMaxConfigBytes));
  }
}

}  // namespace reshard::pipelines_detail
