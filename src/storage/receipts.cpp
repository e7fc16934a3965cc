#include "storage/receipts.h"

#include <algorithm>

#include <fmt/format.h>

#include "reshard/layout/error.h"

namespace reshard::storage_detail {

void check_receipts(const storage::ParallelUpload& upload, std::vector<storage::PartReceipt>& receipts) {
  std::sort(receipts.begin(), receipts.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  const uint32_t count = upload.parts().count();
  for (size_t i = 0; i < receipts.size(); ++i) {
    if (receipts[i].index != i) {
      const bool repeated = receipts[i].index < i;
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: completing an upload of {} parts: part {} {}", upload.destination().str(), count,
                              repeated ? receipts[i].index : static_cast<uint32_t>(i),
                              repeated ? "has two receipts" : "has no receipt"));
    }
  }
  if (receipts.size() != count) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: completing an upload of {} parts with {} receipts", upload.destination().str(),
                            count, receipts.size()));
  }
}

}  // namespace reshard::storage_detail
